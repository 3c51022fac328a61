"""Stand-in for DALI's test helper module ``test_utils`` (run.sh links it under that name)."""

import os


def get_dali_extra_path() -> str:
    """The stand-in DALI_extra tree that run.sh builds from the project's shared photos."""
    return os.environ["DALI_EXTRA_PATH"]
