"""Counting XLA compilations in tests (a second batch must compile nothing)."""

from __future__ import annotations

import contextlib

import jax


@contextlib.contextmanager
def count_compilations():
    """Counts XLA backend compilations made while the block runs (``counter[0]``)."""
    counter = [0]

    def listener(name, duration, **kwargs):
        if name == "/jax/core/compile/backend_compile_duration":
            counter[0] += 1

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        yield counter
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
