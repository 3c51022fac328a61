"""Batches as pipelines hand them out: ``TensorListCPU`` (NumPy) and ``TensorListGPU`` (JAX device).

A batch is either *dense* (one array whose leading axis is the sample axis) or *ragged* (a list of
per-sample arrays of equal rank and dtype). Operators work on both; framework iterators need dense
batches (``as_tensor``).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from jaxdali.core.buffers import owned_rows
from jaxdali.types import DALIDataType, to_dali_type

__all__ = ["TensorCPU", "TensorGPU", "TensorListCPU", "TensorListGPU"]

_NOT_DENSE = (
    'Assert on "IsDenseTensor()" failed: The batch must be representable as a tensor - it must have '
    "uniform shape and be allocated in contiguous memory."
)
_NOT_DENSE_ARRAY = (
    'Assert on "tl.IsDenseTensor()" failed: Cannot produce a numpy array: the tensors in the list do not all '
    "have the same shape. Pad or crop the samples to a common shape, or check is_dense_tensor() beforehand."
)


class _TensorBase:
    """Shared behaviour of one host or device sample: an array with a layout and a source."""

    def __init__(self, array: Any, layout: str = "", source_info: str = ""):
        self._array = array
        self._layout = layout
        self._source_info = source_info

    def source_info(self) -> str:
        """Where the sample came from (e.g. its file, as the reader names it); "" when unknown."""
        return self._source_info

    def shape(self) -> list[int]:
        return list(self._array.shape)

    def ndim(self) -> int:
        """Number of dimensions of the tensor (a method, as in DALI)."""
        return self._array.ndim

    @property
    def dtype(self) -> DALIDataType:
        return to_dali_type(self._array.dtype)

    def layout(self) -> str:
        return self._layout

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(shape={tuple(self._array.shape)}, dtype={self._array.dtype}, "
                f"layout={self._layout!r})")


class TensorCPU(_TensorBase):
    """One sample (or a dense batch from ``as_tensor``) in host memory."""

    def as_array(self) -> np.ndarray:
        return self._array

    def as_cpu(self) -> "TensorCPU":
        return self

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self._array, dtype=dtype)

    @property
    def __array_interface__(self) -> dict:
        # The interface is a raw pointer: the memory must stay owned by this object (NumPy keeps the
        # object alive as the base of the new array), so a non-contiguous view is replaced by a copy
        # stored here instead of a temporary.
        if not self._array.flags.c_contiguous:
            self._array = np.ascontiguousarray(self._array)
        return self._array.__array_interface__

    def __dlpack__(self, *args, **kwargs):
        return np.ascontiguousarray(self._array).__dlpack__(*args, **kwargs)


class TensorGPU(_TensorBase):
    """One sample (or a dense batch) on the pipeline's JAX device."""

    def as_cpu(self) -> TensorCPU:
        return TensorCPU(np.asarray(self._array), self._layout, self._source_info)

    def jax_array(self):
        """The sample as a ``jax.Array``."""
        return self._array

    def __dlpack__(self, *args, **kwargs):
        return self._array.__dlpack__(*args, **kwargs)


class _TensorListBase:
    """Shared behaviour of CPU and device batches: dense array or list of samples."""

    _sample_type: type
    #: Rows of this batch that an operator's ``error_policy="replace"`` filled with a copy of another
    #: row (jaxdali only); iterators mark them as not real in their padding mask.
    replaced_rows: tuple[int, ...] = ()

    def __init__(self, data: Any, layout: str = "", source_info: list[str] | None = None):
        if isinstance(data, (list, tuple)):
            self._dense = None
            self._samples = list(data)
        else:
            self._dense = data
            self._samples = None
        self._layout = layout or ""
        #: Where each sample came from (file names as readers name them), or None: each sample's
        #: ``source_info()`` (as in DALI, carried through operators) and operators' error messages.
        self.source_info = source_info

    # -- shape and type -------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._samples) if self._dense is None else int(self._dense.shape[0])

    def samples(self) -> list:
        """Per-sample arrays (views into the dense array when the batch is dense)."""
        if self._samples is None:
            self._samples = list(self._dense)
        return self._samples

    def dense(self):
        """The dense batch array, or None when samples differ in shape."""
        if self._dense is None and self._samples is not None:
            shapes = {tuple(s.shape) for s in self._samples}
            if len(shapes) == 1 and self._samples:
                self._dense = self._stack(self._samples)
        return self._dense

    def shape(self) -> list[tuple[int, ...]]:
        if self._dense is not None:
            return [tuple(self._dense.shape[1:])] * len(self)
        return [tuple(s.shape) for s in self._samples]

    @property
    def dtype(self) -> DALIDataType:
        return to_dali_type(self.np_dtype)

    @property
    def np_dtype(self) -> np.dtype:
        if self._dense is not None:
            return np.dtype(self._dense.dtype)
        if not self._samples:
            return np.dtype(np.uint8)
        return np.dtype(self._samples[0].dtype)

    def ndim(self) -> int:
        """Number of dimensions of each sample (a method, as in DALI); 0 for an empty list of samples."""
        if self._dense is not None:
            return self._dense.ndim - 1
        return self._samples[0].ndim if self._samples else 0

    def layout(self) -> str:
        return self._layout

    def is_dense_tensor(self) -> bool:
        return self.dense() is not None

    def with_layout(self, layout: str):
        """The same data under another layout: the dense array or the samples as they are, no copy."""
        return type(self)(self._samples if self._dense is None else self._dense, layout, self.source_info)

    def at(self, i: int):
        return self.samples()[i]

    def __getitem__(self, i: int):
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"sample index {i} out of range for a batch of {n}")
        info = self.source_info
        return self._sample_type(self.samples()[i], self._layout, info[i] if info is not None else "")

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def _dense_or_raise(self):
        arr = self.dense()
        if arr is None:
            if len(self) == 0:
                return self._stack([])
            raise RuntimeError(_NOT_DENSE)
        return arr

    def __dlpack__(self, *args, **kwargs):
        return self._dense_or_raise().__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self._dense_or_raise().__dlpack_device__()

    def __repr__(self) -> str:
        kind = type(self).__name__
        if self._dense is not None:
            return f"{kind}(dense shape={tuple(self._dense.shape)}, dtype={self.np_dtype}, layout={self._layout!r})"
        return f"{kind}({len(self)} samples, dtype={self.np_dtype}, layout={self._layout!r})"


