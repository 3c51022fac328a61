"""The process-wide worker pool and the per-pipeline prefetching producer thread.

One worker pool serves every pipeline of the process: operators split a batch into a few chunks
(about one per thread) and the inner calls (file reads, decoding, OpenCV, NumPy) release the GIL.
Each pipeline has one producer thread that keeps up to ``prefetch_queue_depth`` finished batches
ahead; every queued batch carries the pipeline state *after* it, so a checkpoint describes what the
consumer took, never what was prefetched.
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import logging
import queue
import sys
import threading
import time
import weakref
from typing import Any, Callable

__all__ = ["WorkerPool", "worker_pool", "shutdown_worker_pool", "HostSlots", "BatchQueue", "Prefetcher", "Produced",
           "QueueStats", "Cancelled"]

_log = logging.getLogger("jaxdali")


class WorkerPool:
    """A thread pool that grows to the largest ``num_threads`` any pipeline asked for.

    The calling thread always processes the first chunk itself, so a pipeline with ``num_threads=n``
    uses at most ``n - 1`` pool threads at a time.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._size = 0

    @property
    def size(self) -> int:
        return self._size

    def ensure(self, num_threads: int) -> None:
        """Makes sure ``num_threads - 1`` pool threads can run at once."""
        wanted = max(0, num_threads - 1)
        with self._lock:
            if wanted <= self._size:
                return
            old = self._executor
            self._executor = concurrent.futures.ThreadPoolExecutor(wanted, thread_name_prefix="jaxdali-worker")
            self._size = wanted
        if old is not None:
            old.shutdown(wait=False)

    def parallel_for(self, fn: Callable[[int, int], None], n: int, num_chunks: int,
                     stop: threading.Event | None = None) -> None:
        """Runs ``fn(start, stop)`` over contiguous chunks of ``range(n)`` on up to ``num_chunks`` threads
        (the calling thread included) and waits.

        The range is cut into a few chunks per thread (at least two samples each), which the threads
        take in order as they become free: a thread that drew quick samples takes more, so one slow
        image does not leave the other threads idle at the barrier. The first exception raised by
        any chunk is re-raised here with its original traceback; the chunks not started yet are
        skipped. Once ``stop`` is set, no further chunk starts and ``Cancelled`` is raised.
        """
        threads = min(num_chunks, n, self._size + 1)
        if threads <= 1:
            if n:
                fn(0, n)
            return
        pieces = min(n // 2, threads * _CHUNKS_PER_THREAD) or 1
        bounds = [(i * n // pieces, (i + 1) * n // pieces) for i in range(pieces)]
        work = _ChunkQueue(fn, bounds, stop)
        executor = self._executor
        futures = [executor.submit(work.drain) for _ in range(threads - 1)]
        work.drain()
        for f in futures:
            f.result()
        if work.error is not None:
            raise work.error

    def shutdown(self) -> None:
        with self._lock:
            executor, self._executor, self._size = self._executor, None, 0
        if executor is not None:
            executor.shutdown(wait=True)


#: Chunks per thread in ``parallel_for``: enough to balance samples of different cost, few enough
#: that the per-chunk overhead (a Python call and a lock) stays negligible.
_CHUNKS_PER_THREAD = 4


class _ChunkQueue:
    """Chunks of one ``parallel_for`` call, taken in order by the threads that run ``drain``."""

    def __init__(self, fn: Callable[[int, int], None], bounds: list[tuple[int, int]],
                 stop: threading.Event | None = None):
        self._fn = fn
        self._bounds = bounds
        self._stop = stop
        self._next = 0
        self._lock = threading.Lock()
        self.error: BaseException | None = None

    def drain(self) -> None:
        fn, bounds = self._fn, self._bounds
        while True:
            with self._lock:
                k = self._next
                if k >= len(bounds) or self.error is not None:
                    return
                if self._stop is not None and self._stop.is_set():
                    self.error = Cancelled("the pipeline was closed")
                    return
                self._next = k + 1
            try:
                fn(*bounds[k])
            except BaseException as e:  # noqa: BLE001 - re-raised by parallel_for after the others stop
                with self._lock:
                    if self.error is None:
                        self.error = e
                return


class Cancelled(RuntimeError):
    """Work abandoned because its pipeline was closed (never reaches the user: a closed pipeline's
    results are dropped)."""


_POOL = WorkerPool()


def worker_pool() -> WorkerPool:
    """The process-wide worker pool (created lazily; threads start on first use)."""
    return _POOL


def shutdown_worker_pool() -> None:
    """Stops the pool's threads; the pool restarts on the next use. Safe to call repeatedly."""
    _POOL.shutdown()


class HostSlots:
    """At most ``slots`` batches of a group of pipelines computed at once, granted first come first served.

    The pipelines of one iterator (one per device) share it: without it their producer threads,
    two per pipeline, would all compute at once on cores sized for one pipeline's ``num_threads``,
    and the GIL hand-overs and cache misses of that oversubscription cost more than the work.
    Granting in arrival order keeps every pipeline's queue moving, so none starves the consumer.
    """

    def __init__(self, slots: int):
        if slots < 1:
            raise ValueError(f"HostSlots needs at least one slot, got {slots}")
        self._lock = threading.Lock()
        self._free = slots
        self._waiters: collections.deque[threading.Lock] = collections.deque()

    def acquire(self) -> None:
        with self._lock:
            if self._free and not self._waiters:
                self._free -= 1
                return
            turn = threading.Lock()
            turn.acquire()
            self._waiters.append(turn)
        turn.acquire()  # released by the release() that hands this waiter its slot

    def release(self) -> None:
        with self._lock:
            if self._waiters:
                self._waiters.popleft().release()
            else:
                self._free += 1


@dataclasses.dataclass
class QueueStats:
    """What the prefetch queue saw since the pipeline was built (see ``Pipeline.queue_statistics``).

    Attributes:
      gets: batches the consumer asked for.
      empty_gets: requests that found no finished batch and had to wait.
      consumer_wait_seconds: total time the consumer waited for a batch (the loader is the
        bottleneck when this grows with the number of batches).
      occupancy_sum: finished batches waiting in the queue, summed over the requests
        (``occupancy_sum / gets`` is the mean occupancy a request found).
      producer_idle_seconds: time the producer thread had nothing scheduled, i.e. waited for the
        consumer (the training step is the bottleneck when this grows).
      queued: finished batches in the queue now.
    """

    gets: int = 0
    empty_gets: int = 0
    consumer_wait_seconds: float = 0.0
    occupancy_sum: int = 0
    producer_idle_seconds: float = 0.0
    queued: int = 0


@dataclasses.dataclass
class Produced:
    """One entry of a prefetch queue: a batch and the state after it, or the end of data, or an error."""

    outputs: Any = None
    state: Any = None
    error: BaseException | None = None
    end: bool = False


class BatchQueue:
    """The consumer side of a prefetch queue: finished entries in order, their statistics, and the
    wait for the next one. ``Prefetcher`` fills it from its own producer threads, a pipeline group's
    ``GroupMember`` from the group's rounds; subclasses say how to wait and how a credit is added.

    Subclasses set ``_lock`` (the lock guarding the queue; ``_take`` is called holding it).
    """

    _lock: Any

    def __init__(self):
        self._queue: collections.deque[Produced] = collections.deque()
        self._halted = False
        self._closed = False
        self._stats = QueueStats()

    def _take(self, schedule_one: bool) -> Produced:
        """The next entry, waiting for it (call with ``_lock`` held); ``schedule_one``: if it is a batch,
        one more credit in the same lock round trip."""
        stats = self._stats
        stats.gets += 1
        stats.occupancy_sum += len(self._queue)
        if not self._queue:
            stats.empty_gets += 1
            start = time.perf_counter()
            try:
                while not self._queue:
                    self._check_open()
                    if not self._coming():
                        raise RuntimeError(
                            "No pipeline run is scheduled: call schedule_run() before share_outputs()/outputs()")
                    self._wait_for_entry()
            finally:
                stats.consumer_wait_seconds += time.perf_counter() - start
        item = self._queue.popleft()
        if schedule_one and not (item.end or item.error or self._halted or self._closed):
            self._add_credit()
        return item

    def _coming(self) -> bool:
        """Whether an entry is scheduled or being computed (call with ``_lock`` held)."""
        raise NotImplementedError

    def _wait_for_entry(self) -> None:
        """Waits until an entry may have been queued (call with ``_lock`` held)."""
        raise NotImplementedError

    def _add_credit(self) -> None:
        """Asks for one more batch (call with ``_lock`` held)."""
        raise NotImplementedError

    def _credits_changed(self) -> None:
        """Lets the producer see a change of the credits or of the halt (call with ``_lock`` held)."""
        raise NotImplementedError

    def _in_progress(self) -> int:
        """Batches asked for and not queued yet (call with ``_lock`` held)."""
        raise NotImplementedError

    def _check_open(self) -> None:
        raise NotImplementedError

    def pending(self) -> int:
        """Batches queued, running or scheduled."""
        with self._lock:
            return len(self._queue) + self._in_progress()

    def resume(self) -> None:
        """Clears the halt left by an end of data; drops queued end markers."""
        with self._lock:
            self._halted = False
            self._queue = collections.deque(p for p in self._queue if not p.end)
            self._credits_changed()

    def get(self, schedule_one: bool = False) -> Produced:
        """Blocks until the next entry is ready and returns it; ``schedule_one``: if it is a batch,
        ``schedule(1)`` in the same lock round trip."""
        with self._lock:
            return self._take(schedule_one)

    def queued(self) -> int:
        with self._lock:
            return len(self._queue)

    def ended(self) -> bool:
        """Whether the producer halted at an end of the data (the end marker is queued, perhaps behind
        batches the consumer has not taken yet)."""
        with self._lock:
            return self._halted and any(p.end for p in self._queue)

    @property
    def closed(self) -> bool:
        return self._closed


class Prefetcher(BatchQueue):
    """Runs ``produce()`` on a producer thread, once per scheduled credit, queueing the results.

    ``produce`` returns ``(outputs, state)`` or raises ``StopIteration`` at the end of the data; after
    the end or an error the producer halts until ``resume()``. Holds no reference to the pipeline
    facade, so dropping the pipeline can stop the thread (``weakref.finalize`` calls ``close``).

    Shutdown (``close``): the producers are told to stop and ``cancel()`` is called, which makes work
    in progress end early (``GraphRunner.cancel``); ``on_stop()`` (``GraphRunner.close``, which
    closes the operators) runs once no producer thread runs any more, on the last one to leave.
    Every lock is entered with ``with self._lock`` (a C call): a KeyboardInterrupt can interrupt the
    Python-level ``Condition.__enter__``/``__exit__`` between the lock call and the return, leaving
    the lock held for good, and the producers waiting for it could never stop.

    Overlapped batches: when ``begin`` and ``finish`` are given (``produce() = finish(begin())``),
    ``producers`` threads run batches at the same time. ``begin`` (the sources, which read in order
    and carry all the state) runs for one batch at a time, in credit order; ``finish`` (the pure
    per-sample operators) of one batch overlaps the next batch's ``begin`` and ``finish``; results are
    queued in credit order. The serial parts of one batch (planning, dispatch) then no longer leave
    the other cores idle.
    """

    def __init__(self, produce: Callable[[], tuple[Any, Any]], name: str, begin: Callable[[], Any] | None = None,
                 finish: Callable[[Any], tuple[Any, Any]] | None = None, producers: int = 1,
                 cancel: Callable[[], None] | None = None, on_stop: Callable[[], None] | None = None):
        super().__init__()
        self._produce = produce
        self._cancel = cancel
        self._on_stop = on_stop
        self._begin = begin
        self._finish = finish
        self._producers = producers if begin is not None and finish is not None else 1
        self._name = name
        # The condition's lock, always entered directly (see the class docstring).
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._begin_lock = threading.Lock()
        self._credits = 0
        # The producer waiting for a credit (at most one: the others wait for the begin lock) sleeps
        # on this doorbell rather than on the condition: next() then wakes it with one C call
        # (``_ring``) instead of the condition's Python-level notify, which costs it ~10 us.
        self._doorbell: queue.SimpleQueue[None] = queue.SimpleQueue()
        self._credit_waiter = False
        self._busy = 0  # batches being produced
        self._next_ticket = 0  # order of the batches begun
        self._next_out = 0  # ticket of the batch to queue next
        self._threads: list[threading.Thread] = []
        self._exited: set[threading.Thread] = set()  # producer threads out of _loop for good
        self._stopped = False  # on_stop has been called
        self._slots: HostSlots | None = None
        _PREFETCHERS.add(self)

    # -- consumer side --------------------------------------------------------------------------
    def schedule(self, runs: int) -> None:
        """Asks for ``runs`` more batches; starts the producer thread on first use."""
        with self._lock:
            self._check_open()
            if self._halted:
                return
            self._credits += runs
            self._ring()
            if not self._threads:
                # Daemon threads, so that a pipeline the user never closed cannot block interpreter
                # exit (non-daemon threads are joined before any exit hook could close them);
                # close(), the pipeline's weakref finalizer and the exit hook stop them.
                _register_exit_hook()
                for k in range(self._producers):
                    thread = threading.Thread(target=self._loop, name=f"jaxdali-prefetch-{self._name}-{k}",
                                              daemon=True)
                    self._threads.append(thread)
                    thread.start()

    @property
    def producers(self) -> int:
        """Producer threads (2 when batches overlap)."""
        return self._producers

    def unstarted(self) -> bool:
        """Whether no batch was ever scheduled (no producer thread started) and it is open."""
        with self._lock:
            return not self._threads and not self._closed

    def abandon(self) -> None:
        """Retires a prefetcher that never started, leaving ``on_stop`` uncalled: its pipeline's batches
        are produced elsewhere now (``jaxdali.pipeline.group``), by what closes its operators."""
        with self._lock:
            if self._threads:
                raise RuntimeError(f"prefetcher {self._name!r} has started; it cannot be abandoned")
            self._closed = self._stopped = True
        _PREFETCHERS.discard(self)

    def share_slots(self, slots: HostSlots | None) -> None:
        """Computes each batch holding a slot of ``slots`` (shared with other pipelines; None: no limit)."""
        self._slots = slots

    def _coming(self) -> bool:
        return bool(self._credits or self._busy)

    def _wait_for_entry(self) -> None:
        self._cond.wait()

    def _add_credit(self) -> None:
        self._credits += 1
        self._ring()

    def _credits_changed(self) -> None:
        self._ring()

    def _in_progress(self) -> int:
        return self._credits + self._busy

    def statistics(self) -> "QueueStats":
        """A copy of the queue statistics since the pipeline was built."""
        with self._lock:
            return dataclasses.replace(self._stats, queued=len(self._queue))


    def wait_idle(self) -> None:
        """Waits until the producer has run every scheduled batch (or halted, or was closed)."""
        with self._lock:
            while self._busy or (self._credits and not self._halted and not self._closed):
                self._cond.wait()

    def discard(self) -> None:
        """Drops all queued and scheduled work (the producer finishes its current batch first)."""
        with self._lock:
            self._credits = 0
            while self._busy:
                self._cond.wait()
            self._queue.clear()

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"pipeline {self._name!r} is closed")

    # -- lifecycle --------------------------------------------------------------------------------
    def close(self, timeout: float = 30.0, join: bool = True) -> None:
        """Stops the producer threads, then (``on_stop``) the operators. Idempotent.

        With ``join`` it waits for the threads (TimeoutError after ``timeout``); without, it only
        tells them to stop, which is what a garbage-collection finalizer may do (it can run on a
        thread holding a lock that a producer waits for). The join is skipped during interpreter
        shutdown.
        """
        with self._lock:
            self._closed = True
            self._credits = 0
            self._queue.clear()
            self._ring()
            self._cond.notify_all()
            cancel, self._cancel = self._cancel, None  # once, even if an interrupted close is retried
        if cancel is not None:
            cancel()
        self._leave(exiting=False)
        if join and not sys.is_finalizing():
            deadline = time.monotonic() + timeout
            self.wait_stopped(deadline)
            for thread in self._threads:
                if thread is not threading.current_thread():
                    thread.join(max(0.0, deadline - time.monotonic()))

    def wait_stopped(self, deadline: float) -> None:
        """Waits until every producer thread has left its loop (after ``close``), at most until
        ``deadline`` (``time.monotonic()``); TimeoutError if one has not then.

        A thread that left its loop runs no native code any more. This does not use
        ``Thread.join``: a KeyboardInterrupt during a join marks the thread as stopped while it
        still runs (CPython 3.11's bpo-45274 handling), so a join retried after Ctrl-C returns at once.
        """
        with self._lock:
            while True:
                running = [t.name for t in self._running_threads() if t is not threading.current_thread()]
                if not running:
                    return
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"jaxdali producer threads {running} did not stop when their pipeline "
                                       "was closed")
                self._cond.wait(left)

    def _running_threads(self) -> list[threading.Thread]:
        """Producer threads started and still in their loop (call with the lock held)."""
        return [t for t in self._threads if t.ident is not None and t not in self._exited]

    def _leave(self, exiting: bool) -> None:
        """Bookkeeping of a producer thread leaving its loop (``exiting``), or of ``close``: once the
        prefetcher is closed and no producer runs, ``on_stop`` is called, exactly once."""
        with self._lock:
            if exiting:
                self._exited.add(threading.current_thread())
                self._cond.notify_all()
            if not self._closed or self._running_threads() or self._stopped:
                return
            self._stopped = True
        if self._on_stop is not None:
            self._on_stop()

    def wakeup(self) -> None:
        """Wakes waiters (used when fed data arrives)."""
        with self._lock:
            self._cond.notify_all()

    # -- producer side -----------------------------------------------------------------------------
    def _loop(self) -> None:
        try:
            while True:
                ticket = self._take_credit()
                if ticket is None:
                    return
                # In a call of its own, so that no local of this long-lived frame keeps the last batch
                # (or an error, whose traceback reaches the consumer's frames) alive while it waits.
                # The slot is given back before _put, which may wait for another producer's batch.
                slots = self._slots
                if slots is None:
                    self._put(ticket, self._run_one())
                    continue
                slots.acquire()
                try:
                    produced = self._run_one()
                finally:
                    slots.release()
                self._put(ticket, produced)
                del produced
        finally:
            self._leave(exiting=True)

    def _run_one(self) -> Produced:
        try:
            if self._producers == 1:
                outputs, state = self._produce()
            else:
                try:
                    job = self._begin()
                except BaseException:
                    # No later batch may begin after the end of the data or an error (a source
                    # must not be asked again before a reset).
                    with self._lock:
                        self._halted = True
                        self._credits = 0
                    raise
                finally:
                    self._begin_lock.release()
                outputs, state = self._finish(job)
            return Produced(outputs=outputs, state=state)
        except StopIteration:
            return Produced(end=True)
        except BaseException as e:  # noqa: BLE001 - handed to the consumer, which re-raises it
            return Produced(error=e)

    def _take_credit(self) -> int | None:
        """Waits for a credit and takes it; returns the batch's ticket, or None when closed. With
        several producers the begin lock is held on return (released once ``begin`` has run), so
        batches begin in ticket order."""
        if self._producers > 1:
            self._begin_lock.acquire()
        with self._lock:
            if not self._closed and (self._credits == 0 or self._halted):
                start = time.perf_counter()
                while not self._closed and (self._credits == 0 or self._halted):
                    self._credit_waiter = True
                    self._lock.release()
                    try:
                        self._doorbell.get()
                    finally:
                        self._lock.acquire()
                self._stats.producer_idle_seconds += time.perf_counter() - start
            if self._closed:
                if self._producers > 1:
                    self._begin_lock.release()
                return None
            self._credits -= 1
            self._busy += 1
            ticket = self._next_ticket
            self._next_ticket += 1
            return ticket

    def _ring(self) -> None:
        """Wakes the producer waiting for a credit, if any (called with the lock held, after a change
        of ``_credits``, ``_halted`` or ``_closed``)."""
        if self._credit_waiter:
            self._credit_waiter = False
            self._doorbell.put(None)

    def _put(self, ticket: int, item: Produced) -> None:
        """Queues ``item`` once every earlier ticket is queued (results keep the credit order)."""
        with self._lock:
            while self._next_out != ticket and not self._closed:
                self._cond.wait()
            self._busy -= 1
            self._next_out = ticket + 1
            if not self._closed:
                self._queue.append(item)
                if item.end or item.error is not None:
                    self._halted = True
                    self._credits = 0
            self._cond.notify_all()


# Every prefetcher whose threads may still run (a running thread keeps its prefetcher alive). At exit
# they are stopped and joined: a daemon thread still inside native code (a decoder, OpenCV, XLA) when
# the interpreter finalizes is torn down by a forced unwind through C++ frames, which aborts the
# process ("FATAL: exception not rethrown", exit status -6).
_PREFETCHERS: "weakref.WeakSet[Prefetcher]" = weakref.WeakSet()

#: How long the exit hook waits for producers to stop (they stop between two chunks of work).
EXIT_GRACE_SECONDS = 3.0

_exit_hook_registered = False


def _register_exit_hook() -> None:
    """Registers ``_stop_producers_at_exit`` as a *threading* exit hook (once).

    Those run at the start of interpreter shutdown, before non-daemon threads are joined and before
    any ``atexit`` function: the producers stop before the worker pool's threads are joined (a
    producer could keep giving them work) and before JAX's ``atexit`` hook tears down its backends (a
    producer may be placing a batch on a device). Registered with the first producer thread, hence
    after ``concurrent.futures``' own hook, so it runs first (they run in reverse order). As with
    ``concurrent.futures``, a non-daemon thread that still iterates once the main thread has ended
    finds its pipelines closed.
    """
    global _exit_hook_registered
    if _exit_hook_registered:
        return
    try:
        threading._register_atexit(_stop_producers_at_exit)  # the hook concurrent.futures uses too
    except RuntimeError:  # the interpreter is already shutting down
        return
    _exit_hook_registered = True


def _stop_producers_at_exit() -> None:
    """Stops every producer and waits (at most ``EXIT_GRACE_SECONDS``) until they are out of native code.

    A Ctrl-C while this waits must not end the wait: the interpreter would then finalize with
    producers inside C++ code and abort. The KeyboardInterrupt is dropped (the process is exiting
    anyway) and the wait goes on until the deadline.
    """
    deadline = time.monotonic() + EXIT_GRACE_SECONDS
    prefetchers = list(_PREFETCHERS)
    while True:
        try:
            for prefetcher in prefetchers:
                prefetcher.close(join=False)
            for prefetcher in prefetchers:
                try:
                    prefetcher.wait_stopped(deadline)
                except TimeoutError as e:
                    _log.warning("%s; the interpreter may abort when it finalizes", e)
            return
        except KeyboardInterrupt:
            if time.monotonic() >= deadline:
                return
