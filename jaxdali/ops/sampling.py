"""Which dataset sample a reader emits at each position of its stream: pure index arithmetic.

A reader's whole state is one integer, its *stream position* ``p``: the number of samples it has
emitted since it was built, padding copies included. Everything else (which shard it is reading,
which reader epoch it is in, where that epoch's shuffle puts each sample) is a pure function of
``(ShardSpec, p)`` computed here, in O(1) of ``p``: no I/O, no threads, no clocks, and no replay of
earlier epochs, so a reader resumes from a checkpoint by jumping to ``p``.

Shards are contiguous ranges of the (possibly permuted) sample list; shard ``k`` of ``S`` over
``N`` samples is ``[floor(k*N/S), floor((k+1)*N/S))``, so shard sizes differ by at most one.
N=10, S=3::

    index   0 1 2 | 3 4 5 | 6 7 8 9
    shard   0 0 0 | 1 1 1 | 2 2 2 2

A *reader epoch* is one pass over one shard. Reader epoch ``e`` reads shard ``s_e = (k + e) mod S``
(the reader rotates to the next shard after every epoch), or ``s_e = k`` with ``stick_to_shard``.
Shard 0 of the layout above, batch size 3::

    pad_last_batch=False, stick_to_shard=False   0 1 2 | 3 4 5 | 6 7 8 9 | 0 1 2 | ...
    pad_last_batch=False, stick_to_shard=True    0 1 2 | 0 1 2 | 0 1 2 | ...
    pad_last_batch=True,  stick_to_shard=False   0 1 2 2 2 2 | 3 4 5 5 5 5 | 6 7 8 9 9 9 | ...
    pad_last_batch=True,  stick_to_shard=True    0 1 2 2 2 2 | 0 1 2 2 2 2 | ...

With padding every reader epoch has ``ceil(ceil(N/S)/batch_size) * batch_size`` positions: the
shard's real samples, then copies of the last real sample emitted in that epoch, so a batch never
mixes two epochs. Without padding an epoch has exactly the shard's size and batches may span
epochs.

Shuffles keep those counts and boundaries and only change which sample sits at each position:

* ``shuffle="shard"`` (DALI's ``random_shuffle=True``): the sample list is permuted once with a
  fixed constant seed, the same on every shard, so the shards are a fixed partition of that
  permuted list. Each reader epoch then visits its shard in a fresh order that is a pure function
  of ``(seed, epoch, shard)``.
* ``shuffle="global"`` (DALI's ``shuffle_after_epoch=True``): every reader epoch ``e`` re-permutes
  the whole list by a pure function of ``(seed, e)``, the same on every shard, and shard ``k`` takes
  its bounds of that list. Every epoch is shuffled, the first one included. This mode always sticks
  to its shard, whatever ``stick_to_shard`` says (DALI forces ``stick_to_shard`` on as well).

.. note::
   DALI's ``random_shuffle`` draws from a small buffer of ``initial_fill`` samples, which mixes
   weakly and needs a replay to resume. We shuffle the whole shard each epoch instead: better
   mixing and O(1) resume, with the same observable contract (a fixed partition into shards,
   every sample of the shard once per epoch). The orders themselves differ from DALI's.

Permutations are the stable argsort of 64-bit words from a Philox counter-based generator keyed
by the seed and counted by (epoch, shard), so they depend only on the Philox algorithm and stable
sorting, not on NumPy's shuffling routines. They are pure, so each is computed once and shared by
every reader that uses it (``Orders``): a reader holds the permutations of the epochs it is reading
and lets go of older ones, so what is kept follows what the live readers read, however many there are.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
import weakref

import numpy as np

__all__ = [
    "ShardSpec",
    "SHUFFLE_MODES",
    "shard_bounds",
    "shard_sizes",
    "padded_shard_size",
    "epoch_size_padded",
    "stream_indices",
    "stream_is_padding",
    "stream_epoch",
    "supports_elastic_resume",
    "residual_indices",
    "ResumePrefix",
    "prefixed_stream",
    "Orders",
]

#: Accepted values of ``ShardSpec.shuffle``.
SHUFFLE_MODES = ("none", "shard", "global")

_MASK64 = (1 << 64) - 1
# Philox key words that separate the three kinds of permutation drawn here.
_KEY_FIXED_LIST = 0x6A78_6461_6C69_0001
_KEY_SHARD_EPOCH = 0x6A78_6461_6C69_0002
_KEY_GLOBAL_EPOCH = 0x6A78_6461_6C69_0003
# Seed of the one-off permutation of the sample list used by shuffle="shard" (a fixed constant:
# the partition into shards must be identical on every shard and in every run).
_FIXED_LIST_SEED = 0x2545_F491_4F6C_DD1D


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _check_int(name: str, value, minimum: int | None = None) -> None:
    if not _is_int(value):
        raise TypeError(f"{name} must be an integer: got {name}={value!r} ({type(value).__name__})")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}: got {name}={value}")


def _check_layout(num_samples, num_shards, shard_id=None) -> None:
    _check_int("num_samples", num_samples, 0)
    _check_int("num_shards", num_shards, 1)
    if shard_id is not None:
        _check_int("shard_id", shard_id)
        if not 0 <= shard_id < num_shards:
            raise ValueError(
                f"shard_id must be in [0, num_shards): got shard_id={shard_id}, num_shards={num_shards}"
            )


@dataclasses.dataclass(frozen=True)
class ShardSpec:
    """How one reader walks its dataset: size, sharding, padding, batch size and shuffle.

    Args:
      num_samples: N, the number of samples in the dataset (after listing it). Must be > 0.
      num_shards: S, the number of shards the dataset is split into (DALI ``num_shards``, default 1).
        Must be in [1, N].
      shard_id: k, the shard this reader starts on (DALI ``shard_id``, default 0). In [0, S).
      stick_to_shard: DALI ``stick_to_shard`` (default False): False moves to the next shard after
        every reader epoch, True re-reads shard k forever.
      pad_last_batch: DALI ``pad_last_batch`` (default False): repeat the last sample of the epoch
        until the epoch has ``ceil(ceil(N/S)/batch_size)`` full batches.
      batch_size: the reader's batch size; padding fills up to a multiple of it. >= 1.
      shuffle: ``"none"``; ``"shard"`` (DALI ``random_shuffle=True``); or ``"global"`` (DALI
        ``shuffle_after_epoch=True``, which always sticks to shard k, see ``sticks_to_shard``).
      seed: seed of the per-epoch shuffles (any integer, taken modulo 2**64). Unused with
        ``shuffle="none"``.

    Raises:
      TypeError: an argument has the wrong type.
      ValueError: an argument is out of range; the message names it and its value.
    """

    num_samples: int
    num_shards: int = 1
    shard_id: int = 0
    stick_to_shard: bool = False
    pad_last_batch: bool = False
    batch_size: int = 1
    shuffle: str = "none"
    seed: int = 0

    def __post_init__(self):
        _check_int("num_samples", self.num_samples)
        if self.num_samples <= 0:
            raise ValueError(f"num_samples must be > 0: got num_samples={self.num_samples}")
        _check_layout(self.num_samples, self.num_shards, self.shard_id)
        if self.num_shards > self.num_samples:
            raise ValueError(
                f"num_shards ({self.num_shards}) is larger than the number of samples "
                f"({self.num_samples})"
            )
        _check_int("batch_size", self.batch_size, 1)
        for name in ("stick_to_shard", "pad_last_batch"):
            value = getattr(self, name)
            if not isinstance(value, (bool, np.bool_)):
                raise TypeError(f"{name} must be a bool: got {name}={value!r}")
        if self.shuffle not in SHUFFLE_MODES:
            raise ValueError(
                f"shuffle must be one of {', '.join(map(repr, SHUFFLE_MODES))}: "
                f"got shuffle={self.shuffle!r}"
            )
        _check_int("seed", self.seed)
        # Normalise NumPy scalars so that equal specs compare and hash equal.
        for name in ("num_samples", "num_shards", "shard_id", "batch_size", "seed"):
            object.__setattr__(self, name, int(getattr(self, name)))
        for name in ("stick_to_shard", "pad_last_batch"):
            object.__setattr__(self, name, bool(getattr(self, name)))

    @property
    def sticks_to_shard(self) -> bool:
        """Whether every reader epoch reads shard k: ``stick_to_shard`` or ``shuffle="global"``."""
        return self.stick_to_shard or self.shuffle == "global"

    @property
    def padded_epoch_length(self) -> int:
        """Stream positions per reader epoch with padding: ``ceil(ceil(N/S)/bs) * bs``."""
        per_shard = padded_shard_size(self.num_samples, self.num_shards)
        return -(-per_shard // self.batch_size) * self.batch_size


def shard_bounds(num_samples: int, num_shards: int, shard_id: int) -> tuple[int, int]:
    """The index range ``[begin, end)`` of shard ``shard_id``: ``[floor(k*N/S), floor((k+1)*N/S))``.

    >>> shard_bounds(10, 3, 0), shard_bounds(10, 3, 1), shard_bounds(10, 3, 2)
    ((0, 3), (3, 6), (6, 10))
    """
    _check_layout(num_samples, num_shards, shard_id)
    n, s, k = int(num_samples), int(num_shards), int(shard_id)
    return k * n // s, (k + 1) * n // s


def shard_sizes(num_samples: int, num_shards: int) -> np.ndarray:
    """Sizes of all ``num_shards`` shards, int64; they differ by at most one.

    >>> shard_sizes(10, 3).tolist()
    [3, 3, 4]
    """
    _check_layout(num_samples, num_shards)
    return np.diff(_shard_starts(int(num_samples), int(num_shards)))


def padded_shard_size(num_samples: int, num_shards: int) -> int:
    """The largest shard size, ``ceil(N/S)``: samples per shard once padding evens them out."""
    _check_layout(num_samples, num_shards)
    return -(-int(num_samples) // int(num_shards))


def epoch_size_padded(num_samples: int, num_shards: int, pad_last_batch: bool) -> int:
    """DALI's ``epoch_size_padded`` reader metadata: ``ceil(N/S) * S`` with padding, else ``N``."""
    if pad_last_batch:
        return padded_shard_size(num_samples, num_shards) * int(num_shards)
    _check_layout(num_samples, num_shards)
    return int(num_samples)


