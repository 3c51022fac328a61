"""Batches of coordinate rows (boxes, points) as one array: every sample's rows stacked, so that
box and point operators run one vectorised NumPy expression per batch, ragged or dense."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from jaxdali.tensors import TensorListCPU

__all__ = ["Rows", "split_rows"]


@dataclasses.dataclass
class Rows:
    """All samples' rows of ``width`` values stacked: ``values`` (total, width), ``sample`` (total,)
    the sample index of each row, and each sample's shape to split the result back."""

    values: np.ndarray
    sample: np.ndarray
    shapes: list[tuple[int, ...]]
    layout: str

    @classmethod
    def of(cls, tl: TensorListCPU, op: str, width: int | None, dtype=np.float32, what: str = "input") -> "Rows":
        """Rows of the batch's last axis; ``width`` None accepts any width that all samples share."""
        dense = tl.dense()
        shapes = [tuple(dense.shape[1:])] * len(dense) if dense is not None else [tuple(s) for s in tl.shape()]
        distinct = set(shapes)
        widths = {s[-1] if s else None for s in distinct}
        if any(len(s) == 0 for s in distinct) or (width is not None and widths != {width}) or len(widths) > 1:
            expected = f"{width} values" if width is not None else "the same number of values in every sample"
            raise ValueError(f"fn.{op}: the {what} must hold rows of {expected} (last axis), got sample shapes "
                             f"{sorted(distinct)}")
        w = widths.pop() if widths else (width or 0)
        if dense is not None:
            values = np.asarray(dense, dtype).reshape(-1, w)
            counts = math.prod(dense.shape[1:-1])  # the same in every sample
        else:
            values = np.concatenate([np.asarray(s, dtype).reshape(-1, w) for s in tl.samples()]) if shapes else \
                np.zeros((0, w), dtype)
            counts = [math.prod(s[:-1]) for s in shapes]
        return cls(values, np.repeat(np.arange(len(shapes)), counts), shapes, tl.layout())

    def per_row(self, per_sample: np.ndarray) -> np.ndarray:
        """A per-sample array (n, ...) repeated for each row (total, ...)."""
        return np.asarray(per_sample)[self.sample]

    def batch(self, values: np.ndarray, width: int | None = None, layout: str | None = None) -> TensorListCPU:
        """Splits (total, width) rows back into samples shaped like the input (last axis ``width``)."""
        w = values.shape[1] if width is None else width
        shapes = [s[:-1] + (w,) for s in self.shapes]
        layout = self.layout if layout is None else layout
        if len(set(shapes)) == 1 and shapes:
            return TensorListCPU(values.reshape((len(shapes),) + shapes[0]), layout)
        parts = split_rows(values, [math.prod(s[:-1]) for s in shapes])
        return TensorListCPU([part.reshape(s) for part, s in zip(parts, shapes)], layout)


def split_rows(values: np.ndarray, counts) -> list[np.ndarray]:
    """``values`` split along axis 0 into consecutive parts of ``counts`` rows (views); 6x faster than
    ``np.split``, which costs several NumPy calls per part."""
    ends = np.cumsum(counts).tolist()
    return [values[start:end] for start, end in zip([0] + ends[:-1], ends)]
