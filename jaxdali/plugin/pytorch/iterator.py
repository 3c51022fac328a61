"""PyTorch iterators: pipeline outputs as ``[{name: torch.Tensor}, ...]``, one dict per pipeline.

The epoch arithmetic (reader and size modes, FILL/DROP/PARTIAL, resets, checkpoints) lives in
``jaxdali.plugin.driver``; this module only turns each batch into torch tensors. Host
outputs become CPU tensors and device outputs (``.gpu()`` data, ``device="gpu"`` operators) become
tensors on the matching torch device, both through DLPack without copying (pipeline outputs stay
valid after they are handed out, so sharing them is safe). Read-only host buffers, such as the
bytes of a file, are the exception: they are copied so that writing to a tensor is always safe.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

from jaxdali.pipeline.batch import PipelineBatch
from jaxdali.plugin.driver import _DaliBaseIterator
from jaxdali.plugin.epoch_counter import LastBatchPolicy
from jaxdali.plugin.pytorch.torch_utils import batch_to_torch, sample_to_torch, to_torch_type

__all__ = ["DALIGenericIterator", "DALIClassificationIterator", "DALIRaggedIterator"]

DISTINCT_NAMES_MSG = "output_map names should be distinct"  # E2
UNKNOWN_TAG_MSG = "Only DENSE_TAG, SPARSE_LIST_TAG and SPARSE_COO_TAG are allowed"


# The base iterator's arguments, which every PyTorch iterator takes under DALI's names and defaults
# and hands on unchanged. Each constructor keeps DALI's explicit signature (positional order
# included) and forwards them through ``_base_arguments``, so the list is written once.
_BASE_ARGUMENTS = ("size", "reader_name", "auto_reset", "fill_last_batch", "last_batch_padded",
                   "last_batch_policy", "prepare_first_batch")


def _base_arguments(constructor_locals: dict[str, Any]) -> dict[str, Any]:
    """The ``_BASE_ARGUMENTS`` out of a constructor's ``locals()``, as keyword arguments."""
    return {name: constructor_locals[name] for name in _BASE_ARGUMENTS}


def _name_outputs(output_map: list[str], converted: Sequence[Any], pipeline_index: int) -> dict[str, Any]:
    """``{name: value}`` in ``output_map`` order; every output needs a name and every name an output.

    Raises:
      IndexError: the pipeline has more outputs than ``output_map`` names.
      KeyError: ``output_map`` names more outputs than the pipeline has.
    """
    if len(converted) > len(output_map):
        raise IndexError(
            f"pipeline {pipeline_index} returns {len(converted)} outputs but output_map names only "
            f"{len(output_map)}: {output_map}; the PyTorch iterator needs one name per output"
        )
    by_name = dict(zip(output_map, converted))
    missing = [name for name in output_map if name not in by_name]
    if missing:
        raise KeyError(
            f"output_map names {missing} have no pipeline output: pipeline {pipeline_index} returns "
            f"{len(converted)} outputs for output_map {output_map}"
        )
    return {name: by_name[name] for name in output_map}


