"""What every reader shares: DALI's LoaderBase arguments, sharding and the stream cursor.

A reader's whole state is its stream position: the number of samples it has emitted, padding
included. Which dataset index sits at a position is a pure function in ``jaxdali.ops.sampling``,
so restoring a checkpoint is O(1) and no reader keeps its own shard, epoch or padding code.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from jaxdali.ops import sampling
from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import Arg
from jaxdali.pipeline.state import ReshardError

__all__ = ["LOADER_ARGS", "Reader", "SHUFFLE_AFTER_EPOCH_BASE_SEED"]

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
    Arg("dont_use_mmap", "bool", False, "Use plain reads instead of mmap.", hint=True),
    Arg("lazy_init", "bool", False, "Parse metadata on first run.", hint=True),
    Arg("prefetch_queue_depth", "int", 1, "Reader-internal prefetch.", hint=True),
    Arg("tensor_init_bytes", "int", 1048576, "Allocation hint.", hint=True),
    Arg("skip_cached_images", "bool", False, "Decoder-cache hint.", hint=True),
)


class Reader(Operator):
    """Base class of readers. Subclasses list their samples in ``__init__`` (setting ``num_samples``)
    and implement ``load(ctx, indices)``, returning the output batches for those dataset indices."""

    #: Dataset size, set by the subclass before ``_init_sampling``.
    num_samples: int = 0

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
        self.position = 0

    def run(self, ctx, inputs, args):
        indices = self._indices(self.position, ctx.max_batch_size)
        outputs = self.load(ctx, indices)
        self.position += ctx.max_batch_size
        if self.prefix is not None and self.position >= self.prefix.length(self.spec):
            # The resumed epoch is done: continue as if this layout had been used all along.
            self.position += self.prefix.next_epoch * self.spec.padded_epoch_length - self.prefix.length(self.spec)
            self.prefix, self.resumed_from = None, None
        return outputs

    def _indices(self, start: int, count: int) -> np.ndarray:
        if self.prefix is None:
            return sampling.stream_indices(self.spec, start, count)
        return sampling.prefixed_stream(self.spec, self.prefix, start, count)[0]

    def load(self, ctx, indices: np.ndarray) -> Any:
        raise NotImplementedError

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

    #: (spec, its fields as a dict): the layout part of every state, converted once per spec.
    _spec_fields: tuple[sampling.ShardSpec, dict] | None = None

    def state(self) -> dict:
        resumed = None if self.resumed_from is None else {"layout": self.resumed_from[0],
                                                          "position": self.resumed_from[1]}
        if self._spec_fields is None or self._spec_fields[0] is not self.spec:
            self._spec_fields = (self.spec, dataclasses.asdict(self.spec))
        return {"position": self.position, "layout": dict(self._spec_fields[1]), "resumed_from": resumed}

    def restore(self, state: dict) -> None:
        saved = sampling.ShardSpec(**state["layout"])
        position = int(state["position"])
        resumed = state.get("resumed_from")
        if saved == self.spec:
            self.position = position
            if resumed is not None:
                self._resume(sampling.ShardSpec(**resumed["layout"]), int(resumed["position"]))
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
            raise ReshardError(f"{self.name}: the checkpoint was taken with {_layout_text(saved)}, this reader has "
                               f"{_layout_text(self.spec)}: {why}")
        self._resume(saved, position)
        self.position = 0

    def _resume(self, saved: sampling.ShardSpec, position: int) -> None:
        epoch, residual = sampling.residual_indices(saved, position)
        self.prefix = sampling.ResumePrefix(residual, epoch + 1)
        self.resumed_from = (dataclasses.asdict(saved), position)

    def resume_info(self) -> dict | None:
        """For iterators: the size of the residual epoch being read after a re-shard, else None."""
        if self.prefix is None:
            return None
        return {"residual": len(self.prefix.residual), "next_epoch": self.prefix.next_epoch}


def _layout_text(spec: sampling.ShardSpec) -> str:
    return (f"num_shards={spec.num_shards}, shard_id={spec.shard_id}, batch_size={spec.batch_size}, "
            f"num_samples={spec.num_samples}")
