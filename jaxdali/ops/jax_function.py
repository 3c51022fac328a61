"""The operator behind ``jaxdali.plugin.jax.fn.jax_function``: a user's function on ``jax.Array``
batches, run as a device operator (traced into the fused device program) or called eagerly.

Registered as ``_jax_function`` (not in the ``fn`` namespace); the decorator in
``jaxdali.plugin.jax.fn`` adds instances of it to a pipeline.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import REQUIRED, Arg, OpArgumentError, OpSchema, register
from jaxdali.tensors import TensorListCPU

__all__ = ["JAX_FUNCTION", "JaxFunctionError"]

_MAX_INPUTS = 256


class JaxFunctionError(RuntimeError, ValueError):
    """A batch that a ``jax_function`` cannot take or a result it cannot hand back (DALI raises
    RuntimeError there; ValueError too, since the value is what is wrong)."""


def _shape_text(shape: Any) -> str:
    return " x ".join(str(d) for d in shape) if shape is not None else "none (not an array)"


class _JaxFunction(Operator):
    def __init__(self, node, build):
        super().__init__(node, build)
        self._function = self.args["function"]
        self._num_outputs = int(self.args["num_outputs"])
        self._sharding = self.args["sharding"]
        layouts = self.args["output_layouts"]
        if layouts is not None and len(layouts) not in (1, self._num_outputs):
            raise OpArgumentError(f"{self._what}: output_layouts has {len(layouts)} entries for "
                                  f"{self._num_outputs} outputs")
        self._layouts = None if layouts is None else list(layouts) * (self._num_outputs if len(layouts) == 1 else 1)
        if self._sharding is not None and len(self._sharding.addressable_devices) != 1:
            raise OpArgumentError(f"{self._what}: 'sharding' must have exactly one device in this process, "
                                  f"got {len(self._sharding.addressable_devices)}")
        if self._num_outputs == 0 or self._sharding is not None:
            self.run_jax = None  # called eagerly every batch (side effects, global arrays)

    @property
    def _what(self) -> str:
        return f"jax_function({getattr(self.args['function'], '__name__', 'function')!r})"

    def _outputs(self, result: Any, batch_size: int) -> list:
        if self._num_outputs == 0:
            return []
        outs = [result] if self._num_outputs == 1 and not isinstance(result, (tuple, list)) else result
        returned = len(outs) if isinstance(outs, (tuple, list)) else 1
        if returned != self._num_outputs:
            raise JaxFunctionError(f"{self._what}: the function was expected to return (a tuple of) "
                                   f"`num_outputs={self._num_outputs}` outputs, but returned {returned}")
        for i, out in enumerate(outs):
            shape = getattr(out, "shape", None)
            if shape is None or len(shape) < 1 or shape[0] != batch_size:
                raise JaxFunctionError(
                    f"{self._what}: the function should return a tensor representing a batch of samples. The "
                    f"leftmost dimension should match the current batch size of {batch_size}, but the output at "
                    f"index {i} has shape of {_shape_text(shape)}")
        return list(outs)

    def run_jax(self, inputs: list, args) -> list:
        return self._outputs(self._function(*inputs), args.batch_size)

    def run(self, ctx, inputs, args):
        import jax

        batches = []
        for i, tl in enumerate(inputs):
            dense = tl.dense() if len(tl) else np.zeros((0,), np.uint8)
            if dense is None:
                raise JaxFunctionError(
                    f"{self._what}: inputs must be batches of uniform shape, so that the input batch can be "
                    f"represented as a tensor. The input at index {i} is a batch of samples with different shapes "
                    f"{sorted(set(tl.shape()))}")
            batches.append(dense)
        if self._sharding is not None:
            arrays = [self._global(b) for b in batches]
        else:
            host = jax.devices("cpu")[0] if self.node.device == "cpu" else None
            arrays = [jax.device_put(b, host) for b in batches]
        outs = self._outputs(self._function(*arrays), ctx.batch_size * self._processes())
        if self._sharding is not None:
            outs = [out.addressable_shards[0].data for out in outs]
        in_layouts = [tl.layout() for tl in inputs]
        return [TensorListCPU(np.asarray(out), layout)
                for out, layout in zip(outs, self._output_layouts(in_layouts, [o.ndim for o in outs]))]

    def _processes(self) -> int:
        if self._sharding is None:
            return 1
        import jax

        return jax.process_count()

    def _global(self, batch: np.ndarray):
        import jax

        device = next(iter(self._sharding.addressable_devices))
        shape = (batch.shape[0] * self._processes(),) + batch.shape[1:]
        return jax.make_array_from_single_device_arrays(shape, self._sharding, [jax.device_put(batch, device)])

    def output_layouts(self, input_layouts: list[str]) -> list[str]:
        return self._output_layouts(input_layouts, None)

    def _output_layouts(self, input_layouts: list[str], ndims: Sequence[int] | None) -> list[str]:
        """The given layouts, else input i's layout for output i when it fits (same number of sample
        dimensions; on the device, where output ranks are not known yet, when the layout exists)."""
        if self._layouts is not None:
            return self._layouts
        layouts = []
        for i in range(self._num_outputs):
            layout = input_layouts[i] if i < len(input_layouts) else ""
            fits = ndims is None or len(layout) == ndims[i] - 1
            layouts.append(layout if fits else "")
        return layouts


JAX_FUNCTION = register(OpSchema(
    name="_jax_function", impl=_JaxFunction, devices=("cpu", "gpu"), min_inputs=0, max_inputs=_MAX_INPUTS,
    num_outputs=lambda args: int(args["num_outputs"]),
    doc="A Python function on jax.Array batches (see jaxdali.plugin.jax.fn.jax_function).",
    args=(
        Arg("function", "callable", REQUIRED, "The function: jax.Array batches in, jax.Array batches out."),
        Arg("num_outputs", "int", 1, "Number of arrays the function returns.", min=0),
        Arg("output_layouts", "strs", None, "Layouts of the outputs (one for all, or one each)."),
        Arg("sharding", "any", None, "A sharding with one device in this process: the function gets global "
            "arrays."),
    ),
))