class DALIGenericIterator(_DaliBaseIterator):
    """Iterates over pipelines and returns each batch as a list with one ``{name: torch.Tensor}``
    dict per pipeline.

    Args:
      pipelines: a Pipeline or a list of them (one per device), all with the same ``batch_size``;
        the iterator builds them.
      output_map: one distinct name per pipeline output, in output order.
      size: DALI default -1. Samples per epoch summed over the pipelines (size mode); -1 reads until
        a source raises StopIteration. Mutually exclusive with ``reader_name``.
      reader_name: DALI default None. Name of the reader whose metadata defines the epoch
        (recommended).
      auto_reset: DALI default False. True/"yes": reset at the end of every epoch.
      fill_last_batch: deprecated (warns): True means FILL, False PARTIAL.
      dynamic_shape: accepted for compatibility and ignored (tensors always take the batch's shape).
      last_batch_padded: DALI default False. Size mode: whether the source pads its last batch.
      last_batch_policy: DALI default ``LastBatchPolicy.FILL``. ``PARTIAL`` returns the last batch of
        an epoch shortened to the samples that belong to it; a pipeline's tensors can then have 0
        rows, and in size mode trailing pipelines can be left out of the list.
      prepare_first_batch: DALI default True: fetch the first batch in the constructor.

    Raises:
      AssertionError: ``output_map`` names are not distinct, or the base iterator's checks
        (``jaxdali.plugin.driver``).
      IndexError, KeyError: ``output_map`` has fewer / more names than the pipelines have outputs
        (at the first fetch, which happens in the constructor with ``prepare_first_batch``).
      ValueError: ``last_batch_policy`` is not a ``LastBatchPolicy``.

    Example: five samples in batches of two; PARTIAL returns the last batch shortened::

        it = DALIGenericIterator(pipe, ["data", "label"], reader_name="Reader",
                                 last_batch_policy=LastBatchPolicy.PARTIAL, auto_reset=True)

    >>> import numpy as np
    >>> from jaxdali import fn, pipeline_def
    >>> def sample(info):
    ...     return np.int64([info.idx_in_epoch]), np.int64([10 * info.idx_in_epoch])
    >>> @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    ... def pipe():
    ...     return tuple(fn.external_source(source=sample, batch=False, num_outputs=2))
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:  # DALI's advice to prefer reader_name
    ...     warnings.simplefilter("always")
    ...     it = DALIGenericIterator(pipe(), ["data", "label"], size=5, last_batch_policy=LastBatchPolicy.PARTIAL)
    >>> str(caught[0].message).startswith("Please set `reader_name`")
    True
    >>> [(b[0]["data"].flatten().tolist(), b[0]["label"].flatten().tolist()) for b in it]
    [([0, 1], [0, 10]), ([2, 3], [20, 30]), ([4], [40])]
    >>> it.close()
    """

    def __init__(
        self,
        pipelines,
        output_map: Sequence[str],
        size: int = -1,
        reader_name: str | None = None,
        auto_reset: bool | str | None = False,
        fill_last_batch: bool | None = None,
        dynamic_shape: bool = False,
        last_batch_padded: bool = False,
        last_batch_policy: LastBatchPolicy = LastBatchPolicy.FILL,
        prepare_first_batch: bool = True,
    ):
        output_map = list(output_map)
        if len(set(output_map)) != len(output_map):
            raise AssertionError(DISTINCT_NAMES_MSG)
        self.output_map = output_map
        del dynamic_shape  # DALI ignores it too
        super().__init__(pipelines, **_base_arguments(locals()))

    def __next__(self) -> list[dict[str, Any]]:
        return self._next_batch()

    def _assemble_batch(self, batches: list[PipelineBatch], rows: tuple[int, ...] | None) -> list[dict[str, Any]]:
        batch = []
        for j, pipeline_outputs in enumerate(b.outputs for b in batches):
            if rows is not None and j >= len(rows):
                break  # size-mode PARTIAL: the epoch ended in an earlier pipeline's batch
            keep = None if rows is None else rows[j]
            converted = [self._convert(i, out, keep) for i, out in enumerate(pipeline_outputs)]
            batch.append(_name_outputs(self.output_map, converted, j))
        return batch

    def _convert(self, index: int, out: Any, keep: int | None) -> Any:
        """One output of one pipeline as a tensor, cut to its first ``keep`` rows if given."""
        tensor = batch_to_torch(out)
        return tensor if keep is None else tensor[:keep]


class DALIClassificationIterator(DALIGenericIterator):
    """``DALIGenericIterator`` for (image, label) pipelines: ``output_map=["data", "label"]``.

    Each ``next()`` returns ``[{"data": images, "label": labels}, ...]``, one dict per pipeline.
    The other arguments are those of ``DALIGenericIterator``.
    """

    def __init__(
        self,
        pipelines,
        size: int = -1,
        reader_name: str | None = None,
        auto_reset: bool | str | None = False,
        fill_last_batch: bool | None = None,
        dynamic_shape: bool = False,
        last_batch_padded: bool = False,
        last_batch_policy: LastBatchPolicy = LastBatchPolicy.FILL,
        prepare_first_batch: bool = True,
    ):
        super().__init__(pipelines, ["data", "label"], dynamic_shape=dynamic_shape, **_base_arguments(locals()))


