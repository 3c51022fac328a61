"""Loaded by Python at start-up when this folder is on PYTHONPATH (see run.sh)."""

import nvidia_alias

nvidia_alias.install()
