"""Peekable JAX iterators usable as ``clu.data.dataset_iterator.PeekableDatasetIterator``.

Needs the ``clu`` package (``pip install clu``); ``jaxdali.plugin.jax`` does not import this module.
"""

from __future__ import annotations

import concurrent.futures
import inspect
import threading
from typing import Any

from clu.data.dataset_iterator import ArraySpec, PeekableDatasetIterator

from jaxdali.plugin.jax.decorator import make_data_iterator
from jaxdali.plugin.jax.iterator import DALIGenericIterator

__all__ = ["DALIGenericPeekableIterator", "peekable_data_iterator", "get_spec_for_array"]

SHAPE_CHANGED_MSG = (  # E23 (DALI's text, double space included)
    "The shape or type of the output changed between iterations. This is not supported by JAX  peekable "
    "iterator. Please make sure that the shapes and types of the outputs are the same in every iteration.")
PENDING_PEEK_MSG = (  # E22
    "Checkpointing is not supported for peekable iterators with peeked data. Consume the peeked data "
    "completely using next() before saving a checkpoint.")


def get_spec_for_array(array: Any) -> ArraySpec:
    """The clu ``ArraySpec`` (shape, dtype) of an array."""
    return ArraySpec(shape=tuple(array.shape), dtype=array.dtype)


class DALIGenericPeekableIterator(DALIGenericIterator, PeekableDatasetIterator):
    # __doc__ is set below the class: DALIGenericIterator's, with the peeking described first.

    def __init__(self, *args: Any, **kwargs: Any):
        self._lock = threading.Lock()
        self._pending: Any = None
        self._has_pending = False
        self._spec: dict | None = None
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        super().__init__(*args, **kwargs)

    # inspect.signature() shows DALIGenericIterator's parameters, as DALI's peekable iterator has them.
    __init__.__signature__ = inspect.signature(DALIGenericIterator.__init__)

    def _checked(self, batch: dict) -> dict:
        spec = {name: get_spec_for_array(arr) for name, arr in batch.items()}
        if self._spec is None:
            self._spec = spec
        elif spec != self._spec:
            raise ValueError(SHAPE_CHANGED_MSG)
        return batch

    def __next__(self) -> dict:
        with self._lock:
            if self._has_pending:
                batch, self._pending, self._has_pending = self._pending, None, False
                return batch
            return self._checked(self._next_batch())

    def peek(self) -> dict:
        """The next batch, without consuming it (repeated peeks return the same batch)."""
        with self._lock:
            if not self._has_pending:
                self._pending = self._checked(self._next_batch())
                self._has_pending = True
            return self._pending

    def peek_async(self) -> concurrent.futures.Future:
        """``peek()`` on a helper thread; wait for the future before calling ``next()`` for ordering."""
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="jaxdali-peek")
        return self._pool.submit(self.peek)

    @property
    def element_spec(self) -> dict:
        """``{name: ArraySpec}`` of the batches (peeks the first batch if none was seen yet)."""
        if self._spec is None:
            self.peek()
        return dict(self._spec)

    def __iter__(self):
        if self._has_pending:
            return self
        return super().__iter__()

    def checkpoints(self) -> list[bytes]:
        if self._has_pending:
            raise RuntimeError(PENDING_PEEK_MSG)
        return super().checkpoints()

    def reset(self) -> None:
        DALIGenericIterator.reset(self)

    def close(self) -> None:
        """Stops the peek thread, drops a peeked batch and closes the pipelines (see
        ``DALIGenericIterator.close``). Idempotent."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        with self._lock:
            self._pending, self._has_pending = None, False
        super().close()


# The arguments are DALIGenericIterator's, documented in the same words (DALI's tests compare the two).
DALIGenericPeekableIterator.__doc__ = """``DALIGenericIterator`` with ``peek()``, ``peek_async()`` and ``element_spec``.

    Every batch must have the shapes and dtypes of the first one. ``peek()`` fetches the next batch
    (advancing the counters) and keeps it until ``next()`` returns it; while a peeked batch is
    pending, ``checkpoints()`` raises.

""" + DALIGenericIterator.__doc__[DALIGenericIterator.__doc__.index("    Args:"):]

peekable_data_iterator = make_data_iterator(DALIGenericPeekableIterator)
