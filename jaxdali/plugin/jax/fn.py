"""``jax_function``: a Python function on ``jax.Array`` batches as an operator of a pipeline (DALI's
experimental ``nvidia.dali.plugin.jax.fn.jax_function``).

The function receives whole batches (batch axis first), so its inputs must be dense. Placed on the
device (``device="gpu"``, or inputs that are already there) it is traced into the pipeline's fused
device program, next to the other device operators, and compiled with them: writing an augmentation
in JAX costs no extra dispatch or copy. On the host (``device="cpu"``) it is called once per batch
with host ``jax.Array``s. A function without outputs (``num_outputs=0``) or with a ``sharding`` is
called eagerly once per batch.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

from jaxdali.ops.jax_function import JAX_FUNCTION
from jaxdali.ops.graph import add_op

__all__ = ["jax_function"]


def jax_function(function: Callable | None = None, num_outputs: int = 1,
                 output_layouts: str | Sequence[str] | None = None, sharding: Any = None, device: str | None = None,
                 preserve: bool = True) -> Callable:
    """Turns ``function`` (``jax.Array`` batches in and out) into an operator for pipeline definitions.

    Use it as a decorator, bare or with arguments. The result is called with DataNodes inside a
    ``pipeline_def`` (or ``data_iterator``) function and returns DataNodes::

        @jax_function
        def flip_horizontal(images):          # (batch, H, W, C) jax.Array
            return images[:, :, ::-1, :]

        @pipeline_def(batch_size=64, num_threads=2, device_id=0)
        def pipeline():
            jpegs, _ = fn.readers.file(file_root=root)
            images = fn.resize(fn.decoders.image(jpegs), size=(224, 224))
            return flip_horizontal(images.gpu())

    Args:
      function: takes one ``jax.Array`` per input, each a whole batch with the batch axis first (the
        batches must be dense), and returns one array (``num_outputs=1``), a tuple of
        ``num_outputs`` arrays, or nothing (``num_outputs=0``). It may be ``jax.jit``- or
        ``jax.vmap``-transformed; on the device it is traced into the fused device program, so it
        must be traceable.
      num_outputs: how many arrays the function returns.
      output_layouts: one layout for every output, or one per output (sample dimensions only). By
        default output i takes input i's layout when its rank allows.
      sharding: a ``jax.sharding.Sharding`` with exactly one device in this process: the function
        then receives global arrays built from every process's batch, and its outputs' local rows
        are kept.
      device: "cpu" or "gpu" (the pipeline's JAX device); by default "gpu" when an input is there.
      preserve: keep the operator even when none of its outputs reaches the pipeline's outputs (a
        function called for its side effects).

    .. note:: Experimental, as in DALI. The arrays passed to ``function`` must not be kept after it
       returns.
    """
    if function is None:
        return functools.partial(jax_function, num_outputs=num_outputs, output_layouts=output_layouts,
                                 sharding=sharding, device=device, preserve=preserve)
    layouts = [output_layouts] if isinstance(output_layouts, str) else output_layouts

    @functools.wraps(function)
    def operator(*inputs: Any):
        kwargs = dict(function=function, num_outputs=num_outputs, output_layouts=layouts, sharding=sharding,
                      preserve=preserve)
        if device is not None:
            kwargs["device"] = device
        outputs = add_op(JAX_FUNCTION, inputs, kwargs)
        if num_outputs == 0:
            return None
        return outputs[0] if num_outputs == 1 else tuple(outputs)

    return operator
