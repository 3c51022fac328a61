"""Per-operator cost cases of the generic operators (run by ``benchmarks/op_cost.py``)."""

from op_cost import types_of

CASES = {
    "cast": lambda fn, images: fn.cast(images, dtype=types_of(fn).FLOAT),
    "transpose": lambda fn, images: fn.transpose(images, perm=[2, 0, 1]),
}
