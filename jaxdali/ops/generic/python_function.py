"""``fn.python_function`` and ``fn.dl_tensor_python_function``: a Python callable as an operator.

The function runs on the pipeline's thread (it holds the GIL anyway), once per sample, or once per
batch with ``batch_processing=True``. ``python_function`` passes and takes NumPy arrays;
``dl_tensor_python_function`` passes DLPack capsules and takes capsules or objects with
``__dlpack__`` (PyTorch tensors, ...). Like DALI, both always run (they may have side effects), even
when nothing uses their outputs.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import REQUIRED, Arg, OpArgumentError, OpSchema, register
from jaxdali.tensors import TensorListCPU

__all__ = ["PYTHON_FUNCTION", "DL_TENSOR_PYTHON_FUNCTION"]


class _Capsule:
    """A bare DLPack capsule (``to_dlpack`` results) in the ``__dlpack__`` protocol NumPy reads."""

    def __init__(self, capsule: Any):
        self.capsule = capsule

    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any:
        return self.capsule

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)  # CPU: capsules from host memory are all jaxdali can take


class PythonFunction(Operator):
    """Calls ``function`` per sample (or per batch) and checks what it returns."""

    op = "python_function"

    def __init__(self, node, build):
        super().__init__(node, build)
        self.function: Callable = self.args["function"]
        self.num_outputs = int(self.args["num_outputs"])
        layouts = self.args.get("output_layouts")
        layouts = tuple(layouts) if layouts is not None else ("",) * self.num_outputs
        if len(layouts) == 1 and self.num_outputs > 1:
            layouts = layouts * self.num_outputs
        if len(layouts) != self.num_outputs:
            raise OpArgumentError(f"fn.{self.op}: 'output_layouts' has {len(layouts)} entries for "
                                  f"{self.num_outputs} outputs")
        self.layouts = layouts

    def to_callee(self, sample: np.ndarray) -> Any:
        return sample

    def from_callee(self, value: Any, where: str) -> np.ndarray:
        if not isinstance(value, np.ndarray):
            raise TypeError(f"fn.{self.op}: the function returned {type(value).__name__} for {where}; expected "
                            "a NumPy array")
        return value

    def _outputs(self, result: Any, where: str) -> tuple:
        if self.num_outputs == 0:
            return ()
        if self.num_outputs == 1:
            return (result,)
        if not isinstance(result, (tuple, list)) or len(result) != self.num_outputs:
            got = f"{len(result)} values" if isinstance(result, (tuple, list)) else type(result).__name__
            raise TypeError(f"fn.{self.op}: the function returned {got} for {where}; expected a tuple of "
                            f"num_outputs={self.num_outputs}")
        return tuple(result)

    def run(self, ctx, inputs, args):
        n = len(inputs[0]) if inputs else ctx.batch_size
        per_input = [[self.to_callee(s) for s in tl.samples()] for tl in inputs]
        if self.args["batch_processing"]:
            results = self._outputs(self.function(*per_input), "the batch")
            columns = []
            for k, batch in enumerate(results):
                if not isinstance(batch, (list, tuple)) or len(batch) != n:
                    raise TypeError(f"fn.{self.op}: output {k} of the function must be a list of {n} samples, "
                                    f"got {type(batch).__name__}")
                columns.append([self.from_callee(v, f"sample {i} of output {k}") for i, v in enumerate(batch)])
        else:
            rows = [self._outputs(self.function(*[s[i] for s in per_input]), f"sample {i}") for i in range(n)]
            columns = [[self.from_callee(row[k], f"sample {i} of output {k}") for i, row in enumerate(rows)]
                       for k in range(self.num_outputs)]
        outs = [TensorListCPU(column, layout) for column, layout in zip(columns, self.layouts)]
        return outs if self.num_outputs != 1 else outs[0]


class DLTensorPythonFunction(PythonFunction):
    """``python_function`` over DLPack capsules."""

    op = "dl_tensor_python_function"

    def to_callee(self, sample):
        return np.ascontiguousarray(sample).__dlpack__()

    def from_callee(self, value, where):
        if type(value).__name__ == "PyCapsule":
            value = _Capsule(value)
        if not hasattr(value, "__dlpack__"):
            raise TypeError(f"fn.{self.op}: the function returned {type(value).__name__} for {where}; expected a "
                            "DLPack capsule or an object with __dlpack__")
        try:
            return np.from_dlpack(value)
        except (BufferError, RuntimeError, TypeError) as e:
            raise TypeError(f"fn.{self.op}: cannot read {where} as a host tensor through DLPack: {e}") from e


def _args(batch_processing: bool, extra: tuple = ()) -> tuple:
    return (Arg("function", "callable", REQUIRED, "The Python function."),
            Arg("num_outputs", "int", 1, "Number of outputs (the function returns a tuple when more than 1).",
                min=0),
            Arg("batch_processing", "bool", batch_processing,
                "Call the function once per batch with lists of samples (else once per sample)."),
            Arg("output_layouts", "strs", None, "Layout of each output."),
            Arg("preserve", "bool", True, "Always run (the function may have side effects).")) + extra


PYTHON_FUNCTION = register(OpSchema(
    name="python_function", impl=PythonFunction, min_inputs=0, max_inputs=256,
    num_outputs=lambda args: int(args.get("num_outputs", 1)),
    doc="Runs a Python function on NumPy arrays: per sample (`function(*samples)` returns an array, or a "
        "tuple of `num_outputs` arrays) or, with `batch_processing=True`, per batch (lists of arrays in and "
        "out). Runs on the pipeline's thread.",
    args=_args(False)))

DL_TENSOR_PYTHON_FUNCTION = register(OpSchema(
    name="dl_tensor_python_function", impl=DLTensorPythonFunction, min_inputs=0, max_inputs=256,
    num_outputs=lambda args: int(args.get("num_outputs", 1)),
    doc="Runs a Python function on DLPack capsules (e.g. `torch.utils.dlpack.from_dlpack`): per batch by default "
        "(lists of capsules in and out), per sample with `batch_processing=False`; it returns capsules or "
        "objects with `__dlpack__` in host memory.",
    args=_args(True, (Arg("synchronize_stream", "bool", True, "Synchronise the CUDA stream (GPU only).",
                          hint=True),))))
