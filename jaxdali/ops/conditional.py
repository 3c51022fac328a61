"""The operators behind ``enable_conditionals=True``: split a batch by a per-sample predicate, merge
the two branches' batches back in sample order.

They are hidden (``_conditional.*``); ``jaxdali.pipeline.conditionals`` inserts them when an ``if``
tests a DataNode. Both run on the host and keep each sample's array (no copies) and source info.
"""

from __future__ import annotations

import numpy as np

from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import Arg, OpSchema, register
from jaxdali.tensors import TensorListCPU

__all__ = ["SPLIT", "MERGE", "predicate_mask"]


def predicate_mask(predicate: TensorListCPU, where: str) -> np.ndarray:
    """The per-sample truth values of a batch of scalars (any numeric or boolean type)."""
    samples = predicate.samples()
    bad = next((i for i, s in enumerate(samples) if np.ndim(s) != 0), None)
    if bad is not None:
        raise ValueError(f"{where}: the condition must be a scalar per sample (a 0-dimensional tensor), but sample "
                         f"{bad} has shape {tuple(np.shape(samples[bad]))}; reduce it or index it (e.g. `x[0]`)")
    return np.fromiter((bool(s) for s in samples), bool, len(samples))


def _where(args) -> str:
    return f"the `if` at {args['origin']}" if args["origin"] else "a conditional"


def _rows(source_info: list | None, rows: np.ndarray) -> list | None:
    return None if source_info is None else [source_info[i] for i in rows]


class _Split(Operator):
    def run(self, ctx, inputs, args):
        data, predicate = inputs
        mask = predicate_mask(predicate, _where(args))
        if len(mask) != len(data):
            raise ValueError(f"{_where(args)}: the condition has {len(mask)} samples but the data has {len(data)}")
        samples = data.samples()
        outs = []
        for rows in (np.flatnonzero(mask), np.flatnonzero(~mask)):
            outs.append(TensorListCPU([samples[i] for i in rows], data.layout(), _rows(data.source_info, rows)))
        return outs


class _Merge(Operator):
    def run(self, ctx, inputs, args):
        true_part, false_part, predicate = inputs
        mask = predicate_mask(predicate, _where(args))
        variable = f"variable {args['variable']!r}" if args["variable"] else "the value"
        if (len(true_part), len(false_part)) != (int(mask.sum()), int((~mask).sum())):
            raise ValueError(f"{_where(args)}: {variable} has {len(true_part)} + {len(false_part)} samples from the "
                             f"branches, but the condition selects {int(mask.sum())} + {int((~mask).sum())}")
        if len(true_part) and len(false_part) and true_part.np_dtype != false_part.np_dtype:
            raise TypeError(f"{_where(args)}: {variable} is {true_part.np_dtype} in the `if` branch and "
                            f"{false_part.np_dtype} in the `else` branch; the branches must give the same type "
                            "(use fn.cast in one of them)")
        layouts = {p.layout() for p in (true_part, false_part) if len(p)}
        if len(layouts) > 1:
            raise ValueError(f"{_where(args)}: {variable} has layout {true_part.layout()!r} in the `if` branch and "
                             f"{false_part.layout()!r} in the `else` branch; the branches must agree")
        t, f = true_part.samples(), false_part.samples()
        order = np.cumsum(mask) - 1, np.cumsum(~mask) - 1
        samples = [t[order[0][i]] if m else f[order[1][i]] for i, m in enumerate(mask)]
        infos = (true_part.source_info, false_part.source_info)
        source_info = None if None in infos else [
            infos[0][order[0][i]] if m else infos[1][order[1][i]] for i, m in enumerate(mask)]
        layout = layouts.pop() if layouts else true_part.layout()
        return TensorListCPU(samples, layout, source_info)


_ORIGIN = Arg("origin", "str", "", "Where the `if` is (file:line), for messages.", hint=True)

SPLIT = register(OpSchema(
    name="_conditional.split", impl=_Split, devices=("cpu", "gpu"), min_inputs=2, max_inputs=2, num_outputs=2,
    seeded=False, doc="Splits a batch into the samples whose predicate is true and those whose predicate is false.",
    args=(_ORIGIN,)))

MERGE = register(OpSchema(
    name="_conditional.merge", impl=_Merge, devices=("cpu", "gpu"), min_inputs=3, max_inputs=3, seeded=False,
    doc="Merges the batches of an `if` and its `else` branch back into sample order.",
    args=(_ORIGIN, Arg("variable", "str", "", "The variable being merged, for messages.", hint=True))))
