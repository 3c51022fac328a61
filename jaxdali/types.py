"""DALI's type enums, sample/batch descriptors and constants, with DALI's module-level aliases.

``import jaxdali.types as types`` gives the same names as ``nvidia.dali.types``:
``types.RGB``, ``types.FLOAT``, ``types.INTERP_LINEAR``, ``types.SampleInfo``, ``types.Constant``...
"""

from __future__ import annotations

import enum
from typing import Any, Callable, NamedTuple

import numpy as np

__all__ = [
    "DALIDataType",
    "DALIImageType",
    "DALIInterpType",
    "PipelineAPIType",
    "SampleInfo",
    "BatchInfo",
    "Constant",
    "ScalarConstant",
    "to_numpy_type",
    "to_dali_type",
    "CPU_ONLY_DEVICE_ID",
]

#: Pass as ``device_id`` to make a pipeline that never touches an accelerator.
CPU_ONLY_DEVICE_ID = None


class DALIDataType(enum.IntEnum):
    """Element types, numbered as in DALI."""

    NO_TYPE = -1
    UINT8 = 0
    UINT16 = 1
    UINT32 = 2
    UINT64 = 3
    INT8 = 4
    INT16 = 5
    INT32 = 6
    INT64 = 7
    FLOAT16 = 8
    FLOAT = 9
    FLOAT64 = 10
    BOOL = 11
    STRING = 12
    FEATURE = 17
    IMAGE_TYPE = 20
    DATA_TYPE = 21
    INTERP_TYPE = 22
    TENSOR_LAYOUT = 23
    PYTHON_OBJECT = 24

    def __repr__(self) -> str:
        return f"DALIDataType.{self.name}"

    __str__ = __repr__


class DALIImageType(enum.IntEnum):
    """Colour spaces of decoded images."""

    RGB = 0
    BGR = 1
    GRAY = 2
    YCbCr = 3
    ANY_DATA = 4

    def __repr__(self) -> str:
        return f"DALIImageType.{self.name}"

    __str__ = __repr__


class DALIInterpType(enum.IntEnum):
    """Interpolation filters used by resize, warp and rotate."""

    INTERP_NN = 0
    INTERP_LINEAR = 1
    INTERP_CUBIC = 2
    INTERP_LANCZOS3 = 3
    INTERP_TRIANGULAR = 4
    INTERP_GAUSSIAN = 5

    def __repr__(self) -> str:
        return f"DALIInterpType.{self.name}"

    __str__ = __repr__


class PipelineAPIType(enum.Enum):
    """How a pipeline is driven; a pipeline keeps the first style it is used with."""

    BASIC = 0
    ITERATOR = 1
    SCHEDULED = 2


class SampleInfo(NamedTuple):
    """What a per-sample ``external_source`` callback (``batch=False``) receives.

    Attributes:
      idx_in_epoch: index of the sample within the current epoch.
      idx_in_batch: index of the sample within its batch.
      iteration: index of the batch within the current epoch.
      epoch_idx: number of the epoch, counted from 0.
    """

    idx_in_epoch: int
    idx_in_batch: int
    iteration: int
    epoch_idx: int


class BatchInfo(NamedTuple):
    """What a batch ``external_source`` callback receives with ``batch_info=True``.

    Attributes:
      iteration: index of the batch within the current epoch.
      epoch_idx: number of the epoch, counted from 0.
    """

    iteration: int
    epoch_idx: int


_NUMPY_OF_DALI: dict[DALIDataType, Any] = {
    DALIDataType.UINT8: np.uint8,
    DALIDataType.UINT16: np.uint16,
    DALIDataType.UINT32: np.uint32,
    DALIDataType.UINT64: np.uint64,
    DALIDataType.INT8: np.int8,
    DALIDataType.INT16: np.int16,
    DALIDataType.INT32: np.int32,
    DALIDataType.INT64: np.int64,
    DALIDataType.FLOAT16: np.float16,
    DALIDataType.FLOAT: np.float32,
    DALIDataType.FLOAT64: np.float64,
    DALIDataType.BOOL: np.bool_,
}
_DALI_OF_NUMPY = {np.dtype(v): k for k, v in _NUMPY_OF_DALI.items()}


