"""Reading upcoming batches ahead of the pipeline, so a high-latency store does not starve it.

A reader's sample order is a pure function of its stream position (``jaxdali.ops.sampling``), so
it knows the dataset indices of its next batches before it is asked for them. ``ReadAhead`` runs
the reader's per-sample I/O (``fetch(index)``) for those batches on a small pool of I/O threads
while the current batch goes through the rest of the pipeline; requests to a remote store are
then in flight concurrently instead of one after another on the decode path.

Read-ahead is a cache, never a source of truth: a batch is taken from it only when its indices are
exactly the ones the reader computed for the batch it is producing, anything else (a restored
checkpoint, a re-shard) drops what was read ahead, and ``fetch`` must be a pure function of the
index. Results and checkpoints are therefore the same with or without it.

How a reader opts in (see ``Reader`` in ``base.py``):

1. implement ``fetch(index) -> object``: all the I/O (and cheap parsing) of one sample, thread-safe,
   depending on nothing but the index and the reader's constant arguments;
2. call ``self._init_read_ahead(paths)`` at the end of ``__init__`` with the paths it reads (read-ahead
   starts only where the ``reader_read_ahead`` option asks for it: by default for remote URLs);
3. in ``load``, get the batch's fetched samples with ``self.fetch_all(ctx, indices)``.

The number of batches read ahead is the reader's ``prefetch_queue_depth`` (DALI's "batches
prefetched by the internal loader", default 1).
"""

from __future__ import annotations

import collections
import concurrent.futures
import threading
from typing import Any, Callable, Sequence

import numpy as np

__all__ = ["IO_THREADS", "ReadAhead"]

#: Most I/O threads of a reading-ahead reader (it uses one per sample in flight, up to this): requests
#: in flight at once. The threads mostly wait on the network (GIL released), so this is far more than
#: the cores; with 20 ms per request, 64 threads read up to 3200 requests/s.
IO_THREADS = 64


class ReadAhead:
    """Fetches the samples of the next ``depth`` batches on up to ``IO_THREADS`` threads.

    Args:
      fetch: the reader's per-sample I/O, ``fetch(index) -> sample``.
      depth: batches kept in flight beyond the one being produced.
      name: the reader's name, for the threads' names.
    """

    def __init__(self, fetch: Callable[[int], Any], depth: int, name: str):
        self._fetch = fetch
        self.depth = depth
        self._name = name
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._closed = False
        self._lock = threading.Lock()
        # Batches in flight, oldest first: (indices, one future per sample).
        self._pending: collections.deque[tuple[np.ndarray, list[concurrent.futures.Future]]] = collections.deque()

    def _submit(self, indices: np.ndarray) -> list[concurrent.futures.Future] | None:
        """Futures of ``fetch`` for each index, or None once closed."""
        with self._lock:  # close() may run on another thread while the producer schedules
            if self._closed:
                return None
            if self._pool is None:
                threads = min(IO_THREADS, max(1, len(indices) * self.depth))
                self._pool = concurrent.futures.ThreadPoolExecutor(threads,
                                                                   thread_name_prefix=f"jaxdali-read-{self._name}")
            fetch = self._fetch
            return [self._pool.submit(fetch, int(i)) for i in indices]

    def schedule(self, upcoming: Sequence[np.ndarray]) -> None:
        """Makes sure the batches ``upcoming`` (in order, after the one being produced) are in flight."""
        pending = list(self._pending)
        if any(not np.array_equal(p[0], u) for p, u in zip(pending, upcoming)):
            self.clear()
            pending = []
        for indices in upcoming[len(pending):]:
            futures = self._submit(indices)
            if futures is None:
                return
            self._pending.append((indices, futures))

    def take(self, indices: np.ndarray) -> list:
        """The fetched samples of ``indices``: read ahead if they were scheduled as the next batch,
        fetched now (concurrently) otherwise. Re-raises ``fetch``'s exception."""
        if self._pending and np.array_equal(self._pending[0][0], indices):
            futures = self._pending.popleft()[1]
        else:
            self.clear()
            futures = self._submit(indices)
            if futures is None:  # closed: a batch still being produced while the pipeline shuts down
                return [self._fetch(int(i)) for i in indices]
        return [f.result() for f in futures]

    def clear(self) -> None:
        """Drops everything read ahead (the results of running fetches are discarded)."""
        for _, futures in self._pending:
            for f in futures:
                f.cancel()
        self._pending.clear()

    def close(self) -> None:
        """Drops pending reads and stops the I/O threads; safe to call twice. Batches asked for afterwards
        (by a producer finishing its batch during shutdown) are read on the calling thread."""
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
        self.clear()
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
