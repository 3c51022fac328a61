"""``select``: per sample, the augmentation its index names, by conditional splits of the batch."""

from __future__ import annotations

from typing import Any, Sequence

from jaxdali.ops.graph import DataNode
from jaxdali.pipeline.conditionals import Condition
from jaxdali.pipeline.pipeline import Pipeline


def require_conditionals(call_name: str) -> None:
    """Raises when the pipeline being defined was not made with ``enable_conditionals=True``."""
    pipe = Pipeline.current()
    if pipe is None:
        raise RuntimeError(f"{call_name} must be called inside a pipeline definition (@pipeline_def)")
    if not getattr(pipe, "_conditionals_enabled", False):
        raise RuntimeError(f"{call_name} chooses augmentations per sample with conditionals: define the pipeline "
                           "with @pipeline_def(enable_conditionals=True)")


def select(ops: Sequence[Any], selected_op_idx: DataNode, *op_args: Any, **op_kwargs: Any) -> DataNode:
    """Runs ``ops[selected_op_idx](*op_args, **op_kwargs)`` for each sample.

    ``selected_op_idx`` holds an index in ``[0, len(ops) - 1]`` per sample. The batch is halved by
    index range (``log2(len(ops))`` levels of splits), each op runs on its samples only, and the
    results are merged back in sample order. DataNodes among the arguments are split alike.
    """
    require_conditionals("select")
    if not ops:
        raise ValueError("select: `ops` cannot be empty")
    return _select_range(0, len(ops) - 1, ops, selected_op_idx, op_args, op_kwargs)


def _select_range(lo: int, hi: int, ops: Sequence[Any], idx: DataNode, op_args: tuple, op_kwargs: dict) -> DataNode:
    if lo == hi:
        return ops[lo](*op_args, **op_kwargs)
    mid = (lo + hi) // 2
    condition = Condition(idx <= mid, f"select among {[getattr(op, 'name', op) for op in ops[lo:hi + 1]]}")
    with condition.branch(True):
        low = _select_range(lo, mid, ops, idx, op_args, op_kwargs)
    with condition.branch(False):
        high = _select_range(mid + 1, hi, ops, idx, op_args, op_kwargs)
    return condition.merge_one("<selected augmentation>", low, high)