class TensorListCPU(_TensorListBase):
    """A batch in host memory, as returned by ``Pipeline.run`` for CPU outputs."""

    _sample_type = TensorCPU

    @staticmethod
    def _stack(samples: Sequence[np.ndarray]) -> np.ndarray:
        return np.stack(samples) if samples else np.zeros((0,), np.uint8)

    def as_tensor(self) -> TensorCPU:
        """The whole batch as one tensor of shape ``(N, *sample_shape)``; needs a dense batch."""
        return TensorCPU(self._dense_or_raise(), self._layout)

    def as_array(self) -> np.ndarray:
        """The whole batch as one NumPy array; needs a dense batch."""
        if self.dense() is None and len(self):
            raise RuntimeError(_NOT_DENSE_ARRAY)
        return self._dense_or_raise()

    def as_reshaped_tensor(self, shape: Sequence[int]) -> TensorCPU:
        return TensorCPU(self._dense_or_raise().reshape(shape), self._layout)

    def as_cpu(self) -> "TensorListCPU":
        return self

    @classmethod
    def concat(cls, batches: Sequence["TensorListCPU"]) -> "TensorListCPU":
        """The samples of ``batches`` (same layout) as one batch, in order: one concatenated array when
        every batch is one array of the same sample shape and dtype, else the samples themselves (no copy)."""
        arrays = [b._dense for b in batches]
        if all(a is not None for a in arrays) and len({(a.shape[1:], a.dtype) for a in arrays}) == 1:
            data = np.concatenate(arrays)
        else:
            data = [s for b in batches for s in b.samples()]
        infos = [b.source_info for b in batches]
        info = None if any(i is None for i in infos) else [x for i in infos for x in i]
        return cls(data, batches[0].layout(), info)

    def split(self, sizes: Sequence[int]) -> list["TensorListCPU"]:
        """The batch cut into consecutive batches of ``sizes`` samples (views of this batch's memory)."""
        dense = owned_rows(self._dense, sizes) if self._dense is not None else None
        out, start = [], 0
        for k, n in enumerate(sizes):
            rows = slice(start, start + n)
            data = dense[k] if dense is not None else self._samples[rows]
            info = None if self.source_info is None else self.source_info[rows]
            out.append(type(self)(data, self._layout, info))
            start += n
        return out

    @property
    def __array_interface__(self) -> dict:
        # Only dense batches have one (AttributeError otherwise, so NumPy falls back to __array__, which
        # explains). The pointer must refer to memory this object owns: see TensorCPU.__array_interface__.
        arr = self.dense()
        if arr is None:
            raise AttributeError("a batch of samples with different shapes has no __array_interface__")
        if not arr.flags.c_contiguous:
            self._dense = arr = np.ascontiguousarray(arr)
            self._samples = None
        return arr.__array_interface__

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self.as_array(), dtype=dtype)


class TensorListGPU(_TensorListBase):
    """A batch on the pipeline's JAX device (``.gpu()`` data and ``device="gpu"`` operator outputs)."""

    _sample_type = TensorGPU

    @staticmethod
    def _stack(samples: Sequence[Any]):
        import jax.numpy as jnp

        return jnp.stack(samples) if samples else jnp.zeros((0,), jnp.uint8)

    def as_tensor(self) -> TensorGPU:
        return TensorGPU(self._dense_or_raise(), self._layout)

    def as_cpu(self) -> TensorListCPU:
        """A host copy of the batch."""
        data = np.asarray(self._dense) if self.dense() is not None else [np.asarray(s) for s in self._samples]
        return TensorListCPU(data, self._layout, self.source_info)

    def jax_array(self):
        """The dense batch as a ``jax.Array``."""
        return self._dense_or_raise()
