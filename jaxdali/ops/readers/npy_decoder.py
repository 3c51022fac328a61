"""``fn.decoders.numpy``: arrays from the bytes of ``.npy`` files (e.g. read by ``fn.readers.file``,
``fn.readers.webdataset`` or ``fn.readers.tfrecord``).

The header is parsed by ``npy_format`` (cached per distinct header) and the data is viewed in place:
a C-order, native-order array costs no copy. Fortran-order and big-endian arrays are converted.
"""

from __future__ import annotations

import numpy as np

from jaxdali.ops.convert import convert
from jaxdali.ops.operator import Operator
from jaxdali.ops.readers import npy_format
from jaxdali.ops.schema import Arg, OpArgumentError, OpSchema, register
from jaxdali.tensors import TensorListCPU
from jaxdali.types import to_numpy_type

__all__ = ["NUMPY_DECODER"]

_OP = "fn.decoders.numpy"


def _sample_bytes(sample: np.ndarray, i: int) -> np.ndarray:
    """The bytes of input sample ``i`` as a 1-D uint8 view."""
    if sample.dtype not in (np.uint8, np.int8):
        raise OpArgumentError(f"{_OP}: sample {i} must hold the bytes of a .npy file as uint8, got "
                              f"{sample.dtype} of shape {list(sample.shape)}")
    return np.ascontiguousarray(sample).reshape(-1).view(np.uint8)


class NumpyDecoder(Operator):
    """Decodes each sample's ``.npy`` bytes; all samples must share ndim, and type unless ``dtype`` is given."""

    def __init__(self, node, build):
        super().__init__(node, build)
        dtype = self.args["dtype"]
        self._dtype = None if dtype is None else np.dtype(to_numpy_type(dtype))

    def run(self, ctx, inputs, args):
        batch = inputs[0]
        sources = batch.source_info or [""] * len(batch)
        out = []
        for i, sample in enumerate(batch.samples()):
            data = memoryview(_sample_bytes(np.asarray(sample), i))
            name = sources[i] or "input bytes"
            try:
                out.append(npy_format.array_from_bytes(data, npy_format.parse_header(data, name), name))
            except npy_format.NpyFormatError as e:
                raise npy_format.NpyFormatError(f"{_OP}: sample {i}: {e}") from None
        for i, a in enumerate(out):
            if a.ndim != out[0].ndim or (self._dtype is None and a.dtype != out[0].dtype):
                raise ValueError(f"{_OP}: the samples of a batch must have the same number of dimensions, and the "
                                 f"same type unless 'dtype' is given: sample 0 is {out[0].dtype} with "
                                 f"{out[0].ndim} dims, sample {i} is {a.dtype} with {a.ndim}")
        if self._dtype is not None:
            out = [convert(a, self._dtype) for a in out]
        return TensorListCPU(out, "", list(batch.source_info) if batch.source_info else None)


NUMPY_DECODER = register(OpSchema(
    name="decoders.numpy", impl=NumpyDecoder,
    doc=("Decodes NumPy arrays from the bytes of .npy files (one file per 1-D uint8 sample). Outputs each "
         "array with its shape and type; C- and Fortran-order arrays are read. All samples of a batch must "
         "have the same number of dimensions, and the same type unless `dtype` is given, which converts them "
         "(rounding and saturating, as `fn.cast`). Reads .npy versions 1.0-3.0 and big-endian data (DALI: 1.0, "
         "little-endian only)."),
    args=(Arg("dtype", "dtype", None, "Output type (default: the arrays' own)."),)))