class DALIRaggedIterator(DALIGenericIterator):
    """``DALIGenericIterator`` for outputs whose samples differ in shape.

    Args:
      output_types: one tag per ``output_map`` name (None: all ``DENSE_TAG``):

        * ``DENSE_TAG`` ("dense"): one tensor with a leading batch axis (samples must share a shape);
        * ``SPARSE_LIST_TAG`` ("sparse_list"): a list with one tensor per sample;
        * ``SPARSE_COO_TAG`` ("sparse_coo"): a ``torch.sparse_coo_tensor`` of shape
          ``(samples, longest sample)`` whose entry ``(i, k)`` is element ``k`` of 1-D sample ``i``.

      The other arguments are those of ``DALIGenericIterator``.

    Raises:
      AssertionError: an unknown tag, or ``output_types`` and ``output_map`` differ in length.

    Example: samples ``[0]``, ``[0, 1]``, ``[0, 1, 2]`` as ``SPARSE_COO_TAG`` give a (3, 3) sparse
    tensor whose dense form is ``[[0, 0, 0], [0, 1, 0], [0, 1, 2]]``:

    >>> import numpy as np
    >>> from jaxdali import fn, pipeline_def
    >>> @pipeline_def(batch_size=3, num_threads=1, device_id=None)
    ... def ragged():
    ...     return fn.external_source(source=lambda: [np.arange(n + 1) for n in range(3)])
    >>> it = DALIRaggedIterator(ragged(), ["x"], output_types=[DALIRaggedIterator.SPARSE_COO_TAG])
    >>> next(it)[0]["x"].to_dense().tolist()
    [[0, 0, 0], [0, 1, 0], [0, 1, 2]]
    >>> it.close()
    """

    DENSE_TAG = "dense"
    SPARSE_LIST_TAG = "sparse_list"
    SPARSE_COO_TAG = "sparse_coo"

    def __init__(
        self,
        pipelines,
        output_map: Sequence[str],
        size: int = -1,
        reader_name: str | None = None,
        output_types: Sequence[str] | None = None,
        auto_reset: bool | str | None = False,
        fill_last_batch: bool | None = None,
        dynamic_shape: bool = False,
        last_batch_padded: bool = False,
        last_batch_policy: LastBatchPolicy = LastBatchPolicy.FILL,
        prepare_first_batch: bool = True,
    ):
        output_map = list(output_map)
        tags = [self.DENSE_TAG] * len(output_map) if output_types is None else list(output_types)
        if any(tag not in (self.DENSE_TAG, self.SPARSE_LIST_TAG, self.SPARSE_COO_TAG) for tag in tags):
            raise AssertionError(UNKNOWN_TAG_MSG)
        if len(tags) != len(output_map):
            raise AssertionError(
                f"output_types has {len(tags)} tags for {len(output_map)} output_map names; give one per name"
            )
        self._output_types = tags
        super().__init__(pipelines, output_map, dynamic_shape=dynamic_shape, **_base_arguments(locals()))

    def _convert(self, index: int, out: Any, keep: int | None) -> Any:
        # An output without a name gets no tag; _name_outputs reports the mismatch.
        tag = self._output_types[index] if index < len(self._output_types) else self.DENSE_TAG
        if tag == self.DENSE_TAG:
            return super()._convert(index, out, keep)
        samples = list(out)[:keep]  # TensorCPU / TensorGPU per sample
        tensors = [sample_to_torch(s) for s in samples]
        if tag == self.SPARSE_LIST_TAG:
            return tensors
        name = self.output_map[index] if index < len(self.output_map) else index
        return _sparse_coo(tensors, name, to_torch_type.get(out.dtype, torch.float32))


def _sparse_coo(samples: list[torch.Tensor], name: Any, empty_dtype: torch.dtype) -> torch.Tensor:
    """Rows of 1-D samples as a sparse (samples, longest) tensor; indices are (sample, position)."""
    for i, sample in enumerate(samples):
        if sample.dim() > 1:
            raise ValueError(
                f"output {name!r}: SPARSE_COO_TAG needs 1-D samples, sample {i} has shape {tuple(sample.shape)}"
            )
    flat = [s.reshape(-1) for s in samples]
    lengths = [int(s.numel()) for s in flat]
    device = flat[0].device if flat else torch.device("cpu")
    counts = torch.tensor(lengths, dtype=torch.long, device=device)
    rows = torch.repeat_interleave(torch.arange(len(flat), device=device), counts)
    cols = torch.cat([torch.arange(n, device=device) for n in lengths]) if flat else counts.new_zeros(0)
    values = torch.cat(flat) if flat else torch.zeros(0, dtype=empty_dtype)
    shape = (len(flat), max(lengths, default=0))
    # The indices are built sorted and unique, so the tensor is valid and already coalesced.
    return torch.sparse_coo_tensor(torch.stack([rows, cols]), values, shape, check_invariants=False,
                                   is_coalesced=True)
