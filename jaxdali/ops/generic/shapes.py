"""Per-sample shape arguments shared by the generic operators."""

from __future__ import annotations

import numpy as np

from jaxdali.ops.operator import ArgValues
from jaxdali.ops.schema import OpArgumentError


def sample_shapes(op: str, args: ArgValues, n: int, name: str = "shape") -> list[tuple[int, ...]] | None:
    """The ``shape`` argument of every sample (a constant or a per-sample input), or None when unset;
    raises OpArgumentError naming ``op`` for negative extents."""
    if not args.given(name):
        return None
    if args.is_per_sample(name):
        shapes = [tuple(int(v) for v in np.asarray(args.sample_value(name, i)).reshape(-1)) for i in range(n)]
    else:
        shapes = [tuple(args[name])] * n
    for i, shape in enumerate(shapes):
        if any(v < 0 for v in shape):
            raise OpArgumentError(f"fn.{op}: argument '{name}' must not have negative extents, got {list(shape)} "
                                  f"(sample {i})")
    return shapes
