"""Moving pipeline data into torch tensors: ``to_torch_type``, ``feed_ndarray`` and ``to_torch_tensor``.

The sources are jaxdali batches and samples (``TensorListCPU``/``TensorCPU`` hold NumPy arrays,
``TensorListGPU``/``TensorGPU`` hold ``jax.Array``\\ s on the pipeline's JAX device) or any array
that speaks DLPack. Zero-copy conversion goes through DLPack, so host data becomes a CPU tensor and
device data a tensor on the matching torch device (``cuda:<n>`` for a CUDA JAX device, the CPU on a
CPU-only host). Devices torch cannot import (e.g. TPU) are copied to the host first.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from jaxdali.tensors import TensorListCPU, TensorListGPU
from jaxdali.types import DALIDataType, to_dali_type

__all__ = ["to_torch_type", "feed_ndarray", "to_torch_tensor"]

#: DALI element type -> torch dtype, for the nine types DALI's PyTorch plugin maps.
to_torch_type: dict[DALIDataType, torch.dtype] = {
    DALIDataType.FLOAT: torch.float32,
    DALIDataType.FLOAT64: torch.float64,
    DALIDataType.FLOAT16: torch.float16,
    DALIDataType.UINT8: torch.uint8,
    DALIDataType.INT8: torch.int8,
    DALIDataType.BOOL: torch.bool,
    DALIDataType.INT16: torch.int16,
    DALIDataType.INT32: torch.int32,
    DALIDataType.INT64: torch.int64,
}

# DLPack device types torch.from_dlpack understands (kDLCPU, kDLCUDA, kDLCUDAHost, kDLROCM).
_TORCH_DLPACK_DEVICES = frozenset({1, 2, 3, 10})


def _as_single_tensor(source: Any) -> Any:
    """A batch as one dense tensor (``as_tensor``); other sources unchanged."""
    if isinstance(source, (TensorListCPU, TensorListGPU)):
        return source.as_tensor()
    return source


def _dali_type(source: Any) -> DALIDataType:
    return to_dali_type(source.dtype)


def _shape(source: Any) -> list[int]:
    shape = source.shape() if callable(source.shape) else source.shape
    return [int(d) for d in shape]


def _host_array(source: Any) -> np.ndarray:
    if hasattr(source, "as_cpu"):
        source = source.as_cpu()
    return np.asarray(source)


def _zero_copy_view(source: Any) -> torch.Tensor:
    """A torch tensor sharing ``source``'s memory (DLPack); a host copy for devices torch lacks."""
    device_type = source.__dlpack_device__()[0] if hasattr(source, "__dlpack_device__") else None
    if device_type in _TORCH_DLPACK_DEVICES:
        return torch.from_dlpack(source)
    return torch.from_numpy(np.ascontiguousarray(_host_array(source)))


def _torch_dtype(dali_type: DALIDataType) -> torch.dtype:
    if dali_type in to_torch_type:
        return to_torch_type[dali_type]
    # Beyond DALI's table (e.g. uint16): let torch pick the dtype NumPy's would map to.
    from jaxdali.types import to_numpy_type

    return torch.from_numpy(np.empty(0, to_numpy_type(dali_type))).dtype


def feed_ndarray(dali_tensor: Any, arr: torch.Tensor, cuda_stream: Any = None) -> torch.Tensor:
    """Copies a jaxdali Tensor or TensorList into the preallocated torch tensor ``arr``.

    Args:
      dali_tensor: ``TensorCPU``/``TensorGPU`` or a dense ``TensorListCPU``/``TensorListGPU``
        (its samples stacked along a leading batch axis); any DLPack-capable array also works.
      arr: the destination; its dtype and shape must match the source's.
      cuda_stream: a ``torch.cuda.Stream`` to enqueue a copy to a CUDA tensor on; the copy is then
        non-blocking. Ignored for CPU destinations.

    Returns:
      ``arr``.

    Raises:
      AssertionError: the element types or the shapes differ (DALI's messages).
      RuntimeError: a TensorList whose samples differ in shape.
    """
    source = _as_single_tensor(dali_tensor)
    expected = _torch_dtype(_dali_type(source))
    if expected != arr.dtype:
        raise AssertionError(
            "The element type of DALI Tensor/TensorList doesn't match the element type of the target "
            f"PyTorch Tensor: {expected} vs {arr.dtype}"
        )
    shape = _shape(source)
    if shape != list(arr.size()):
        raise AssertionError(
            f"Shapes do not match: DALI tensor has size {shape}, but PyTorch Tensor has size {list(arr.size())}"
        )
    view = _zero_copy_view(source)
    if cuda_stream is not None and arr.is_cuda and isinstance(cuda_stream, torch.cuda.Stream):
        with torch.cuda.stream(cuda_stream):
            arr.copy_(view, non_blocking=True)
    else:
        arr.copy_(view)
    return arr


def to_torch_tensor(tensor_or_tl: Any, copy: bool) -> torch.Tensor:
    """A torch tensor with the data of a jaxdali Tensor or dense TensorList.

    Args:
      tensor_or_tl: ``TensorCPU``/``TensorGPU``, a dense ``TensorListCPU``/``TensorListGPU``, or any
        DLPack-capable array (NumPy, ``jax.Array``).
      copy: True: a new tensor on the source's device, filled with ``feed_ndarray``. False: a
        zero-copy view through DLPack; writing to it writes to the pipeline's buffer.

    Returns:
      A CPU tensor for host data; for device data, a tensor on the matching torch device (a host
      copy when torch cannot import that device).

    Example::

        >>> import numpy as np
        >>> from jaxdali import TensorListCPU
        >>> t = to_torch_tensor(TensorListCPU(np.arange(6, dtype=np.int32).reshape(3, 2)), copy=False)
        >>> t.shape, t.dtype
        (torch.Size([3, 2]), torch.int32)
    """
    source = _as_single_tensor(tensor_or_tl)
    view = _zero_copy_view(source)
    if not copy:
        return view
    out = torch.empty(_shape(source), dtype=_torch_dtype(_dali_type(source)), device=view.device)
    return feed_ndarray(source, out)


def _is_read_only_host(tensor: Any) -> bool:
    array = getattr(tensor, "as_array", None)
    return array is not None and not np.asarray(array()).flags.writeable


def sample_to_torch(sample: Any) -> torch.Tensor:
    """One pipeline sample (``TensorCPU``/``TensorGPU``) as a tensor, the way the iterators return it.

    Zero-copy through DLPack, except that read-only host buffers (e.g. bytes of a file) are copied so
    that writing to the tensor is always safe.
    """
    return to_torch_tensor(sample, copy=_is_read_only_host(sample))


def batch_to_torch(batch: Any) -> torch.Tensor:
    """A dense pipeline batch as one tensor with a leading batch axis (see ``sample_to_torch``).

    Raises:
      RuntimeError: the samples differ in shape (the batch is not a dense tensor).
    """
    return sample_to_torch(batch.as_tensor())