def stream_indices(spec: ShardSpec, start: int, count: int, orders: Orders | None = None) -> np.ndarray:
    """Dataset indices emitted at stream positions ``[start, start + count)``, int64.

    Costs O(count) (plus one permutation per reader epoch touched when shuffling, computed once: see
    ``Orders``, which ``orders`` is, the calling reader's; None: a process-wide one); the magnitude of
    ``start`` does not matter. Splitting a range into several calls gives the same indices as one call.

    >>> spec = ShardSpec(10, num_shards=3, shard_id=0, pad_last_batch=True, batch_size=3)
    >>> stream_indices(spec, 0, 12).tolist()
    [0, 1, 2, 2, 2, 2, 3, 4, 5, 5, 5, 5]
    """
    orders = _DEFAULT_ORDERS if orders is None else orders
    located = _locate_one_epoch(spec, start, count)
    if located is not None:  # the usual batch: one reader epoch, so one shard and consecutive positions
        return _one_epoch_indices(spec, *located, count, orders)
    epochs, shards, positions = _locate_range(spec, start, count)
    return _dataset_indices(spec, epochs, shards, positions, orders)


def stream_is_padding(spec: ShardSpec, start: int, count: int) -> np.ndarray:
    """Whether each stream position in ``[start, start + count)`` is a padding copy, bool.

    >>> spec = ShardSpec(10, num_shards=3, shard_id=0, pad_last_batch=True, batch_size=3)
    >>> stream_is_padding(spec, 0, 6).tolist()
    [False, False, False, True, True, True]
    """
    _, shards, positions = _locate_range(spec, start, count)
    return positions >= _sizes(spec)[shards]


