"""What every reader shares: DALI's LoaderBase arguments, sharding and the stream cursor.

A reader's whole state is its stream position: the number of samples it has emitted, padding
included. Which dataset index sits at a position is a pure function in ``jaxdali.ops.sampling``,
so restoring a checkpoint is O(1) and no reader keeps its own shard, epoch or padding code.

Because the upcoming indices are known, a reader whose per-sample I/O is a pure function of the
index can have its next batches read ahead on I/O threads (``fetch``/``fetch_all``; see
``jaxdali.ops.readers.read_ahead`` for how to opt in).
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any, Sequence

import numpy as np

from jaxdali.core import options
from jaxdali.ops import sampling
from jaxdali.ops.operator import Operator
from jaxdali.ops.readers import storage
from jaxdali.ops.readers.read_ahead import ReadAhead
from jaxdali.ops.schema import Arg
from jaxdali.core.checkpoint import MAX_COUNT, CheckpointError, ReshardError, check_bool, check_dict, check_int

__all__ = ["LOADER_ARGS", "Reader", "SHUFFLE_AFTER_EPOCH_BASE_SEED", "listing_fingerprint", "records_fingerprint"]

#: Base seed of ``shuffle_after_epoch`` orders; the same on every shard unless the user sets one.
SHUFFLE_AFTER_EPOCH_BASE_SEED = 524287

LOADER_ARGS: tuple[Arg, ...] = (
    Arg("shard_id", "int", 0, "Index of the shard this reader reads.", min=0, placement=True),
    Arg("num_shards", "int", 1, "Number of shards the data is split into.", min=1, placement=True),
    Arg("stick_to_shard", "bool", False, "Always read the same shard (otherwise move to the next shard each epoch)."),
    Arg("pad_last_batch", "bool", False,
        "Repeat the shard's last sample so every shard yields the same number of full batches per epoch."),
    Arg("random_shuffle", "bool", False,
        "Shuffle the samples of the shard every epoch (the whole shard, not a small buffer as in DALI)."),
    Arg("initial_fill", "int", 1024, "DALI's shuffle-buffer size; jaxdali shuffles whole shards.", hint=True),
    Arg("read_ahead", "bool", False, "Read the whole data set into memory first.", hint=True),
    Arg("dont_use_mmap", "bool", False, "Read local container files (TFRecord, tar shards, RecordIO, ArrayRecord) "
        "with plain reads instead of memory-mapping them; other readers always read."),
    Arg("lazy_init", "bool", False, "Parse metadata on first run.", hint=True),
    Arg("prefetch_queue_depth", "int", 1, "Batches a reader that reads ahead (see the 'reader_read_ahead' "
        "option) keeps in flight on its I/O threads.", min=1),
    Arg("tensor_init_bytes", "int", 1048576, "Allocation hint.", hint=True),
    Arg("skip_cached_images", "bool", False, "Decoder-cache hint.", hint=True),
)


def listing_fingerprint(names: Sequence[str], labels: np.ndarray | None = None) -> str:
    """A short hash of a reader's listing: every sample's name, in order, and its label.

    Computed once at build (about 0.1 s per million names); a checkpoint carries it so that a restore
    on a folder whose files were renamed, replaced or relabelled (same count) is refused.
    """
    digest = hashlib.blake2b(digest_size=12)
    digest.update("\0".join(names).encode("utf-8", "surrogateescape"))
    if labels is not None:
        digest.update(b"\1" + np.ascontiguousarray(labels, dtype=np.int64).tobytes())
    return digest.hexdigest()


def records_fingerprint(paths: Sequence[str], layout: np.ndarray) -> str:
    """``listing_fingerprint`` of a reader of container files: the files' names (not their folders, so that
    a data set can move, e.g. to object storage) and ``layout``, the numbers that place every record
    (per-file counts, offsets, sizes)."""
    return listing_fingerprint([p.rstrip("/").rsplit("/", 1)[-1] for p in paths], np.asarray(layout).ravel())


class Reader(Operator):
    """Base class of readers. Subclasses list their samples in ``__init__`` (setting ``num_samples``,
    and ``listing``/``listing_source`` from ``listing_fingerprint`` or ``records_fingerprint``) and implement
    ``load(ctx, indices)``, returning the output batches for those dataset indices.

    Readers that implement ``fetch(index)`` and call ``_init_read_ahead`` get their next batches
    read ahead where the ``reader_read_ahead`` option says so; ``load`` then takes each batch's
    samples from ``fetch_all``.
    """

    can_reshard = True
    #: Dataset size, set by the subclass before ``_init_sampling``.
    num_samples: int = 0
    #: ``listing_fingerprint`` of the samples; "" for a reader whose listing is its arguments alone.
    listing: str = ""
    #: Where the listing comes from, for error messages (e.g. "class folders of '/data'").
    listing_source: str = ""
    #: Reads upcoming batches ahead (see ``_init_read_ahead``), or None.
    _read_ahead: ReadAhead | None = None

    def _init_sampling(self, shuffle_after_epoch: bool = False, shuffle_after_epoch_seed: int | None = None) -> None:
        a = self.args
        name = self.node.schema.name
        if shuffle_after_epoch and a["random_shuffle"]:
            raise ValueError(f"fn.{name}: shuffle_after_epoch and random_shuffle are mutually exclusive")
        if shuffle_after_epoch and a["stick_to_shard"]:
            raise ValueError(f"fn.{name}: shuffle_after_epoch implies stick_to_shard; do not set both")
        if a["shard_id"] >= a["num_shards"]:
            raise ValueError(f"fn.{name}: shard_id must be in [0, num_shards): got shard_id={a['shard_id']}, "
                             f"num_shards={a['num_shards']}")
        if a["num_shards"] > self.num_samples:
            raise ValueError(f"fn.{name}: num_shards ({a['num_shards']}) is larger than the number of samples "
                             f"({self.num_samples})")
        if shuffle_after_epoch:
            shuffle = "global"
            seed = SHUFFLE_AFTER_EPOCH_BASE_SEED if shuffle_after_epoch_seed is None else shuffle_after_epoch_seed
        elif a["random_shuffle"]:
            shuffle, seed = "shard", self.seed
        else:
            shuffle, seed = "none", 0
        self.spec = sampling.ShardSpec(
            num_samples=self.num_samples, num_shards=a["num_shards"], shard_id=a["shard_id"],
            stick_to_shard=a["stick_to_shard"] or shuffle == "global", pad_last_batch=a["pad_last_batch"],
            batch_size=self.build_ctx.max_batch_size, shuffle=shuffle, seed=seed)
        # The epochs one batch and the batches read ahead of it can span, plus the one before.
        shortest_epoch = (self.spec.padded_epoch_length if self.spec.pad_last_batch
                          else max(1, self.num_samples // a["num_shards"]))
        window = (1 + a["prefetch_queue_depth"]) * self.spec.batch_size
        self._orders = sampling.Orders(epochs=2 + -(-window // shortest_epoch))
        self.position = 0

    def run(self, ctx, inputs, args):
        batch = ctx.max_batch_size
        indices = self._indices(self.position, self.prefix, batch)
        if self._read_ahead is not None:
            self._read_ahead.schedule(self._upcoming(batch, self._read_ahead.depth))
        outputs = self.load(ctx, indices)
        self.position, prefix = self._advance(self.position, self.prefix, batch)
        if prefix is None and self.prefix is not None:
            self.prefix, self.resumed_from = None, None
        return outputs

    def _advance(self, position: int, prefix: sampling.ResumePrefix | None, batch: int):
        """The cursor (position, prefix) after a batch read at ``position``."""
        position += batch
        if prefix is not None and position >= prefix.length(self.spec):
            # The resumed epoch is done: continue as if this layout had been used all along.
            position += prefix.next_epoch * self.spec.padded_epoch_length - prefix.length(self.spec)
            prefix = None
        return position, prefix

    def _indices(self, start: int, prefix: sampling.ResumePrefix | None, count: int) -> np.ndarray:
        if prefix is None:
            return sampling.stream_indices(self.spec, start, count, self._orders)
        return sampling.prefixed_stream(self.spec, prefix, start, count, self._orders)[0]

    def _upcoming(self, batch: int, count: int) -> list[np.ndarray]:
        """The dataset indices of the ``count`` batches after the one at the current position."""
        out = []
        position, prefix = self.position, self.prefix
        for _ in range(count):
            position, prefix = self._advance(position, prefix, batch)
            out.append(self._indices(position, prefix, batch))
        return out

    def load(self, ctx, indices: np.ndarray) -> Any:
        raise NotImplementedError

    # -- read-ahead -----------------------------------------------------------------------------------
    def fetch(self, index: int) -> Any:
        """The I/O of dataset sample ``index`` (readers that read ahead implement it): thread-safe and a
        pure function of the index and the reader's constant arguments."""
        raise NotImplementedError(f"{self.name} does not fetch samples one by one")

    def _init_read_ahead(self, paths: Sequence[str]) -> None:
        """Reads batches ahead if the ``reader_read_ahead`` option asks for it for these paths."""
        mode = options.get("reader_read_ahead")
        if mode not in ("remote", "always", "never"):
            raise ValueError(f"jaxdali option reader_read_ahead must be 'remote', 'always' or 'never', got {mode!r}")
        if mode == "always" or (mode == "remote" and any(storage.is_remote(p) for p in paths)):
            self._read_ahead = ReadAhead(self.fetch, self.args["prefetch_queue_depth"], self.node.name)

    def fetch_all(self, ctx, indices: np.ndarray) -> list:
        """``fetch(i)`` for every index of the batch: read ahead, or fetched now on the worker pool."""
        if self._read_ahead is not None:
            return self._read_ahead.take(indices)
        out: list = [None] * len(indices)
        fetch, wanted = self.fetch, np.asarray(indices).tolist()

        def read(start: int, stop: int) -> None:
            for k in range(start, stop):
                out[k] = fetch(wanted[k])

        ctx.parallel_for(read, len(indices))
        return out

    def close(self) -> None:
        if self._read_ahead is not None:
            self._read_ahead.close()

    def reader_meta(self) -> dict:
        a = self.args
        return {
            "epoch_size": self.num_samples,
            "epoch_size_padded": sampling.epoch_size_padded(self.num_samples, a["num_shards"], a["pad_last_batch"]),
            "number_of_shards": a["num_shards"],
            "shard_id": a["shard_id"],
            "pad_last_batch": bool(a["pad_last_batch"]),
            "stick_to_shard": self.spec.sticks_to_shard,
        }

    # -- checkpoints ----------------------------------------------------------------------------------
    #: Set while reading the residual of an epoch resumed on another layout (see sampling.ResumePrefix).
    prefix: sampling.ResumePrefix | None = None
    #: (layout, position) of the checkpoint that the prefix was computed from.
    resumed_from: tuple[dict, int] | None = None
    #: Whether this reader's stream was ever resumed on another layout: its position then no longer
    #: follows from the pipeline's iteration.
    resharded: bool = False

    #: (spec, its fields as a dict): the layout part of every state, converted once per spec.
    _spec_fields: tuple[sampling.ShardSpec, dict] | None = None

    def state(self) -> dict:
        resumed = None if self.resumed_from is None else {"layout": self.resumed_from[0],
                                                          "position": self.resumed_from[1]}
        if self._spec_fields is None or self._spec_fields[0] is not self.spec:
            self._spec_fields = (self.spec, dataclasses.asdict(self.spec))
        return {"position": self.position, "layout": dict(self._spec_fields[1]), "resumed_from": resumed,
                "listing": self.listing, "resharded": self.resharded}

    def restore(self, state: dict) -> None:
        field = f"pipeline.runner.ops.{self.node.name}"
        check_dict(state, field, ("position", "layout", "resumed_from", "listing", "resharded"))
        self.resharded = check_bool(state["resharded"], f"{field}.resharded")
        if state["listing"] != self.listing:
            raise CheckpointError(
                f"{self.name} (fn.{self.node.schema.name}): checkpoint field {field + '.listing'!r} does not match "
                f"this reader's {self.num_samples} samples listed from {self.listing_source}: the files (or their "
                f"names, order or labels) changed since the checkpoint was taken")
        if self._read_ahead is not None:
            self._read_ahead.clear()
        saved = _spec_from(state["layout"], f"{field}.layout")
        position = check_int(state["position"], f"{field}.position", 0, MAX_COUNT)
        resumed = state["resumed_from"]
        if resumed is not None:
            check_dict(resumed, f"{field}.resumed_from", ("layout", "position"))
            resumed = (_spec_from(resumed["layout"], f"{field}.resumed_from.layout"),
                       check_int(resumed["position"], f"{field}.resumed_from.position", 0, MAX_COUNT))
        if saved == self.spec:
            self.position = position
            if resumed is not None:
                self._resume(*resumed)
            return
        if resumed is not None:
            raise ReshardError(
                f"{self.name}: this checkpoint was taken while finishing an epoch resumed on a new layout; resume it "
                f"on the same layout ({_layout_text(saved)}) until the epoch ends, then re-shard")
        problems = [f"{k}: in checkpoint {getattr(saved, k)!r}, here {getattr(self.spec, k)!r}"
                    for k in ("num_samples", "shuffle", "seed", "stick_to_shard", "pad_last_batch")
                    if getattr(saved, k) != getattr(self.spec, k)]
        if problems or not sampling.supports_elastic_resume(saved):
            why = "; ".join(problems) if problems else (
                "resuming on another layout needs pad_last_batch=True and a global sample order (no random_shuffle; "
                "shuffle_after_epoch is fine)")
            raise ReshardError(f"{self.name}: the checkpoint (field {field + '.layout'!r}) was taken with "
                               f"{_layout_text(saved)}, this reader has {_layout_text(self.spec)}: {why}")
        self._resume(saved, position)
        self.position = 0

    def _resume(self, saved: sampling.ShardSpec, position: int) -> None:
        epoch, residual = sampling.residual_indices(saved, position)
        self.prefix = sampling.ResumePrefix(residual, epoch + 1)
        self.resumed_from = (dataclasses.asdict(saved), position)
        self.resharded = True

    def check_restored_position(self, iteration: int) -> None:
        """After ``restore``: a reader that was never re-sharded has read one batch per iteration, so
        its position must be ``iteration * batch size`` (CheckpointError naming the field)."""
        expected = iteration * self.build_ctx.max_batch_size
        if not self.resharded and self.position != expected:
            raise CheckpointError(
                f"checkpoint field 'pipeline.runner.ops.{self.node.name}.position' is {self.position}, but after "
                f"{iteration} batches ('pipeline.runner.iteration') of {self.build_ctx.max_batch_size} samples "
                f"{self.name} is at {expected}")

    def resume_info(self) -> dict | None:
        """For iterators: the size of the residual epoch being read after a re-shard, else None."""
        if self.prefix is None:
            return None
        return {"residual": len(self.prefix.residual), "next_epoch": self.prefix.next_epoch}


def _spec_from(layout: Any, field: str) -> sampling.ShardSpec:
    check_dict(layout, field)
    fields = {f.name for f in dataclasses.fields(sampling.ShardSpec)}
    if set(layout) != fields:
        raise CheckpointError(f"checkpoint field {field!r} must hold exactly {sorted(fields)}, got {sorted(layout)}")
    try:
        return sampling.ShardSpec(**layout)
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"checkpoint field {field!r}: {e}") from None


def _layout_text(spec: sampling.ShardSpec) -> str:
    return (f"num_shards={spec.num_shards}, shard_id={spec.shard_id}, batch_size={spec.batch_size}, "
            f"num_samples={spec.num_samples}")
