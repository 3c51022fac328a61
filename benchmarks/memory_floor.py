"""The memory any JAX loader of these batches needs on this machine, before it holds any data.

Prints the process's PSS (``harness.tree_pss_bytes``) after each step of what jaxdali's
``data_iterator`` has to load: NumPy, JAX, JAX's CPU client (the first computation), jaxdali with
OpenCV, an nvImageCodec decoder; then with one and two float32 batches of the benchmark's shape alive
(the consumer's batch and the next one: the least a loader that prefetches keeps). Run with jaxdali's
interpreter: ``python benchmarks/memory_floor.py [--batch-size 64]``.
"""

from __future__ import annotations

import argparse
import os

import harness


def pss_mb() -> float:
    """This process's PSS in MB (10^6 bytes, as the benchmark reports)."""
    return harness.tree_pss_bytes([os.getpid()]) / 1e6


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args(argv)
    steps: dict[str, float] = {"python": pss_mb()}

    import numpy as np
    steps["numpy"] = pss_mb()
    import jax
    import jax.numpy as jnp
    steps["import jax"] = pss_mb()
    jax.block_until_ready(jnp.ones(4) + 1)
    steps["JAX CPU client (first computation)"] = pss_mb()
    import cv2  # noqa: F401 - measured: the resize of upscales needs it

    import jaxdali  # noqa: F401
    from jaxdali.ops import decoders
    steps["jaxdali + OpenCV"] = pss_mb()
    decoders._decoder("")
    steps["nvImageCodec decoder"] = pss_mb()

    size = harness.OUTPUT_SIZE
    normalise = jax.jit(lambda x: (x.astype(jnp.float32) - 127.5) * (1 / 58.0))
    raw = np.zeros((args.batch_size, size, size, 3), np.uint8)
    batches = [jax.block_until_ready(normalise(raw))]
    steps["+ one float32 batch"] = pss_mb()
    batches.append(jax.block_until_ready(normalise(raw)))
    steps["+ a second float32 batch"] = pss_mb()

    batch_mb = batches[0].nbytes / 1e6
    print(f"PSS, MB (float32 batch {tuple(batches[0].shape)}: {batch_mb:.1f} MB)")
    for name, value in steps.items():
        print(f"  {name:38s} {value:6.0f}")
    return steps


if __name__ == "__main__":
    main()