def stream_epoch(spec: ShardSpec, position: int) -> int:
    """The reader epoch (0-based) that stream position ``position`` belongs to."""
    epochs, _, _ = _locate_range(spec, position, 1)
    return int(epochs[0])


# ---------------------------------------------------------------------------------------------
# Internals.


@functools.lru_cache(maxsize=8)
def _starts_cached(num_samples: int, num_shards: int) -> np.ndarray:
    shards = np.arange(num_shards + 1, dtype=np.int64)
    if num_samples * num_shards < (1 << 62):
        starts = shards * num_samples // num_shards
    else:  # exact for sizes whose product would overflow int64
        starts = np.array([k * num_samples // num_shards for k in range(num_shards + 1)], np.int64)
    starts.flags.writeable = False
    return starts


def _shard_starts(num_samples: int, num_shards: int) -> np.ndarray:
    """``floor(k*N/S)`` for k = 0..S (S+1 values, int64, read-only)."""
    return _starts_cached(num_samples, num_shards)


def _sizes(spec: ShardSpec) -> np.ndarray:
    return np.diff(_shard_starts(spec.num_samples, spec.num_shards))


def _locate_range(spec: ShardSpec, start: int, count: int):
    """(reader epoch, shard, position within that epoch) of each stream position, int64 arrays."""
    _check_int("start", start, 0)
    _check_int("count", count, 0)
    pos = np.arange(int(start), int(start) + int(count), dtype=np.int64)
    n, s, k = spec.num_samples, spec.num_shards, spec.shard_id
    starts = _shard_starts(n, s)
    if spec.pad_last_batch or spec.sticks_to_shard:
        length = spec.padded_epoch_length if spec.pad_last_batch else int(starts[k + 1] - starts[k])
        epochs, offsets = np.divmod(pos, length)
        shards = np.full_like(pos, k) if spec.sticks_to_shard else (k + epochs) % s
        return epochs, shards, offsets
    # No padding, rotating: the stream is the whole list read cyclically from the start of shard k,
    # and reader epoch boundaries are the shard boundaries.
    cycles, rest = np.divmod(pos, n)
    index = (starts[k] + rest) % n
    shards = ((index + 1) * s - 1) // n  # the shard holding `index`
    epochs = cycles * s + (shards - k) % s
    return epochs, shards, index - starts[shards]


def _locate_one(spec: ShardSpec, position: int) -> tuple[int, int, int]:
    """``_locate_range`` of one stream position, in Python integers."""
    n, s, k = spec.num_samples, spec.num_shards, spec.shard_id
    if spec.pad_last_batch or spec.sticks_to_shard:
        starts = _shard_starts(n, s)
        length = spec.padded_epoch_length if spec.pad_last_batch else int(starts[k + 1] - starts[k])
        epoch, offset = divmod(position, length)
        return epoch, k if spec.sticks_to_shard else (k + epoch) % s, offset
    cycles, rest = divmod(position, n)
    index = (k * n // s + rest) % n
    shard = ((index + 1) * s - 1) // n
    return cycles * s + (shard - k) % s, shard, index - shard * n // s


def _locate_one_epoch(spec: ShardSpec, start: int, count: int) -> tuple[int, int, int] | None:
    """(epoch, shard, first position) when stream positions ``[start, start + count)`` all lie in one
    reader epoch (their positions then follow each other), else None."""
    _check_int("start", start, 0)
    _check_int("count", count, 0)
    if count == 0:
        return None
    first = _locate_one(spec, int(start))
    last = _locate_one(spec, int(start) + int(count) - 1)
    return first if first[0] == last[0] else None


def _one_epoch_indices(spec: ShardSpec, epoch: int, shard: int, position: int, count: int,
                       orders: Orders) -> np.ndarray:
    """``_dataset_indices`` of ``count`` consecutive positions from ``position`` of one reader epoch."""
    starts = _shard_starts(spec.num_samples, spec.num_shards)
    size = int(starts[shard + 1] - starts[shard])
    positions = np.arange(position, position + count, dtype=np.int64)
    if position + count > size:  # padding positions repeat the epoch's last real one
        np.minimum(positions, size - 1, out=positions)
    return _epoch_indices(spec, epoch, shard, positions, orders)


def _dataset_indices(spec, epochs, shards, positions, orders: Orders) -> np.ndarray:
    starts = _shard_starts(spec.num_samples, spec.num_shards)
    sizes = np.diff(starts)
    # A padding position repeats the last real position of its epoch.
    positions = np.minimum(positions, sizes[shards] - 1)
    if spec.shuffle == "none":
        return starts[shards] + positions
    out = np.empty_like(positions)
    for epoch in np.unique(epochs).tolist():
        here = epochs == epoch
        out[here] = _epoch_indices(spec, epoch, int(shards[here][0]), positions[here], orders)  # one shard per epoch
    return out


def _epoch_indices(spec: ShardSpec, epoch: int, shard: int, positions: np.ndarray, orders: Orders) -> np.ndarray:
    """The dataset indices of ``positions`` (within the shard's size) of reader epoch ``epoch`` on ``shard``."""
    starts = _shard_starts(spec.num_samples, spec.num_shards)
    begin, size = int(starts[shard]), int(starts[shard + 1] - starts[shard])
    if spec.shuffle == "none":
        return begin + positions
    if spec.shuffle == "shard":
        order = orders.get(_KEY_SHARD_EPOCH, spec.seed, shard, epoch, size)
        fixed = orders.get(_KEY_FIXED_LIST, _FIXED_LIST_SEED, 0, None, spec.num_samples)
        return fixed[begin + order[positions]]
    order = orders.get(_KEY_GLOBAL_EPOCH, spec.seed, 0, epoch, spec.num_samples)  # "global"
    return order[begin + positions]


def _permutation(kind: int, seed: int, shard: int, epoch: int, size: int) -> np.ndarray:
    """A permutation of ``range(size)``: a pure function of its arguments (int64, read-only).

    The Philox key holds (seed, kind); the high words of its 256-bit counter hold (shard, epoch),
    and the low word counts the ``size`` draws, so different (shard, epoch) never share draws.
    """
    if size <= 1:
        order = np.zeros(size, dtype=np.int64)
    else:
        key = np.array([seed & _MASK64, kind], dtype=np.uint64)
        counter = np.array([0, 0, shard & _MASK64, epoch & _MASK64], dtype=np.uint64)
        words = np.random.Philox(key=key, counter=counter).random_raw(size)
        order = np.argsort(words, kind="stable").astype(np.int64, copy=False)
    order.flags.writeable = False
    return order


# Every permutation some Orders holds, so that readers needing the same one share it (weak: it goes
# when the last holder lets go).
_SHARED: "weakref.WeakValueDictionary[tuple, np.ndarray]" = weakref.WeakValueDictionary()
_SHARED_LOCK = threading.Lock()


class Orders:
    """The permutations one reader is using, each computed once and shared with every other reader that
    uses it (the 8 readers of 8 devices share the sample list's fixed permutation and, with
    ``shuffle="global"``, each epoch's).

    A fixed LRU of the most recent permutations thrashes once more readers are alive than it has room
    for (two shuffled readers of 8 shards each recomputed a 1.28M-sample permutation, ~14 ms, on every
    batch); held per reader, what is kept is what the live readers read.

    Args:
      epochs: how many reader epochs to keep the permutations of (the newest ones); older ones are
        let go, and computed again if asked for (e.g. after restoring an earlier checkpoint). A reader
        needs the epochs its current batch and the batches it reads ahead span.
    """

    def __init__(self, epochs: int = 2):
        self._epochs = max(1, int(epochs))
        self._held: dict[tuple, np.ndarray] = {}
        self._lock = threading.Lock()

    def get(self, kind: int, seed: int, shard: int, epoch: int | None, size: int) -> np.ndarray:
        """``_permutation(kind, seed, shard, epoch or 0, size)``; ``epoch=None`` for one that every
        epoch uses (kept while this holder lives)."""
        key = (kind, seed, shard, epoch, size)
        order = self._held.get(key)
        if order is not None:
            return order
        with _SHARED_LOCK:
            order = _SHARED.get(key)
        if order is None:
            order = _permutation(kind, seed, shard, 0 if epoch is None else epoch, size)
            with _SHARED_LOCK:
                order = _SHARED.setdefault(key, order)
        with self._lock:
            self._held[key] = order
            if epoch is not None:
                kept = sorted({k[3] for k in self._held if k[3] is not None})
                if len(kept) > self._epochs:
                    old = set(kept[:-self._epochs])
                    self._held = {k: v for k, v in self._held.items() if k[3] not in old}
        return order


#: For callers without a reader of their own (checkpoint arithmetic, tools, tests).
_DEFAULT_ORDERS = Orders(epochs=16)


# -- elastic resume --------------------------------------------------------------------------------------
#
# A run checkpointed on S_old shards can resume on S_new shards when the sample order is global
# (no shuffle, or shuffle="global") and readers pad their epochs, because then every shard is at the
# same position of the same epoch and "what is left of this epoch" is a pure function of the old
# layout and that position. The new readers first read that residual, split evenly over the new
# shards (a *resume prefix*), then continue with the next epoch on the new layout.


def supports_elastic_resume(spec: ShardSpec) -> bool:
    """Whether a reader with this spec can be resumed on another number of shards."""
    return spec.pad_last_batch and spec.shuffle in ("none", "global")


def residual_indices(spec: ShardSpec, position: int) -> tuple[int, np.ndarray]:
    """The samples of the current reader epoch that no shard has read yet, in global order.

    All shards of ``spec``'s layout are assumed to be at stream ``position`` (they advance in lock
    step). Returns ``(epoch, indices)``.
    """
    if not supports_elastic_resume(spec):
        raise ValueError(f"elastic resume needs pad_last_batch=True and a global order (shuffle 'none' or "
                         f"'global'): got {spec}")
    epoch, offset = divmod(int(position), spec.padded_epoch_length)
    sizes = _sizes(spec)
    parts = []
    for shard in range(spec.num_shards):
        reader = shard if spec.sticks_to_shard else (shard - epoch) % spec.num_shards
        done = min(offset, int(sizes[shard]))
        reader_spec = dataclasses.replace(spec, shard_id=reader)
        parts.append(stream_indices(reader_spec, epoch * spec.padded_epoch_length + done, int(sizes[shard]) - done))
    return epoch, np.concatenate(parts) if parts else np.zeros(0, np.int64)


@dataclasses.dataclass(frozen=True)
class ResumePrefix:
    """What a resharded reader reads before its normal stream: its share of the residual epoch.

    Attributes:
      residual: the whole residual (all new shards), global order.
      next_epoch: the reader epoch the normal stream continues with after the prefix.
    """

    residual: np.ndarray
    next_epoch: int

    def share(self, spec: ShardSpec) -> np.ndarray:
        """This reader's part: an even, contiguous split of the residual over the new shards."""
        r, s, k = len(self.residual), spec.num_shards, spec.shard_id
        return self.residual[k * r // s: (k + 1) * r // s]

    def length(self, spec: ShardSpec) -> int:
        """Stream positions of the prefix: the largest share, rounded up to whole batches."""
        largest = -(-len(self.residual) // spec.num_shards)
        return -(-largest // spec.batch_size) * spec.batch_size


def prefixed_stream(spec: ShardSpec, prefix: ResumePrefix, start: int, count: int,
                    orders: Orders | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(indices, is_padding) of positions ``[start, start+count)`` of a stream that begins with ``prefix``.

    Prefix positions past the reader's share repeat its last sample (padding); after the prefix the
    stream is ``spec``'s normal stream from ``prefix.next_epoch`` on. ``orders``: as for ``stream_indices``.
    """
    share = prefix.share(spec)
    length = prefix.length(spec)
    positions = np.arange(start, start + count, dtype=np.int64)
    in_prefix = positions < length
    indices = np.empty(count, np.int64)
    padding = np.zeros(count, bool)
    if in_prefix.any():
        p = positions[in_prefix]
        source = share if len(share) else prefix.residual[-1:]
        indices[in_prefix] = source[np.minimum(p, len(source) - 1)]
        padding[in_prefix] = p >= len(share)
    rest = ~in_prefix
    if rest.any():
        first = int(positions[rest][0]) - length + prefix.next_epoch * spec.padded_epoch_length
        n = int(rest.sum())
        indices[rest] = stream_indices(spec, first, n, orders)
        padding[rest] = stream_is_padding(spec, first, n)
    return indices, padding