def to_numpy_type(dali_type: DALIDataType | int) -> type:
    """NumPy scalar type for a DALI element type; TypeError for types NumPy cannot hold."""
    try:
        return _NUMPY_OF_DALI[DALIDataType(dali_type)]
    except (KeyError, ValueError):
        raise TypeError(f"data type {dali_type!r} has no NumPy equivalent") from None


def to_dali_type(dtype: Any) -> DALIDataType:
    """DALI element type for a NumPy dtype (or anything ``np.dtype`` accepts)."""
    if isinstance(dtype, DALIDataType):
        return dtype
    try:
        return _DALI_OF_NUMPY[np.dtype(dtype)]
    except (KeyError, TypeError):
        raise TypeError(f"data type {dtype!r} has no DALI equivalent") from None


class ScalarConstant:
    """A typed scalar used in pipeline arithmetic, e.g. ``images * types.Constant(2, dtype=types.UINT8)``."""

    def __init__(self, value: Any, dtype: DALIDataType | None = None):
        if dtype is None:
            if isinstance(value, (bool, np.bool_)):
                dtype = DALIDataType.BOOL
            elif isinstance(value, (int, np.integer)):
                dtype = DALIDataType.INT32
            else:
                dtype = DALIDataType.FLOAT
        self.dtype = DALIDataType(dtype)
        self.value = np.asarray(value, dtype=to_numpy_type(self.dtype))

    def __repr__(self) -> str:
        return f"ScalarConstant({self.value.item()!r}, dtype={self.dtype!r})"

    def as_array(self) -> np.ndarray:
        return self.value


def _no_graph(array: np.ndarray, layout: str, device: str) -> Any:
    raise RuntimeError("types.Constant of an array needs the operator graph: import jaxdali")


#: Makes a constant graph node; the graph (``jaxdali.ops.graph``, a layer above this module) installs it.
_constant_node_builder: Callable[..., Any] = _no_graph


def set_constant_node_builder(builder: Callable[..., Any]) -> None:
    """Installs ``builder(array, layout=, device=)``, which ``Constant`` calls to make a constant node."""
    global _constant_node_builder
    _constant_node_builder = builder


def Constant(value: Any, dtype: DALIDataType | None = None, shape: Any = None, layout: str | None = None,
             device: str | None = None, **kwargs: Any):
    """A constant: a typed scalar outside a graph, or a constant node when given an array or a shape.

    Args:
      value: a number, a list or an array.
      dtype: element type; by default int32 for integers and float32 otherwise.
      shape: reshape the value to this shape (per sample).
      layout: layout of each sample.
      device: "cpu" (default) or "gpu".
    """
    arr = np.asarray(value)
    if arr.ndim == 0 and shape is None and layout is None and device is None:
        return ScalarConstant(value, dtype)
    if dtype is not None:
        arr = arr.astype(to_numpy_type(dtype))
    elif arr.dtype == np.float64:
        arr = arr.astype(np.float32)
    elif arr.dtype == np.int64:
        arr = arr.astype(np.int32)
    if shape is not None:
        arr = np.broadcast_to(arr, shape).copy() if arr.size == 1 else arr.reshape(shape)
    return _constant_node_builder(arr, layout=layout or "", device=device or "cpu")


#: DALI's legacy layout names, still found in older pipelines (``output_layout=types.NCHW``): plain
#: layout strings of one sample, as in DALI.
NHWC = "HWC"
NCHW = "CHW"
NFHWC = "FHWC"
NFCHW = "FCHW"
SAME = ""
__all__ += ["NHWC", "NCHW", "NFHWC", "NFCHW", "SAME"]

# DALI's module-level aliases (types.RGB, types.FLOAT, types.INTERP_LINEAR, ...).
for _enum in (DALIDataType, DALIImageType, DALIInterpType):
    for _name, _member in _enum.__members__.items():
        globals()[_name] = _member
        __all__.append(_name)
del _enum, _name, _member
