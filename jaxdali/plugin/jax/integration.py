"""Where DALI's JAX plugin keeps its array helpers (``nvidia.dali.plugin.jax.integration``); code and
tests written against DALI reach ``_jax_device`` through ``dax.integration``."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # importing jaxdali.plugin.jax must not import jax
    import jax


def _jax_device(array: jax.Array) -> jax.Device:
    """The one device holding ``array`` (ValueError for an array spread over several)."""
    devices = array.devices()
    if len(devices) != 1:
        raise ValueError(f"the array lives on {len(devices)} devices, not one: {sorted(map(str, devices))}")
    return next(iter(devices))
