"""Feature specifications for ``fn.readers.tfrecord``, as in ``nvidia.dali.tfrecord``.

``from jaxdali import tfrecord as tfrec`` gives the same names::

    features = {
        "image/encoded": tfrec.FixedLenFeature((), tfrec.string, ""),
        "image/class/label": tfrec.FixedLenFeature([1], tfrec.int64, -1),
        "image/object/bbox/xmin": tfrec.VarLenFeature(tfrec.float32, 0.0),
    }
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import numpy as np

__all__ = ["Feature", "FixedLenFeature", "VarLenFeature", "float32", "int64", "string"]

#: Feature element types, numbered as in DALI.
int64 = 0
string = 1
float32 = 2

_DTYPE_NAMES = {int64: "int64", string: "string", float32: "float32"}
#: NumPy type of each feature type's output (strings come out as their bytes).
NUMPY_TYPES = {int64: np.int64, string: np.uint8, float32: np.float32}


@dataclasses.dataclass(frozen=True)
class Feature:
    """One feature to extract from each ``tf.train.Example``; build it with ``FixedLenFeature`` or
    ``VarLenFeature``.

    Attributes:
      fixed: True for a fixed-length feature (``shape`` is its whole shape), False for a variable-length
        one (``shape`` is the partial shape of the trailing dimensions; the first is inferred).
      shape: see ``fixed``.
      dtype: ``int64``, ``float32`` or ``string``.
      default: the value of a fixed-length feature that a record lacks.
    """

    fixed: bool
    shape: tuple[int, ...]
    dtype: int
    default: Any

    def __repr__(self) -> str:
        kind = "FixedLenFeature" if self.fixed else "VarLenFeature"
        return f"{kind}(shape={list(self.shape)}, dtype={_DTYPE_NAMES[self.dtype]}, default={self.default!r})"


def _check_dtype(dtype: Any) -> int:
    if isinstance(dtype, bool) or dtype not in _DTYPE_NAMES:
        raise TypeError(f"tfrecord feature dtype must be tfrecord.int64, tfrecord.float32 or tfrecord.string, "
                        f"got {dtype!r}")
    return int(dtype)


def _check_shape(shape: Sequence[int], what: str) -> tuple[int, ...]:
    dims = tuple(int(d) for d in shape)
    if any(d < 0 for d in dims):
        raise ValueError(f"tfrecord {what} must have non-negative dimensions, got {list(shape)}")
    return dims


def FixedLenFeature(shape: Sequence[int], dtype: int, default_value: Any) -> Feature:  # noqa: N802 (DALI's name)
    """A feature with a fixed shape; records that lack it give ``default_value`` (TensorFlow's
    ``tf.io.FixedLenFeature``). A string feature has shape ``()`` and comes out as its bytes."""
    dtype = _check_dtype(dtype)
    dims = _check_shape(shape, "FixedLenFeature shape")
    if dtype == string and dims:
        raise ValueError(f"tfrecord.FixedLenFeature: a string feature has shape [] (one string, output as its "
                         f"bytes); tensors of strings are not supported, got shape {list(dims)}")
    return Feature(True, dims, dtype, default_value)


def VarLenFeature(*args: Any) -> Feature:  # noqa: N802 (DALI's name)
    """A feature whose length varies per record: ``VarLenFeature(dtype, default_value)`` gives a 1-D
    array, ``VarLenFeature(partial_shape, dtype, default_value)`` reshapes the values to
    ``(-1, *partial_shape)``. Records that lack it give an empty array. Numeric types only (as in DALI)."""
    if len(args) == 2:
        partial: Sequence[int] = ()
        dtype, default = args
    elif len(args) == 3:
        partial, dtype, default = args
    else:
        raise TypeError("tfrecord.VarLenFeature takes (dtype, default_value) or (partial_shape, dtype, default_value)")
    dtype = _check_dtype(dtype)
    if dtype == string:
        raise ValueError("tfrecord.VarLenFeature: string features must be FixedLenFeature((), tfrecord.string, ...) "
                         "(tensors of strings are not supported)")
    return Feature(False, _check_shape(partial, "VarLenFeature partial_shape"), dtype, default)
