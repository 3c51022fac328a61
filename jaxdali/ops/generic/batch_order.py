"""Reordering samples across the batch: ``permute_batch`` and the random ``batch_permutation``."""

from __future__ import annotations

import numpy as np

from jaxdali.ops import rng
from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import REQUIRED, Arg, OpArgumentError, OpSchema, register
from jaxdali.tensors import TensorListCPU

__all__ = ["PERMUTE_BATCH", "BATCH_PERMUTATION"]


class PermuteBatch(Operator):
    """Output sample ``i`` is input sample ``indices[i]`` (repetitions allowed); source info follows."""

    def run(self, ctx, inputs, args):
        (x,) = inputs
        n = len(x)
        if args.is_per_sample("indices"):
            indices = args.per_sample("indices", np.int64)  # one scalar per sample
        else:
            indices = np.asarray(args["indices"], np.int64)
            if len(indices) == 1:  # one index for every sample (DALI wants one per sample)
                indices = np.repeat(indices, n)
            if len(indices) != n:
                raise OpArgumentError(f"fn.permute_batch: 'indices' has {len(indices)} entries for a batch of {n}")
        bad = np.flatnonzero((indices < 0) | (indices >= n))
        if bad.size:
            k = int(bad[0])
            raise OpArgumentError(f"fn.permute_batch: indices[{k}] = {int(indices[k])} is not a sample of the batch of "
                                  f"{n} (valid: 0 to {n - 1})")
        info = [x.source_info[k] for k in indices] if x.source_info is not None else None
        samples = x.samples()
        return TensorListCPU([samples[k] for k in indices], x.layout(), info)  # the samples, not copies


class BatchPermutation(Operator):
    """A random permutation of the sample indices (int32 scalars), new every iteration."""

    def run(self, ctx, inputs, args):
        n = ctx.batch_size
        key = np.array([rng.derive_seed(self.seed, ctx.iteration)], np.uint64)
        if self.args["allow_repetitions"]:
            picks = np.floor(rng.uniform(key, n)[0] * n).astype(np.int32)
        else:
            picks = np.argsort(rng.uniform(key, n)[0], kind="stable").astype(np.int32)
        if self.args["no_fixed_points"] and n > 1:
            picks = self._without_fixed_points(picks, key, n)
        return TensorListCPU(picks.reshape(n))

    def _without_fixed_points(self, picks: np.ndarray, key: np.ndarray, n: int) -> np.ndarray:
        if not self.args["allow_repetitions"]:
            # a random cyclic shift of a random order: no index maps to itself
            order = picks
            shift = 1 + int(rng.uniform(key, 1, stream=1)[0, 0] * (n - 1))
            out = np.empty(n, np.int32)
            out[order] = order[(np.arange(n) + shift) % n]
            return out
        # with repetitions: redraw each fixed point among the other indices
        redraw = np.floor(rng.uniform(key, n, stream=2)[0] * (n - 1)).astype(np.int32)
        redraw += redraw >= np.arange(n)
        return np.where(picks == np.arange(n), redraw, picks).astype(np.int32)


PERMUTE_BATCH = register(OpSchema(
    name="permute_batch", impl=PermuteBatch, devices=("cpu", "gpu"),
    doc="Reorders the samples of the batch: output sample i is input sample `indices[i]` (samples may "
        "repeat). `indices` may be a per-sample input, such as `batch_permutation`'s output.",
    args=(Arg("indices", "ints", REQUIRED, "The input sample of each output sample.", tensor=True),)))

BATCH_PERMUTATION = register(OpSchema(
    name="batch_permutation", impl=BatchPermutation, min_inputs=0, max_inputs=0,
    doc="A random permutation of the batch's sample indices, one int32 scalar per sample, for `permute_batch`.",
    args=(Arg("allow_repetitions", "bool", False, "Draw each index independently (indices may repeat)."),
          Arg("no_fixed_points", "bool", False, "No sample maps to its own index."))))
