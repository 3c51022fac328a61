"""DataNode features: arithmetic and DALI's type promotion, indexing and slicing (also with per-sample
node bounds), multiple outputs, ``.gpu()``/``.cpu()``, argument inputs, ``types.Constant`` and the
errors raised while a graph is defined.

Expected values marked "DALI 2.4" were produced by running the same graphs through NVIDIA DALI 2.4
(CPU pipelines) and are hard-coded here; the tests do not import DALI.
"""

from __future__ import annotations

import atexit
import io
import os
import re
import shutil
import tempfile

import numpy as np
import pytest

from jaxdali import Pipeline, fn, pipeline_def, types
from jaxdali.ops import graph as node_graph
from jaxdali.ops.schema import OpArgumentError, registry
from jaxdali.tensors import TensorListCPU, TensorListGPU
from tests.run_once import run_once
from tests.audio_clips import chirp, wav_bytes


def run_graph(make, batch_size=2, device_id=None):
    """Runs ``make()`` as a pipeline graph once; returns each output as a list of NumPy samples."""
    return run_once(make, batch_size=batch_size, device_id=device_id, prefetch_queue_depth=1)[0]

def source(*samples, layout=""):
    """An external source returning the same batch of ``samples`` every iteration."""
    return fn.external_source(source=lambda: [np.asarray(s) for s in samples], layout=layout)


# -- type promotion between two nodes -----------------------------------------------------------------

TYPES = ["uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64", "float32", "float64", "bool"]
# DALI 2.4: result type of `a + b` (row: a, column: b, in TYPES order). Also the result of -, *, //, %
# and **, except that two booleans only combine with * (see test_two_booleans_*). float16 is left out:
# DALI's CPU arithmetic does not support it.
ADD_TABLE = """
uint8   uint16  uint32  uint64  int16   int16   int32   int64   float32 float64 uint8
uint16  uint16  uint32  uint64  int32   int32   int32   int64   float32 float64 uint16
uint32  uint32  uint32  uint64  int64   int64   int64   int64   float32 float64 uint32
uint64  uint64  uint64  uint64  int64   int64   int64   int64   float32 float64 uint64
int16   int32   int64   int64   int8    int16   int32   int64   float32 float64 int8
int16   int32   int64   int64   int16   int16   int32   int64   float32 float64 int16
int32   int32   int64   int64   int32   int32   int32   int64   float32 float64 int32
int64   int64   int64   int64   int64   int64   int64   int64   float32 float64 int64
float32 float32 float32 float32 float32 float32 float32 float32 float32 float64 float32
float64 float64 float64 float64 float64 float64 float64 float64 float64 float64 float64
uint8   uint16  uint32  uint64  int8    int16   int32   int64   float32 float64 -
"""


def _sample(dtype):
    return np.array([True]) if dtype == "bool" else np.array([7], dtype)


def _pairs():
    rows = [line.split() for line in ADD_TABLE.strip().splitlines()]
    return [(a, b, rows[i][j]) for i, a in enumerate(TYPES) for j, b in enumerate(TYPES) if rows[i][j] != "-"]


def test_node_node_promotion_matches_dali_table():
    pairs = _pairs()

    def graph():
        return [source(_sample(a)) + source(_sample(b)) for a, b, _ in pairs]

    outs = run_graph(graph, batch_size=1)
    got = [str(o[0].dtype) for o in outs]
    assert got == [expected for _, _, expected in pairs]


@pytest.mark.parametrize("op", ["-", "*", "//", "%", "**"])
def test_other_arithmetic_operators_promote_like_add(op):
    pairs = [p for p in _pairs() if "bool" not in p[:2]]
    func = {"-": lambda a, b: a - b, "*": lambda a, b: a * b, "//": lambda a, b: a // b,
            "%": lambda a, b: a % b, "**": lambda a, b: a ** b}[op]
    outs = run_graph(lambda: [func(source(_sample(a)), source(_sample(b))) for a, b, _ in pairs], batch_size=1)
    assert [str(o[0].dtype) for o in outs] == [expected for _, _, expected in pairs]


def test_true_division_gives_float32_unless_float64_is_involved():
    # DALI 2.4: `/` of any two integer (or boolean) types is float32.
    pairs = [(a, b) for a in TYPES for b in TYPES if not (a == b == "bool")]
    outs = run_graph(lambda: [source(_sample(a)) / source(_sample(b)) for a, b in pairs], batch_size=1)
    expected = ["float64" if "float64" in (a, b) else "float32" for a, b in pairs]
    assert [str(o[0].dtype) for o in outs] == expected


def test_comparisons_give_bool():
    outs = run_graph(lambda: [op(source(np.array([1, 5], np.uint8)), source(np.array([3.0, 3.0], np.float32)))
                              for op in (lambda a, b: a < b, lambda a, b: a <= b, lambda a, b: a > b,
                                         lambda a, b: a >= b, lambda a, b: a == b, lambda a, b: a != b)],
                     batch_size=1)
    assert [o[0].dtype for o in outs] == [np.bool_] * 6
    assert [o[0].tolist() for o in outs] == [[True, False], [True, False], [False, True], [False, True],
                                             [False, False], [True, True]]


def test_bitwise_operators_keep_integer_promotion():
    a = np.array([0b1100, 0b1010], np.uint8)
    b = np.array([0b1010, 0b0110], np.int16)
    outs = run_graph(lambda: (source(a) & source(b), source(a) | source(b), source(a) ^ source(b)), batch_size=1)
    assert [(o[0].dtype, o[0].tolist()) for o in outs] == [
        (np.int16, [0b1000, 0b0010]), (np.int16, [0b1110, 0b1110]), (np.int16, [0b0110, 0b1100])]


# -- constants --------------------------------------------------------------------------------------------

# DALI 2.4: (node type, constant, result type, value of 7 + constant)
CONSTANTS = [
    ("uint8", 1, "int32", 8),                  # a Python int is an int32 constant
    ("uint8", 300, "int32", 307),
    ("uint8", 1.5, "float32", 8.5),            # a Python float is a float32 constant
    ("uint8", True, "uint8", 8),               # a Python bool is a bool constant
    ("uint8", np.uint8(2), "uint8", 9),        # NumPy scalars keep their type
    ("uint8", np.int64(2), "int64", 9),
    ("int8", np.uint8(2), "int16", 9),
    ("uint8", np.float32(2), "float32", 9),
    ("uint32", 1, "int64", 8),
    ("int64", 1, "int64", 8),
    ("float64", 1.5, "float64", 8.5),
    ("float32", 300, "float32", 307),
    ("bool", 1, "int32", 2),
    ("uint8", types.Constant(2, dtype=types.UINT8), "uint8", 9),
    ("int8", types.Constant(2, dtype=types.UINT8), "int16", 9),
    ("uint8", types.Constant(2), "int32", 9),
    ("uint8", types.Constant(2.5), "float32", 9.5),
    ("uint8", types.Constant(2, dtype=types.FLOAT64), "float64", 9),
    ("float32", types.Constant(3, dtype=types.INT64), "float32", 10),
    ("bool", types.Constant(2, dtype=types.UINT8), "uint8", 3),
]


@pytest.mark.parametrize("reflected", [False, True], ids=["node_op_const", "const_op_node"])
def test_constant_operands_promote_like_dali(reflected):
    # A NumPy scalar on the left is left out: there DALI's result depends on NumPy's own operator.
    rows = [r for r in CONSTANTS if not (reflected and isinstance(r[1], np.generic))]

    def graph():
        outs = []
        for dtype, const, _, _ in rows:
            x = source(np.array([True]) if dtype == "bool" else np.array([7], dtype))
            outs.append(const + x if reflected else x + const)
        return outs

    got = [(str(o[0].dtype), o[0].item()) for o in run_graph(graph, batch_size=1)]
    assert got == [(t, v) for _, _, t, v in rows]


def test_constant_lists_broadcast_per_sample():
    # The zoo's bbox arithmetic: per-sample slices plus a per-sample constant vector.
    boxes = [np.array([1, 2, 10, 20], np.float32), np.array([3, 4, 5, 6], np.float32)]

    def graph():
        b = source(*boxes)
        return b[0:2] + b[2:4], b * [1, 2, 3, 4]

    out, scaled = run_graph(graph)
    assert [s.tolist() for s in out] == [[11, 22], [8, 10]]
    assert [s.tolist() for s in scaled] == [[1, 4, 30, 80], [3, 8, 15, 24]]
    assert scaled[0].dtype == np.float32


def test_per_sample_shapes_broadcast_numpy_style():
    img = [np.ones((2, 3, 3), np.float32), np.ones((1, 4, 3), np.float32)]  # ragged batch, 3 channels
    (out,) = run_graph(lambda: source(*img, layout="HWC") * np.array([1, 2, 3], np.float32))
    assert [s.shape for s in out] == [(2, 3, 3), (1, 4, 3)]
    assert out[1][0, 2].tolist() == [1, 2, 3]


def test_arithmetic_keeps_the_layout_of_the_higher_rank_operand():
    @pipeline_def(batch_size=1, num_threads=1, device_id=None, prefetch_queue_depth=1)
    def p():
        img = source(np.zeros((2, 2, 3), np.uint8), layout="HWC")
        return img + source(np.array([1, 2, 3], np.uint8)), source(np.array([1, 2, 3], np.uint8)) - img

    a, b = p().run()
    assert (a.layout(), b.layout()) == ("HWC", "HWC")


def test_constant_outside_a_graph_is_a_typed_scalar():
    c = types.Constant(7)
    assert isinstance(c, types.ScalarConstant) and c.dtype == types.INT32
    assert types.Constant(7.0).dtype == types.FLOAT
    assert types.Constant(7, dtype=types.UINT8).value.dtype == np.uint8
    with pytest.raises(TypeError):
        types.Constant(1) * 2  # no arithmetic between plain scalars, as in DALI


def test_constant_arrays_are_nodes_with_dali_default_types():
    outs = run_graph(lambda: (types.Constant(np.arange(6).reshape(2, 3), dtype=types.UINT8, layout="HW"),
                              types.Constant([1.5, 2]), types.Constant(np.array([1.5, 2])),
                              types.Constant(np.array([1, 2]))))
    # DALI 2.4: float64 arrays become float32 and int64 arrays int32 unless a dtype is given.
    assert [(o[1].dtype, o[1].tolist()) for o in outs] == [
        (np.uint8, [[0, 1, 2], [3, 4, 5]]), (np.float32, [1.5, 2.0]), (np.float32, [1.5, 2.0]), (np.int32, [1, 2])]


def test_scalar_constant_with_shape_is_broadcast():
    (out,) = run_graph(lambda: types.Constant(7, shape=[2, 2]))
    assert out[0].tolist() == [[7, 7], [7, 7]] and out[0].dtype == np.int32  # DALI 2.4


def test_boolean_constant_is_bool():
    assert types.Constant(True).dtype == types.BOOL  # DALI 2.4


# -- values: DALI's C++ semantics ---------------------------------------------------------------------------

A = np.array([-7, 7, -7, 7, 0], np.int32)
B = np.array([2, -2, -2, 2, 3], np.int32)


@pytest.mark.parametrize("device_id,on_device", [(None, False), (0, True)], ids=["host", "device"])
def test_integer_floor_division_truncates_and_modulo_follows_the_dividend(device_id, on_device):
    def graph():
        a = source(A)
        a = a.gpu() if on_device else a
        b = source(B)
        fa = source(A.astype(np.float32))
        fa = fa.gpu() if on_device else fa
        return a // b, a % b, fa // 2, fa % b, a / b

    div, mod, fdiv, fmod, true_div = [o[0] for o in run_graph(graph, batch_size=1, device_id=device_id)]
    # DALI 2.4 (C++ semantics, unlike Python's): -7 // 2 == -3, -7 % 2 == -1, and `//` of floats is `/`.
    assert (div.dtype, div.tolist()) == (np.int32, [-3, -3, 3, 3, 0])
    assert (mod.dtype, mod.tolist()) == (np.int32, [-1, 1, -1, 1, 0])
    assert (fdiv.dtype, fdiv.tolist()) == (np.float32, [-3.5, 3.5, -3.5, 3.5, 0.0])
    assert (fmod.dtype, fmod.tolist()) == (np.float32, [-1.0, 1.0, -1.0, 1.0, 0.0])
    assert (true_div.dtype, true_div.tolist()) == (np.float32, [-3.5, -3.5, 3.5, 3.5, 0.0])


def test_float_division_by_zero_gives_inf_like_dali():
    (out,) = run_graph(lambda: source(np.array([5, -5, 0], np.int32)) / source(np.array([0, 0, 0], np.int32)),
                       batch_size=1)
    assert out[0][:2].tolist() == [np.inf, -np.inf] and np.isnan(out[0][2])


@pytest.mark.parametrize("device_id,on_device", [(None, False), (0, True)], ids=["host", "device"])
def test_negation_keeps_the_type(device_id, on_device):
    def graph():
        nodes = [source(np.array([3, 0, 100], t)) for t in (np.uint8, np.int8, np.float32)]
        return [-(n.gpu() if on_device else n) for n in nodes] + [+nodes[0]]

    outs = [o[0] for o in run_graph(graph, batch_size=1, device_id=device_id)]
    # DALI 2.4: unsigned negation wraps around.
    assert [(o.dtype, o.tolist()) for o in outs] == [
        (np.uint8, [253, 0, 156]), (np.int8, [-3, 0, -100]), (np.float32, [-3.0, -0.0, -100.0]),
        (np.uint8, [3, 0, 100])]


def test_abs_invert_and_shifts_are_implemented_by_the_arithmetic_operators():
    x = np.array([3, 0, 100], np.int8)

    def graph():
        n = source(x)
        flags = source(np.array([True, False]))
        return (node_graph.unary(n, "abs"), node_graph.unary(-n, "abs"), node_graph.unary(n, "invert"),
                node_graph.unary(flags, "invert"), node_graph.binary(n, 2, "lshift"), node_graph.binary(n, 1, "rshift"),
                node_graph.binary(1, source(np.array([3, 0, 4], np.int8)), "lshift"))

    outs = [o[0] for o in run_graph(graph, batch_size=1)]
    # DALI 2.4: abs and ~ keep the type (~ of a bool is logical not); shifts promote like +.
    assert [(o.dtype, o.tolist()) for o in outs] == [
        (np.int8, [3, 0, 100]), (np.int8, [3, 0, 100]), (np.int8, [-4, -1, -101]), (np.bool_, [False, True]),
        (np.int32, [12, 0, 400]), (np.int32, [1, 0, 50]), (np.int32, [8, 1, 16])]


def test_abs_invert_and_shift_operators_on_nodes():
    outs = [o[0] for o in run_graph(lambda: (lambda n: (abs(-n), ~n, n << 2, n >> 1, 1 << n))(
        source(np.array([3, 0, 4], np.int32))), batch_size=1)]
    assert [o.tolist() for o in outs] == [[3, 0, 4], [-4, -1, -5], [12, 0, 16], [1, 0, 2], [8, 1, 16]]


# -- booleans and bitwise type rules ---------------------------------------------------------------------

@pytest.mark.parametrize("op,symbol", [(lambda a, b: a + b, "+"), (lambda a, b: a - b, "-"),
                                       (lambda a, b: a / b, "/"), (lambda a, b: a // b, "//"),
                                       (lambda a, b: a % b, "%"), (lambda a, b: a ** b, "**"),
                                       (lambda a, b: a + True, "+")])
def test_two_booleans_are_rejected_by_arithmetic(op, symbol):
    with pytest.raises(TypeError, match=re.escape(f"arithmetic operator `{symbol}` cannot take booleans as both")):
        run_graph(lambda: op(source(np.array([True, False])), source(np.array([True, True]))), batch_size=1)


def test_two_booleans_combine_with_multiplication_bitwise_and_comparison():
    t, f = np.array([True, False]), np.array([True, True])
    outs = [o[0] for o in run_graph(lambda: (lambda a, b: (a * b, a & b, a | b, a ^ b, a == b))(source(t), source(f)),
                                    batch_size=1)]
    assert [(o.dtype, o.tolist()) for o in outs] == [
        (np.bool_, [True, False]), (np.bool_, [True, False]), (np.bool_, [True, True]), (np.bool_, [False, True]),
        (np.bool_, [True, False])]


@pytest.mark.parametrize("make,message", [
    (lambda: -source(np.array([True])), "arithmetic operator `-` cannot take booleans as the input"),
    (lambda: node_graph.unary(source(np.array([True])), "abs"), "operator `abs` cannot take booleans"),
    (lambda: source(np.array([1.5], np.float32)) & 1, r"bitwise operator `&` must be integers or booleans, "
                                                      r"got float32 and int32"),
    (lambda: node_graph.unary(source(np.array([1.5], np.float32)), "invert"), "bitwise operator `~`"),
])
def test_type_rule_errors_name_the_operator(make, message):
    with pytest.raises(TypeError, match=message) as info:
        run_graph(make, batch_size=1)
    assert any("fn._arithmetic" in note for note in getattr(info.value, "__notes__", []))


def test_objects_that_are_not_numbers_are_rejected():
    for bad in ("abc", None, object()):
        with pytest.raises(TypeError, match=f"cannot use {re.escape(repr(bad))} in pipeline arithmetic"):
            run_graph(lambda: source(np.zeros(1)) + bad)


# -- indexing and slicing --------------------------------------------------------------------------------

X = [np.arange(20, dtype=np.int32).reshape(4, 5), np.arange(100, 112, dtype=np.int32).reshape(3, 4)]

# DALI 2.4, on the ragged HW batch X: (subscript, output layout, sample 0, sample 1)
SUBSCRIPTS = [
    (lambda a: a[1:3], "HW", [[5, 6, 7, 8, 9], [10, 11, 12, 13, 14]], [[104, 105, 106, 107], [108, 109, 110, 111]]),
    (lambda a: a[0:10], "HW", X[0].tolist(), X[1].tolist()),                    # stop clamps to the extent
    (lambda a: a[-10:2], "HW", X[0][:2].tolist(), X[1][:2].tolist()),            # start clamps too
    (lambda a: a[-2:], "HW", X[0][2:].tolist(), X[1][1:].tolist()),
    (lambda a: a[:, -1], "H", [4, 9, 14, 19], [103, 107, 111]),                  # an index drops the axis
    (lambda a: a[-1], "W", [15, 16, 17, 18, 19], [108, 109, 110, 111]),
    (lambda a: a[1, 2], "", 7, 106),                                            # per-sample scalars
    (lambda a: a[np.int64(1)], "W", [5, 6, 7, 8, 9], [104, 105, 106, 107]),
    (lambda a: a[::2], "HW", X[0][::2].tolist(), X[1][::2].tolist()),
    (lambda a: a[::-1], "HW", X[0][::-1].tolist(), X[1][::-1].tolist()),
    (lambda a: a[3:1], "HW", [], []),                                            # empty, not an error
    (lambda a: a[1:3][0], "W", [5, 6, 7, 8, 9], [104, 105, 106, 107]),           # chained
]


@pytest.mark.parametrize("index,layout,first,second", SUBSCRIPTS)
def test_constant_subscripts_match_dali(index, layout, first, second):
    @pipeline_def(batch_size=2, num_threads=1, device_id=None, prefetch_queue_depth=1)
    def p():
        return index(source(*X, layout="HW"))

    (out,) = p().run()
    assert out.layout() == layout
    assert [out.at(0).tolist(), out.at(1).tolist()] == [first, second]
    assert out.dtype == types.INT32


S = [np.array([1, 0], np.int32), np.array([-2, 2], np.int32)]
E = [np.array([3, 2], np.int32), np.array([10, 4], np.int32)]
I = [np.array(2, np.int64), np.array(-1, np.int64)]

# DALI 2.4: bounds taken per sample from other nodes (start S, end E, index I).
NODE_SUBSCRIPTS = [
    (lambda a, s, e, i: a[s[1]:e[1], s[0]:e[0]], [[1, 2], [6, 7]], [[110, 111]]),   # the zoo example
    (lambda a, s, e, i: a[i], [10, 11, 12, 13, 14], [108, 109, 110, 111]),
    (lambda a, s, e, i: a[:, i], [2, 7, 12, 17], [103, 107, 111]),
    (lambda a, s, e, i: a[s[0]:, 1], [6, 11, 16], [105, 109]),
    (lambda a, s, e, i: a[s[0]:e[0]], X[0][1:3].tolist(), X[1][-2:].tolist()),      # negative start, clamped stop
    (lambda a, s, e, i: s[0], 1, -2),                                                # element -> per-sample scalar
]


@pytest.mark.parametrize("device_id,on_device", [(None, False), (0, True)], ids=["host", "device"])
@pytest.mark.parametrize("index,first,second", NODE_SUBSCRIPTS)
def test_node_bounds_are_per_sample(index, first, second, device_id, on_device):
    def graph():
        a = source(*X, layout="HW")
        return index(a.gpu() if on_device else a, source(*S), source(*E), source(*I))

    (out,) = run_graph(graph, device_id=device_id)
    assert [out[0].tolist(), out[1].tolist()] == [first, second]


def test_gpu_image_sliced_with_cpu_bounds_stays_on_the_device():
    @pipeline_def(batch_size=2, num_threads=1, device_id=0, prefetch_queue_depth=1)
    def p():
        a = source(*X, layout="HW").gpu()
        start, end = source(*S), source(*E)
        return a[start[1]:end[1], start[0]:end[0]]

    (out,) = p().run()
    assert isinstance(out, TensorListGPU) and out.layout() == "HW"
    assert [s.tolist() for s in out.as_cpu().samples()] == [[[1, 2], [6, 7]], [[110, 111]]]


def test_index_out_of_range_names_axis_extent_and_sample():
    # DALI 2.4 fails with "Index 3 is out of range for axis 0 of length 3" on the second sample only.
    for index, message in [(5, r"index 5 out of range for axis 0 of extent 4 in sample 0"),
                           (3, r"index 3 out of range for axis 0 of extent 3 in sample 1"),
                           (-5, r"index -5 out of range for axis 0 of extent 4 in sample 0")]:
        with pytest.raises(IndexError, match=message):
            run_graph(lambda: source(*X)[index])


def test_node_index_out_of_range_is_an_error():
    with pytest.raises(IndexError, match="index 3 out of range for axis 0 of extent 3 in sample 1"):
        run_graph(lambda: source(*X)[source(np.array(0, np.int32), np.array(3, np.int32))])


def test_too_many_indices_is_an_error():
    with pytest.raises(IndexError, match=r"3 indices for a sample of shape \(4, 5\)"):
        run_graph(lambda: source(*X)[1, 2, 3])


@pytest.mark.parametrize("index,error,message", [
    (Ellipsis, IndexError, "`...` and `None` are not supported"),
    (None, IndexError, "`...` and `None` are not supported"),
    (1.5, OpArgumentError, "subscript bounds must be integers or DataNodes, got 1.5"),
    (slice(0, "2"), OpArgumentError, "got '2'"),
    (tuple(range(9)), IndexError, "at most 8 indices are supported, got 9"),
])
def test_unsupported_subscripts_are_rejected_at_definition(index, error, message):
    with Pipeline(batch_size=1, num_threads=1, device_id=None):
        x = fn.external_source(source=lambda: [np.zeros((2, 2))])
        with pytest.raises(error, match=message):
            x[index]


# -- multiple outputs, devices, node protocol ----------------------------------------------------------------

def test_multiple_outputs_are_separate_nodes():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None, prefetch_queue_depth=1)
    def p():
        outs = fn.external_source(source=lambda: (np.zeros((2, 1), np.uint8), np.ones((2, 3), np.float32)),
                                  num_outputs=2, name="pair")
        assert isinstance(outs, list) and len(outs) == 2
        a, b = outs
        assert a.source is b.source and (a.index, b.index) == (0, 1)
        assert (a.name, b.name) == ("pair[0]", "pair[1]")
        return b, a

    b, a = p().run()
    assert (a.dtype, a.shape()) == (types.UINT8, [(1,), (1,)])
    assert (b.dtype, b.shape()) == (types.FLOAT, [(3,), (3,)])


def test_single_node_cannot_be_unpacked_or_tested_for_truth():
    with Pipeline(batch_size=1, num_threads=1, device_id=None):
        x = fn.random.uniform()
        with pytest.raises(TypeError, match="is not iterable; index it per sample"):
            a, b = x
        with pytest.raises(TypeError, match="no truth value"):
            if x:
                pass


def test_gpu_and_cpu_transfers():
    with Pipeline(batch_size=1, num_threads=1, device_id=0):
        x = fn.random.uniform()
        g = x.gpu()
        assert (x.device, g.device) == ("cpu", "gpu")
        assert g.gpu() is g and x.cpu() is x
        back = g.cpu()
        assert back.device == "cpu" and back is not x

    @pipeline_def(batch_size=3, num_threads=1, device_id=0, prefetch_queue_depth=1)
    def p():
        x = source(np.arange(4, dtype=np.int16), np.arange(4, dtype=np.int16) + 10, np.zeros(4, np.int16),
                   layout="W")
        g = x.gpu()
        return x, g, (g * 2).cpu(), g.cpu() + 1

    x, g, doubled, plus = p().run()
    assert isinstance(x, TensorListCPU) and isinstance(g, TensorListGPU)
    assert isinstance(doubled, TensorListCPU) and isinstance(plus, TensorListCPU)
    np.testing.assert_array_equal(g.as_cpu().as_array(), x.as_array())
    np.testing.assert_array_equal(doubled.as_array(), x.as_array() * 2)
    np.testing.assert_array_equal(plus.as_array(), x.as_array() + 1)
    assert g.layout() == "W" and doubled.layout() == "W"


def test_constant_next_to_a_gpu_node_is_placed_on_the_gpu():
    with Pipeline(batch_size=1, num_threads=1, device_id=0):
        y = fn.random.uniform().gpu() + 1
        assert y.device == "gpu" and all(n.device == "gpu" for n in y.source.inputs)


# -- argument inputs ---------------------------------------------------------------------------------------------

# DALI 2.4: the arguments (among those jaxdali declares) that accept a DataNode, by operator.
DALI_ARGUMENT_INPUTS = {
    "random.coin_flip": {"probability", "shape"},
    "random.uniform": {"range", "values", "shape"},
    "random.normal": {"mean", "stddev", "shape"},
    "random.choice": {"p", "shape"},
    "crop": {"crop", "crop_h", "crop_w", "crop_d", "crop_pos_x", "crop_pos_y", "crop_pos_z"},
    "flip": {"horizontal", "vertical", "depthwise"},
    "transpose": set(),
    "reshape": {"shape", "rel_shape"},
    "crop_mirror_normalize": {"crop", "crop_h", "crop_w", "crop_d", "crop_pos_x", "crop_pos_y", "crop_pos_z",
                              "mirror", "mean", "std"},
    "cast": set(),
    "one_hot": set(),
    "normalize": {"mean", "stddev"},
    "brightness_contrast": {"brightness", "brightness_shift", "contrast", "contrast_center"},
    "hsv": {"hue", "saturation", "value"},
    "color_twist": {"brightness", "contrast", "hue", "saturation"},
    "brightness": {"brightness", "brightness_shift"},
    "contrast": {"contrast", "contrast_center"},
    "hue": {"hue"},
    "saturation": {"saturation"},
    "color_space_conversion": set(),
    "gaussian_blur": {"sigma", "window_size"},
    "noise.gaussian": {"mean", "stddev"},
    "noise.shot": {"factor"},
    "noise.salt_and_pepper": {"prob", "salt_vs_pepper", "salt_val", "pepper_val"},
    "erase": {"anchor", "shape", "fill_value"},
    "grid_mask": {"tile", "ratio", "angle", "shift_x", "shift_y"},
    "equalize": set(),
    "experimental.equalize": set(),
    "jpeg_compression_distortion": {"quality"},
    "experimental.warp_perspective": {"matrix", "size"},
    "laplacian": {"window_size", "smoothing_size", "scale"},
    "filter": {"anchor"},
    "debayer": {"blue_position"},
    "clahe": set(),
    "paste": {"ratio", "paste_x", "paste_y"},
    "water": {"mask"},
    "jitter": {"mask"},
    "experimental.median_blur": {"window_size"},
    "experimental.dilate": {"mask_size", "anchor"},
    "experimental.erode": {"mask_size", "anchor"},
    "experimental.remap": set(),
    "sphere": {"mask"},
    "multi_paste": {"in_ids", "output_size", "in_anchors", "in_anchors_rel", "shapes", "shapes_rel", "out_anchors",
                    "out_anchors_rel"},
    "experimental.debayer": {"blue_position"},
    "experimental.filter": {"anchor"},
    "resize": {"resize_x", "resize_y", "resize_z", "size", "resize_shorter", "resize_longer", "roi_start",
               "roi_end", "interp_type", "min_filter", "mag_filter"},
    "random_resized_crop": {"interp_type", "min_filter", "mag_filter"},
    "experimental.resize": {"resize_x", "resize_y", "resize_z", "size", "resize_shorter", "resize_longer", "roi_start",
                            "roi_end", "interp_type", "min_filter", "mag_filter"},
    "resize_crop_mirror": {"resize_x", "resize_y", "resize_z", "size", "resize_shorter", "resize_longer", "roi_start",
                           "roi_end", "interp_type", "min_filter", "mag_filter", "crop", "crop_h", "crop_w", "crop_d",
                           "crop_pos_x", "crop_pos_y", "crop_pos_z", "mirror"},
    "tensor_resize": {"sizes", "scales", "alignment", "roi_start", "roi_end", "interp_type", "min_filter", "mag_filter"},
    "fast_resize_crop_mirror": {"resize_x", "resize_y", "resize_z", "size", "resize_shorter", "resize_longer",
                                "roi_start", "roi_end", "interp_type", "min_filter", "mag_filter", "crop", "crop_h",
                                "crop_w", "crop_d", "crop_pos_x", "crop_pos_y", "crop_pos_z", "mirror"},
    "warp_affine": {"matrix", "size"},
    "rotate": {"angle", "size"},
    "readers.file": set(),
    "readers.numpy": {"roi_start", "rel_roi_start", "roi_end", "rel_roi_end", "roi_shape", "rel_roi_shape"},
    "readers.tfrecord": set(),
    "readers.webdataset": set(),
    "readers.caffe": set(),
    "readers.caffe2": set(),
    "readers.coco": set(),
    "readers.array_record": set(),
    "readers.mxnet": set(),
    "readers.sequence": set(),
    "readers.nemo_asr": set(),
    "decoders.numpy": set(),
    "decoders.inflate": {"shape", "chunk_offsets", "chunk_sizes"},
    "decoders.image": set(),
    "decoders.image_random_crop": set(),
    "image_decoder": set(),
    "image_decoder_random_crop": set(),
    "experimental.decoders.image": set(),
    "experimental.decoders.image_random_crop": set(),
    "external_source": set(),
    "readers.video": set(),
    # DALI also takes the resize arguments per sample; jaxdali takes them as constants only.
    "readers.video_resize": set(),
    "experimental.readers.video": set(),
    # DALI also takes pad_mode per sample; jaxdali takes it as a constant only.
    "decoders.video": {"frames", "start_frame", "end_frame", "stride", "sequence_length"},
    "experimental.decoders.video": {"frames", "start_frame", "end_frame", "stride", "sequence_length"},
    # generic operators
    "constant": set(),
    "full": {"shape"},
    "zeros": {"shape"},
    "ones": {"shape"},
    "full_like": set(),
    "zeros_like": set(),
    "ones_like": set(),
    "cast_like": set(),
    "copy": set(),
    "cat": set(),
    "stack": set(),
    "squeeze": {"axes"},
    "expand_dims": set(),
    **{f"reductions.{kind}": set() for kind in ("sum", "mean", "mean_square", "rms", "min", "max", "variance",
                                                  "std_dev")},
    "shapes": set(),
    "get_property": set(),
    "reinterpret": {"shape", "rel_shape", "src_dims"},
    "lookup_table": set(),
    "element_extract": set(),
    "sequence_rearrange": {"new_order"},
    "per_frame": set(),
    "permute_batch": {"indices"},
    "batch_permutation": set(),
    "random.beta": {"alpha", "beta", "shape"},
    "pad": {"fill_value", "axes", "shape", "align"},
    "io.file.read": set(),
    # DALI also takes crop_d and crop_pos_z, which mean nothing for images; jaxdali refuses them.
    **{op: {"crop", "crop_h", "crop_w", "crop_pos_x", "crop_pos_y"} for op in ("decoders.image_crop",
                                                                          "image_decoder_crop",
                                                                          "experimental.decoders.image_crop")},
    **{op: {"start", "rel_start", "end", "rel_end", "shape", "rel_shape", "axes"}
       for op in ("decoders.image_slice", "image_decoder_slice", "experimental.decoders.image_slice")},
    "python_function": set(),
    "dl_tensor_python_function": set(),
    "dump_image": set(),
    "experimental.readers.fits": set(),
    "experimental.inputs.video": set(),
    "peek_image_shape": set(),
    "slice": {"start", "rel_start", "end", "rel_end", "shape", "rel_shape", "axes"},
    "transforms.translation": {"offset"},
    "transforms.scale": {"scale", "center"},
    "transforms.rotation": {"angle", "axis", "center"},
    "transforms.shear": {"shear", "angles", "center"},
    "transforms.crop": {"from_start", "from_end", "to_start", "to_end"},
    "transforms.combine": set(),
    "coord_transform": {"M", "T", "MT"},
    "coord_flip": {"flip_x", "flip_y", "flip_z", "center_x", "center_y", "center_z"},
    "bb_flip": {"horizontal", "vertical"},
    "bbox_paste": {"ratio", "paste_x", "paste_y"},
    "bbox_rotate": {"angle", "input_shape", "size"},
    "box_encoder": set(),
    "random_bbox_crop": {"crop_shape", "input_shape"},
    "roi_random_crop": {"crop_shape", "roi_start", "roi_end", "roi_shape", "in_shape"},
    "random_crop_generator": set(),
    "ssd_random_crop": set(),
    "segmentation.select_masks": set(),
    "segmentation.random_mask_pixel": {"foreground", "threshold", "value"},
    "segmentation.random_object_bbox": {"background", "classes", "class_weights", "foreground_prob", "threshold"},
    "decoders.audio": {"sample_rate"},
    "audio_decoder": {"sample_rate"},
    "audio_resample": {"in_rate", "out_rate", "scale", "out_length"},
    "preemphasis_filter": {"preemph_coeff"},
    "power_spectrum": set(),
    "spectrogram": set(),
    "mel_filter_bank": set(),
    "to_decibels": set(),
    "mfcc": set(),
    "nonsilent_region": set(),
}


def test_argument_input_table_covers_every_operator():
    public = {name for name in registry() if not name.startswith("_")}
    assert public == set(DALI_ARGUMENT_INPUTS)


@pytest.mark.parametrize("op", sorted(DALI_ARGUMENT_INPUTS))
def test_schema_accepts_nodes_exactly_where_dali_does(op):
    schema = registry()[op]
    assert {a.name for a in schema.all_args if a.tensor} == DALI_ARGUMENT_INPUTS[op]


rng = np.random.default_rng(0)
IMG = rng.integers(0, 256, (6, 8, 3), dtype=np.uint8)
VOL = rng.integers(0, 256, (4, 6, 8, 3), dtype=np.uint8)
F32 = np.float32
I32 = np.int32


class TwoSamples(tuple):
    """The two different samples of one input (a plain tuple lists several inputs)."""


def _npy_file() -> str:
    """A 4x6 .npy file for the reader's ROI arguments (the case table is built at import), removed
    when the test process exits."""
    folder = tempfile.mkdtemp(prefix="jaxdali-test-graph-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    path = os.path.join(folder, "roi.npy")
    np.save(path, np.arange(24, dtype=np.float32).reshape(4, 6))
    return path


NPY = {"files": [_npy_file()]}


def _lz4_chunks() -> tuple[np.ndarray, int]:
    """Two LZ4 blocks of 12 different bytes each, packed in one sample, and the first block's size."""
    import lz4.block

    blocks = [lz4.block.compress(bytes(range(k, k + 12)), store_size=False) for k in (0, 50)]
    return np.frombuffer(b"".join(blocks), np.uint8), len(blocks[0])


LZ4_CHUNKS, LZ4_FIRST = _lz4_chunks()
BOXES = rng.uniform(0, 1, (3, 4)).astype(np.float32)
MASK = np.zeros((6, 8), np.int32)
MASK[1:3, 2:4], MASK[4, 6] = 2, 5
LTRB = np.array([[0.1, 0.2, 0.6, 0.7], [0.3, 0.3, 0.8, 0.9]], np.float32)
NN, LINEAR = int(types.INTERP_NN), int(types.INTERP_LINEAR)


def _png() -> np.ndarray:
    """An encoded 6x8 PNG of distinct pixels, for the window decoders' arguments."""
    import cv2

    return np.frombuffer(cv2.imencode(".png", IMG)[1].tobytes(), np.uint8)


def _tiny_video() -> np.ndarray:
    """A 12-frame 16x16 VP9 video whose frames differ, as encoded bytes."""
    import av

    buffer = io.BytesIO()
    with av.open(buffer, "w", format="webm") as out:
        stream = out.add_stream("libvpx-vp9", rate=25)
        stream.width = stream.height = 16
        for i in range(12):
            frame = av.VideoFrame.from_ndarray(np.full((16, 16, 3), 20 * i, np.uint8), format="rgb24")
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return np.frombuffer(buffer.getvalue(), np.uint8)


WAV = wav_bytes(chirp(400), 16000)
SIGNAL = chirp(40)


# (operator, input batch or None, layout, fixed arguments, argument, value, another value, dtype of the node)
ARGUMENT_INPUT_CASES = [
    ("random.coin_flip", None, "", {"shape": [64]}, "probability", 0.25, 0.75, F32),
    ("random.coin_flip", None, "", {}, "shape", [3], [2], I32),
    ("random.uniform", None, "", {"shape": [4]}, "range", [2, 5], [-5, -2], F32),
    ("random.uniform", None, "", {"shape": [8]}, "values", [1, 2, 3], [4, 5, 6], F32),
    ("random.uniform", None, "", {}, "shape", [2, 3], [3], I32),
    ("random.normal", None, "", {"shape": [4]}, "mean", 3.0, -3.0, F32),
    ("random.normal", None, "", {"shape": [4]}, "stddev", 0.5, 4.0, F32),
    ("random.normal", None, "", {}, "shape", [5], [2], I32),
    ("random.choice", [10, 20], "", {"shape": [8]}, "p", [0.2, 0.8], [0.8, 0.2], F32),
    ("random.choice", [10, 20], "", {}, "shape", [3], [2], I32),
    ("crop", IMG, "HWC", {}, "crop", [4, 4], [3, 5], F32),
    ("crop", IMG, "HWC", {"crop_w": 4}, "crop_h", 3, 4, F32),
    ("crop", IMG, "HWC", {"crop_h": 4}, "crop_w", 3, 4, F32),
    ("crop", VOL, "DHWC", {"crop_h": 4, "crop_w": 4}, "crop_d", 2, 3, F32),
    ("crop", IMG, "HWC", {"crop": [3, 3]}, "crop_pos_x", 0.0, 1.0, F32),
    ("crop", IMG, "HWC", {"crop": [3, 3]}, "crop_pos_y", 1.0, 0.0, F32),
    ("crop", VOL, "DHWC", {"crop": [2, 3, 3]}, "crop_pos_z", 1.0, 0.0, F32),
    ("flip", IMG, "HWC", {}, "horizontal", 0, 1, I32),
    ("flip", IMG, "HWC", {}, "vertical", 1, 0, I32),
    ("flip", VOL, "DHWC", {}, "depthwise", 1, 0, I32),
    ("reshape", IMG, "HWC", {}, "shape", [8, 6, 3], [3, 16, 3], I32),
    ("reshape", IMG, "HWC", {}, "rel_shape", [0.5, 2, 1], [2, 0.5, 1], F32),
    ("crop_mirror_normalize", IMG, "HWC", {}, "crop", [4, 4], [3, 5], F32),
    ("crop_mirror_normalize", IMG, "HWC", {"crop_w": 4}, "crop_h", 3, 4, F32),
    ("crop_mirror_normalize", IMG, "HWC", {"crop_h": 4}, "crop_w", 3, 4, F32),
    ("crop_mirror_normalize", IMG, "HWC", {"crop": [3, 3]}, "crop_pos_x", 0.0, 1.0, F32),
    ("crop_mirror_normalize", IMG, "HWC", {"crop": [3, 3]}, "crop_pos_y", 1.0, 0.0, F32),
    ("crop_mirror_normalize", VOL, "DHWC", {"crop_h": 4, "crop_w": 4, "output_layout": "CDHW"}, "crop_d", 2, 3,
     F32),
    ("crop_mirror_normalize", VOL, "DHWC", {"crop": [2, 3, 3], "output_layout": "CDHW"}, "crop_pos_z", 1.0, 0.0,
     F32),
    ("crop_mirror_normalize", IMG, "HWC", {}, "mirror", 1, 0, I32),
    ("crop_mirror_normalize", IMG, "HWC", {}, "mean", [10, 20, 30], [0, 0, 0], F32),
    ("crop_mirror_normalize", IMG, "HWC", {}, "std", [2, 3, 4], [1, 1, 1], F32),
    ("normalize", IMG.astype(F32), "HWC", {}, "mean", 5.0, 0.0, F32),
    ("normalize", IMG.astype(F32), "HWC", {}, "stddev", 2.0, 1.0, F32),
    ("brightness_contrast", IMG, "HWC", {}, "brightness", 1.5, 1.0, F32),
    ("brightness_contrast", IMG, "HWC", {}, "brightness_shift", 0.1, 0.0, F32),
    ("brightness_contrast", IMG, "HWC", {}, "contrast", 0.5, 1.0, F32),
    ("brightness_contrast", IMG, "HWC", {"contrast": 2.0}, "contrast_center", 100.0, 0.0, F32),
    ("hsv", IMG, "HWC", {}, "hue", 30.0, 0.0, F32),
    ("hsv", IMG, "HWC", {}, "saturation", 0.5, 1.0, F32),
    ("hsv", IMG, "HWC", {}, "value", 0.8, 1.0, F32),
    ("color_twist", IMG, "HWC", {}, "brightness", 1.5, 1.0, F32),
    ("color_twist", IMG, "HWC", {}, "contrast", 0.5, 1.0, F32),
    ("color_twist", IMG, "HWC", {}, "hue", 30.0, 0.0, F32),
    ("color_twist", IMG, "HWC", {}, "saturation", 0.5, 1.0, F32),
    ("brightness", IMG, "HWC", {}, "brightness", 1.5, 1.0, F32),
    ("brightness", IMG, "HWC", {}, "brightness_shift", 0.1, 0.0, F32),
    ("contrast", IMG, "HWC", {}, "contrast", 0.5, 1.0, F32),
    ("contrast", IMG, "HWC", {"contrast": 2.0}, "contrast_center", 100.0, 0.0, F32),
    ("hue", IMG, "HWC", {}, "hue", 30.0, 0.0, F32),
    ("saturation", IMG, "HWC", {}, "saturation", 0.5, 1.0, F32),
    ("gaussian_blur", IMG, "HWC", {}, "sigma", [1.5], [0.5], F32),
    ("gaussian_blur", IMG, "HWC", {}, "window_size", [5], [3], I32),
    ("noise.gaussian", IMG, "HWC", {"seed": 5}, "mean", 5.0, 0.0, F32),
    ("noise.gaussian", IMG, "HWC", {"seed": 5}, "stddev", 2.0, 9.0, F32),
    ("noise.shot", IMG, "HWC", {"seed": 5}, "factor", 2.0, 0.0, F32),
    ("noise.salt_and_pepper", IMG, "HWC", {"seed": 5}, "prob", 0.5, 0.0, F32),
    ("noise.salt_and_pepper", IMG, "HWC", {"seed": 5, "prob": 0.5}, "salt_vs_pepper", 0.2, 0.9, F32),
    ("noise.salt_and_pepper", IMG, "HWC", {"seed": 5, "prob": 0.5}, "salt_val", 200.0, 255.0, F32),
    ("noise.salt_and_pepper", IMG, "HWC", {"seed": 5, "prob": 0.5}, "pepper_val", 20.0, 0.0, F32),
    ("erase", IMG, "HWC", {"shape": [2, 3]}, "anchor", [1, 2], [3, 3], F32),
    ("erase", IMG, "HWC", {}, "shape", [2, 3], [4, 1], F32),
    ("erase", IMG, "HWC", {"shape": [2, 3]}, "fill_value", [7], [9], F32),
    ("grid_mask", IMG, "HWC", {}, "tile", 2, 4, I32),
    ("grid_mask", IMG, "HWC", {"tile": 4}, "ratio", 0.5, 0.25, F32),
    ("grid_mask", IMG, "HWC", {"tile": 4}, "angle", 0.5, 0.0, F32),
    ("grid_mask", IMG, "HWC", {"tile": 4}, "shift_x", 1.0, 0.0, F32),
    ("grid_mask", IMG, "HWC", {"tile": 4}, "shift_y", 1.0, 0.0, F32),
    ("jpeg_compression_distortion", IMG, "HWC", {}, "quality", 10, 90, I32),
    ("experimental.warp_perspective", IMG, "HWC", {}, "matrix", [1, 0.2, 1, 0, 1, 0.5, 0, 0.01, 1],
     [1, 0, 0, 0, 1, 0, 0, 0, 1], F32),
    ("experimental.warp_perspective", IMG, "HWC", {"matrix": [1, 0, 1, 0, 1, 0, 0, 0, 1]}, "size", [5, 5], [4, 6],
     F32),
    ("laplacian", IMG, "HWC", {"dtype": types.FLOAT}, "window_size", [5], [3], I32),
    ("laplacian", IMG, "HWC", {"dtype": types.FLOAT}, "smoothing_size", [1], [3], I32),
    ("laplacian", IMG, "HWC", {"dtype": types.FLOAT}, "scale", [0.5], [1.0], F32),
    ("debayer", IMG[..., :1], "HWC", {}, "blue_position", [0, 1], [1, 1], I32),
    ("experimental.debayer", IMG[..., :1], "HWC", {}, "blue_position", [1, 0], [0, 0], I32),
    ("paste", IMG, "HWC", {"fill_value": 0}, "ratio", 2.0, 1.5, F32),
    ("paste", IMG, "HWC", {"fill_value": 0, "ratio": 2.0}, "paste_x", 0.0, 1.0, F32),
    ("paste", IMG, "HWC", {"fill_value": 0, "ratio": 2.0}, "paste_y", 1.0, 0.0, F32),
    ("water", IMG, "HWC", {"ampl_x": 2.0}, "mask", 1, 0, I32),
    ("jitter", IMG, "HWC", {"seed": 5}, "mask", 1, 0, I32),
    ("experimental.median_blur", IMG, "HWC", {}, "window_size", [3, 5], [3, 3], I32),
    ("experimental.dilate", IMG, "HWC", {}, "mask_size", [3, 5], [3, 3], I32),
    ("experimental.dilate", IMG, "HWC", {}, "anchor", [0, 0], [1, 1], I32),
    ("experimental.erode", IMG, "HWC", {}, "mask_size", [5, 1], [3, 3], I32),
    ("experimental.erode", IMG, "HWC", {}, "anchor", [2, 2], [1, 1], I32),
    ("sphere", IMG, "HWC", {}, "mask", 1, 0, I32),
    ("multi_paste", IMG, "HWC", {"output_size": [6, 8]}, "in_ids", [0], [], I32),
    ("multi_paste", IMG, "HWC", {"shapes": [2, 3]}, "output_size", [6, 8], [4, 5], I32),
    ("multi_paste", IMG, "HWC", {"shapes": [2, 3]}, "in_anchors", [1, 1], [0, 0], I32),
    ("multi_paste", IMG, "HWC", {"shapes": [2, 3]}, "in_anchors_rel", [0.5, 0.5], [0.0, 0.0], F32),
    ("multi_paste", IMG, "HWC", {}, "shapes", [2, 3], [4, 4], I32),
    ("multi_paste", IMG, "HWC", {}, "shapes_rel", [0.5, 0.5], [1.0, 1.0], F32),
    ("multi_paste", IMG, "HWC", {"shapes": [2, 3]}, "out_anchors", [1, 1], [0, 0], I32),
    ("multi_paste", IMG, "HWC", {"shapes": [2, 3]}, "out_anchors_rel", [0.5, 0.5], [0.0, 0.0], F32),
    ("filter", (IMG, np.arange(9, dtype=F32).reshape(3, 3) / 36), "HWC", {}, "anchor", [0, 0], [1, 1], I32),
    ("experimental.filter", (IMG, np.arange(9, dtype=F32).reshape(3, 3) / 36), "HWC", {}, "anchor", [0, 0], [2, 1], I32),
    ("resize", IMG, "HWC", {}, "resize_x", 4.0, 6.0, F32),
    ("resize", IMG, "HWC", {}, "resize_y", 3.0, 5.0, F32),
    ("resize", VOL, "DHWC", {"resize_x": 4, "resize_y": 3}, "resize_z", 2.0, 3.0, F32),
    ("resize", IMG, "HWC", {}, "size", [3, 4], [5, 3], F32),
    ("resize", IMG, "HWC", {}, "resize_shorter", 4.0, 3.0, F32),
    ("resize", IMG, "HWC", {}, "resize_longer", 4.0, 6.0, F32),
    ("resize", IMG, "HWC", {"size": [4, 4], "roi_end": [5, 7]}, "roi_start", [1, 1], [0, 0], F32),
    ("resize", IMG, "HWC", {"size": [4, 4], "roi_start": [1, 1]}, "roi_end", [5, 7], [6, 8], F32),
    ("resize", IMG, "HWC", {"size": [4, 5]}, "interp_type", NN, LINEAR, I32),
    ("resize", IMG, "HWC", {"size": [3, 4]}, "min_filter", NN, LINEAR, I32),
    ("resize", IMG, "HWC", {"size": [9, 12]}, "mag_filter", NN, LINEAR, I32),
    ("random_resized_crop", IMG, "HWC", {"size": [4, 4]}, "interp_type", NN, LINEAR, I32),
    ("random_resized_crop", IMG, "HWC", {"size": [3, 3]}, "min_filter", NN, LINEAR, I32),
    ("random_resized_crop", IMG, "HWC", {"size": [9, 9]}, "mag_filter", NN, LINEAR, I32),
    ("warp_affine", IMG, "HWC", {}, "matrix", [1, 0.2, 1, 0, 1, 0.5], [1, 0, 0, 0, 1, 0], F32),
    ("warp_affine", IMG, "HWC", {"matrix": [1, 0, 1, 0, 1, 0]}, "size", [5, 5], [4, 6], F32),
    ("rotate", IMG, "HWC", {}, "angle", 30.0, 10.0, F32),
    ("rotate", IMG, "HWC", {"angle": 90.0}, "size", [8, 8], [6, 6], F32),
    ("readers.numpy", None, "", NPY, "roi_start", [1, 1], [0, 2], I32),
    ("decoders.inflate", LZ4_CHUNKS[:LZ4_FIRST], "", {}, "shape", [3, 4], [4, 3], I32),
    ("decoders.inflate", LZ4_CHUNKS, "", {"shape": [12]}, "chunk_sizes", [LZ4_FIRST, len(LZ4_CHUNKS) - LZ4_FIRST],
     [LZ4_FIRST], I32),
    ("decoders.inflate", LZ4_CHUNKS, "", {"shape": [12]}, "chunk_offsets", [0, LZ4_FIRST], [LZ4_FIRST], I32),
    ("readers.numpy", None, "", NPY, "roi_end", [2, 3], [3, 3], I32),
    ("readers.numpy", None, "", NPY, "roi_shape", [1, 2], [2, 2], I32),
    ("readers.numpy", None, "", NPY, "rel_roi_start", [0.5, 0.25], [0.0, 0.0], F32),
    ("readers.numpy", None, "", NPY, "rel_roi_end", [0.5, 0.5], [1.0, 1.0], F32),
    ("readers.numpy", None, "", NPY, "rel_roi_shape", [0.5, 0.5], [0.25, 1.0], F32),
    # generic operators
    ("full", [1.5, 2.5], "", {}, "shape", [3, 2], [2, 2], I32),
    ("zeros", None, "", {}, "shape", [2, 3], [3], I32),
    ("ones", None, "", {}, "shape", [2, 3], [3], I32),
    ("squeeze", VOL[:1, :, :1], "DHWC", {}, "axes", [0, 2], [0], I32),
    ("reinterpret", IMG, "HWC", {}, "shape", [8, 6, 3], [3, 16, 3], I32),
    ("reinterpret", IMG, "HWC", {}, "rel_shape", [0.5, 2, 1], [2, 0.5, 1], F32),
    ("reinterpret", IMG, "HWC", {}, "src_dims", [1, 0, 2], [0, -1, 1, 2], I32),
    ("sequence_rearrange", VOL, "FHWC", {}, "new_order", [3, 0, 0], [1, 2], I32),
    ("permute_batch", TwoSamples((IMG, IMG[::-1])), "HWC", {}, "indices", 1, 0, I32),
    ("random.beta", None, "", {"shape": [4]}, "alpha", 0.5, 3.0, F32),
    ("random.beta", None, "", {"shape": [4]}, "beta", 0.5, 3.0, F32),
    ("random.beta", None, "", {}, "shape", [5], [2], I32),
    ("slice", IMG, "HWC", {"shape": [2, 2]}, "start", [1, 2], [0, 0], I32),
    ("slice", IMG, "HWC", {"rel_shape": [0.5, 0.5]}, "rel_start", [0.25, 0.5], [0.0, 0.0], F32),
    ("slice", IMG, "HWC", {"start": [1, 1]}, "end", [4, 3], [5, 5], I32),
    ("slice", IMG, "HWC", {}, "rel_end", [0.5, 0.5], [1.0, 1.0], F32),
    ("slice", IMG, "HWC", {"start": [1, 1]}, "shape", [3, 2], [2, 2], I32),
    ("slice", IMG, "HWC", {}, "rel_shape", [0.5, 0.5], [1.0, 0.5], F32),
    ("slice", IMG, "HWC", {"start": [1], "shape": [2]}, "axes", [0], [1], I32),
    ("pad", IMG, "HWC", {"shape": [8, 9, 3]}, "fill_value", 5.0, 7.0, F32),
    ("pad", IMG, "HWC", {"shape": [9]}, "axes", [0], [1], I32),
    ("pad", IMG, "HWC", {}, "shape", [8, 9, 4], [7, 8, 3], I32),
    ("pad", IMG, "HWC", {}, "align", [4], [5], I32),
] + [
    (op, _png(), "", fixed, arg, value, other, dtype)
    for op in ("decoders.image_crop", "image_decoder_crop", "experimental.decoders.image_crop")
    for fixed, arg, value, other, dtype in [
        ({}, "crop", [4, 4], [3, 5], F32), ({"crop_w": 4}, "crop_h", 3, 4, F32), ({"crop_h": 4}, "crop_w", 3, 4, F32),
        ({"crop": [3, 3]}, "crop_pos_x", 0.0, 1.0, F32), ({"crop": [3, 3]}, "crop_pos_y", 1.0, 0.0, F32),
    ]
] + [
    (op, _png(), "", fixed, arg, value, other, dtype)
    for op in ("decoders.image_slice", "image_decoder_slice", "experimental.decoders.image_slice")
    for fixed, arg, value, other, dtype in [
        ({"shape": [2, 2]}, "start", [1, 2], [0, 0], I32), ({"rel_shape": [0.5, 0.5]}, "rel_start", [0.25, 0.5],
                                                              [0.0, 0.0], F32),
        ({"start": [1, 1]}, "end", [4, 3], [5, 5], I32), ({}, "rel_end", [0.5, 0.5], [1.0, 1.0], F32),
        ({"start": [1, 1]}, "shape", [3, 2], [2, 2], I32), ({}, "rel_shape", [0.5, 0.5], [1.0, 0.5], F32),
        ({"start": [1], "shape": [2]}, "axes", [0], [1], I32)]
] + [
    (op, _tiny_video(), "", fixed, arg, value, other, I32)
    for op in ("decoders.video", "experimental.decoders.video")
    for fixed, arg, value, other in [({}, "frames", [0, 5], [1, 2]), ({}, "start_frame", 2, 5),
                                     ({"start_frame": 1}, "end_frame", 6, 9), ({}, "stride", 2, 3),
                                     ({}, "sequence_length", 3, 5)]
] + [
    ("transforms.translation", None, "", {}, "offset", [1, 2], [3, -1], F32),
    ("transforms.scale", None, "", {}, "scale", [2, 3], [1, 0.5], F32),
    ("transforms.scale", None, "", {"scale": [2, 3]}, "center", [1, 1], [0, 2], F32),
    ("transforms.rotation", None, "", {}, "angle", 30.0, 45.0, F32),
    ("transforms.rotation", None, "", {"angle": 30.0}, "axis", [0, 0, 1], [1, 0, 0], F32),
    ("transforms.rotation", None, "", {"angle": 30.0}, "center", [1, 2], [0, 0], F32),
    ("transforms.shear", None, "", {}, "shear", [0.5, 0.25], [0, 1], F32),
    ("transforms.shear", None, "", {}, "angles", [10, 20], [-5, 0], F32),
    ("transforms.shear", None, "", {"shear": [0.5, 0.25]}, "center", [1, 2], [0, 0], F32),
    ("transforms.crop", None, "", {}, "from_start", [0.5, 0.25], [0, 0], F32),
    ("transforms.crop", None, "", {}, "from_end", [3, 4], [2, 2], F32),
    ("transforms.crop", None, "", {}, "to_start", [0.5, 0.25], [0, 0], F32),
    ("transforms.crop", None, "", {}, "to_end", [3, 4], [2, 2], F32),
    ("coord_transform", BOXES.reshape(-1, 2), "", {}, "M", [1, 2, 3, 4], [2], F32),
    ("coord_transform", BOXES.reshape(-1, 2), "", {}, "T", [1, 2], [0, -1], F32),
    ("coord_transform", BOXES.reshape(-1, 2), "", {}, "MT", [1, 2, 3, 4, 5, 6], [1, 0, 1, 0, 1, 1], F32),
    ("coord_flip", BOXES.reshape(-1, 2), "", {}, "flip_x", 0, 1, I32),
    ("coord_flip", BOXES.reshape(-1, 2), "", {}, "flip_y", 1, 0, I32),
    ("coord_flip", BOXES[:, :3], "", {}, "flip_z", 1, 0, I32),
    ("coord_flip", BOXES.reshape(-1, 2), "", {}, "center_x", 0.25, 0.5, F32),
    ("coord_flip", BOXES.reshape(-1, 2), "", {"flip_y": 1}, "center_y", 0.25, 0.5, F32),
    ("coord_flip", BOXES[:, :3], "", {"flip_z": 1}, "center_z", 0.25, 0.5, F32),
    ("bb_flip", BOXES, "", {}, "horizontal", 0, 1, I32),
    ("bb_flip", BOXES, "", {}, "vertical", 1, 0, I32),
    ("bbox_paste", BOXES, "", {}, "ratio", 2.0, 3.0, F32),
    ("bbox_paste", BOXES, "", {"ratio": 2.0}, "paste_x", 0.25, 0.5, F32),
    ("bbox_paste", BOXES, "", {"ratio": 2.0}, "paste_y", 0.25, 0.5, F32),
    ("random_bbox_crop", LTRB, "", {"input_shape": [100, 80], "allow_no_crop": False}, "crop_shape",
     [40, 30], [60, 50], I32),
    ("random_bbox_crop", LTRB, "", {"crop_shape": [40, 30], "allow_no_crop": False}, "input_shape",
     [100, 80], [60, 50], I32),
    ("roi_random_crop", None, "", {"seed": 5, "roi_start": [10, 10], "roi_end": [20, 20], "in_shape": [100, 100]},
     "crop_shape", [40, 40], [15, 15], I32),
    ("roi_random_crop", None, "", {"seed": 5, "crop_shape": [40, 40], "roi_end": [50, 50], "in_shape": [100, 100]},
     "roi_start", [10, 10], [20, 20], I32),
    ("roi_random_crop", None, "", {"seed": 5, "crop_shape": [40, 40], "roi_start": [10, 10], "in_shape": [100, 100]},
     "roi_end", [20, 20], [60, 60], I32),
    ("roi_random_crop", None, "", {"seed": 5, "crop_shape": [40, 40], "roi_start": [10, 10], "in_shape": [100, 100]},
     "roi_shape", [10, 10], [40, 40], I32),
    ("segmentation.random_mask_pixel", MASK, "", {"seed": 5}, "foreground", 1, 0, I32),
    ("segmentation.random_mask_pixel", MASK, "", {"seed": 5, "foreground": 1}, "threshold", 3.0, 0.0, F32),
    ("segmentation.random_mask_pixel", MASK, "", {"seed": 5, "foreground": 1}, "value", 5, 2, I32),
    ("roi_random_crop", None, "", {"seed": 5, "crop_shape": [40, 40], "roi_start": [30, 30], "roi_end": [40, 40]},
     "in_shape", [100, 100], [60, 50], I32),
]  # (resize_crop_mirror, its legacy alias and experimental.resize are added below)
ARGUMENT_INPUT_CASES += [
    (op, data, layout, fixed, arg, value, other, dtype)
    for op in ("resize_crop_mirror", "fast_resize_crop_mirror")
    for data, layout, fixed, arg, value, other, dtype in [
        (IMG, "HWC", {"size": [5, 6]}, "crop", [3, 4], [2, 2], F32),
        (IMG, "HWC", {"size": [5, 6], "crop_w": 3}, "crop_h", 3.0, 2.0, F32),
        (IMG, "HWC", {"size": [5, 6], "crop_h": 3}, "crop_w", 3.0, 2.0, F32),
        (VOL, "DHWC", {"size": [3, 5, 6], "crop_h": 3, "crop_w": 3}, "crop_d", 2.0, 3.0, F32),
        (IMG, "HWC", {"size": [5, 6], "crop": [3, 3]}, "crop_pos_x", 0.0, 1.0, F32),
        (IMG, "HWC", {"size": [5, 6], "crop": [3, 3]}, "crop_pos_y", 1.0, 0.0, F32),
        (VOL, "DHWC", {"size": [4, 5, 6], "crop": [2, 3, 3]}, "crop_pos_z", 0.0, 1.0, F32),
        (IMG, "HWC", {"size": [5, 6]}, "mirror", 1, 0, I32),
    ] + [c[1:] for c in ARGUMENT_INPUT_CASES if c[0] == "resize"]
] + [("experimental.resize",) + c[1:] for c in ARGUMENT_INPUT_CASES if c[0] == "resize"] + [
    ("tensor_resize", IMG, "HWC", {"axes": [0, 1]}, "sizes", [3, 4], [5, 3], F32),
    ("tensor_resize", IMG, "HWC", {"axes": [0, 1]}, "scales", [0.5, 1.5], [1.0, 0.5], F32),
    ("tensor_resize", IMG, "HWC", {"axes": [0, 1], "scales": [0.7, 0.7]}, "alignment", [0.0, 1.0], [0.5, 0.5], F32),
    ("tensor_resize", IMG, "HWC", {"axes": [0, 1], "sizes": [4, 4], "roi_end": [5, 7]}, "roi_start", [1, 1], [0, 0],
     F32),
    ("tensor_resize", IMG, "HWC", {"axes": [0, 1], "sizes": [4, 4], "roi_start": [1, 1]}, "roi_end", [5, 7], [6, 8],
     F32),
    ("tensor_resize", IMG, "HWC", {"axes": [0, 1], "sizes": [4, 5]}, "interp_type", NN, LINEAR, I32),
    ("tensor_resize", IMG, "HWC", {"axes": [0, 1], "sizes": [3, 4]}, "min_filter", NN, LINEAR, I32),
    ("tensor_resize", IMG, "HWC", {"axes": [0, 1], "sizes": [9, 12]}, "mag_filter", NN, LINEAR, I32),
    ("bbox_rotate", BOXES, "", {"input_shape": [60, 80]}, "angle", 30.0, 10.0, F32),
    ("bbox_rotate", BOXES, "", {"angle": 30.0}, "input_shape", [60, 80], [80, 60], I32),
    ("bbox_rotate", BOXES, "", {"angle": 30.0, "input_shape": [60, 80]}, "size", [70, 90], [50, 50], F32),
    ("segmentation.random_object_bbox", MASK, "", {"seed": 5, "format": "box", "ignore_class": True, "k_largest": 1},
     "background", 0, 2, I32),
    ("segmentation.random_object_bbox", MASK, "", {"seed": 5, "format": "box"}, "classes", [2], [5], I32),
    ("segmentation.random_object_bbox", MASK, "", {"seed": 5, "format": "box", "classes": [2, 5]}, "class_weights",
     [1.0, 0.0], [0.0, 1.0], F32),
    ("segmentation.random_object_bbox", MASK, "", {"seed": 5, "format": "box", "classes": [2]}, "foreground_prob",
     1.0, 0.0, F32),
    ("segmentation.random_object_bbox", MASK, "", {"seed": 5, "format": "box", "classes": [2]}, "threshold",
     [1, 1], [3, 3], I32),
    ("decoders.audio", WAV, "", {}, "sample_rate", 8000.0, 12000.0, F32),
    ("audio_decoder", WAV, "", {}, "sample_rate", 8000.0, 12000.0, F32),
    ("audio_resample", SIGNAL, "", {"out_rate": 2.0}, "in_rate", 3.0, 1.0, F32),
    ("audio_resample", SIGNAL, "", {"in_rate": 3.0}, "out_rate", 2.0, 4.0, F32),
    ("audio_resample", SIGNAL, "", {}, "scale", 1.5, 0.5, F32),
    ("audio_resample", SIGNAL, "", {}, "out_length", 30, 10, I32),
    ("preemphasis_filter", SIGNAL, "", {}, "preemph_coeff", 0.5, 0.9, F32),
]




def _op(name):
    f = fn
    for part in name.split("."):
        f = getattr(f, part)
    return f


def test_every_argument_input_has_a_case():
    cases = {(c[0], c[4]) for c in ARGUMENT_INPUT_CASES}
    assert {(op, arg) for op, args in DALI_ARGUMENT_INPUTS.items() for arg in args} == cases


@pytest.mark.parametrize("op,data,layout,fixed,arg,value,other,dtype", ARGUMENT_INPUT_CASES,
                         ids=[f"{c[0]}-{c[4]}" for c in ARGUMENT_INPUT_CASES])
def test_argument_given_as_a_node_equals_the_constant(op, data, layout, fixed, arg, value, other, dtype):
    func = _op(op)
    seeded = {"seed": 5} if op.startswith("random") else {}

    def graph():
        inputs = [] if data is None else [data if isinstance(data, list) else source(data, data, layout=layout)]
        if isinstance(data, TwoSamples):
            inputs = [source(*data, layout=layout)]
        elif isinstance(data, tuple):  # several inputs, the first one with the layout
            inputs = [source(d, d, layout=layout if k == 0 else "") for k, d in enumerate(data)]
        node = fn.external_source(source=lambda: [np.asarray(value, dtype)] * 2)
        with_node = func(*inputs, **fixed, **seeded, **{arg: node})
        with_constant = func(*inputs, **fixed, **seeded, **{arg: value})
        with_other = func(*inputs, **fixed, **seeded, **{arg: other})
        # Operators with several outputs (random_bbox_crop) are compared on their first one.
        return tuple(out[0] if isinstance(out, list) else out for out in (with_node, with_constant, with_other))

    with_node, with_constant, with_other = run_graph(graph)
    for a, b in zip(with_node, with_constant):
        np.testing.assert_array_equal(a, b)
    # The argument matters: another value gives another result.
    assert any(a.shape != o.shape or not np.array_equal(a, o) for a, o in zip(with_node, with_other))


def test_argument_inputs_vary_per_sample():
    img = np.arange(6, dtype=np.uint8).reshape(1, 2, 3)

    def graph():
        x = source(img, img, img, layout="HWC")
        mirror = source(np.array(1, np.int32), np.array(0, np.int32), np.array(1, np.int32))
        ranges = source(np.array([0, 1], np.float32), np.array([10, 11], np.float32), np.array([-5, -4], np.float32))
        return fn.flip(x, horizontal=mirror), fn.random.uniform(range=ranges, shape=[100])

    flipped, drawn = run_graph(graph, batch_size=3)
    assert [s[0, :, 0].tolist() for s in flipped] == [[3, 0], [0, 3], [3, 0]]
    assert [(float(s.min()) >= lo, float(s.max()) < lo + 1) for s, lo in zip(drawn, (0, 10, -5))] == [(True, True)] * 3


def test_coin_flip_drives_mirror_like_the_efficientnet_example():
    img = np.arange(6, dtype=np.uint8).reshape(1, 2, 3)

    def graph():
        coin = fn.random.coin_flip(probability=0.5, seed=3)
        return fn.flip(source(*[img] * 64, layout="HWC"), horizontal=coin), coin

    flipped, coins = run_graph(graph, batch_size=64)
    assert {int(c) for c in coins} == {0, 1}
    for s, c in zip(flipped, coins):
        assert s[0, 0, 0] == (3 if c else 0)


def test_argument_input_from_the_gpu_is_copied_back():
    img = np.arange(6, dtype=np.uint8).reshape(1, 2, 3)

    def graph():
        flag = source(np.array(1, np.int32), np.array(0, np.int32))
        return fn.flip(source(img, img, layout="HWC").gpu(), horizontal=flag.gpu())

    (out,) = run_graph(graph, device_id=0)
    assert [s[0, :, 0].tolist() for s in out] == [[3, 0], [0, 3]]


# -- errors while defining a graph ----------------------------------------------------------------------------

def _in_pipeline(make):
    with Pipeline(batch_size=2, num_threads=1, device_id=None):
        return make(fn.external_source(source=lambda: [IMG, IMG], layout="HWC"))


@pytest.mark.parametrize("make,message", [
    (lambda x: fn.flip(x, horizontall=1), "fn.flip: unknown argument 'horizontall'. Known arguments: .*horizontal"),
    (lambda x: fn.flip(x, horizontal="yes"), "fn.flip: argument 'horizontal' expects an integer, got 'yes'"),
    (lambda x: fn.resize(x, interp_type="linear"), "fn.resize: argument 'interp_type' expects a DALIInterpType"),
    (lambda x: fn.transpose(x, perm=fn.random.uniform()), "fn.transpose: argument 'perm' does not accept "
                                                          "per-sample data"),
    (lambda x: fn.cast(x, dtype=fn.random.uniform()), "fn.cast: argument 'dtype' does not accept per-sample data"),
    (lambda x: fn.random.coin_flip(probability=1.5), "fn.random.coin_flip: argument 'probability' must be <= 1"),
    (lambda x: fn.rotate(x), "fn.rotate: argument 'angle' is required"),
    (lambda x: fn.reshape(x, src_dims=[0]), "fn.reshape: argument 'src_dims' is not supported"),
    (lambda x: fn.flip(x, x), r"fn.flip: expected 1 inputs, got 2"),
    (lambda x: fn.flip("image"), r"fn.flip: input 0 must be a DataNode .*got 'image'"),
    (lambda x: fn.flip(x, device="tpu"), r"fn.flip: argument 'device' must be one of \['cpu', 'gpu', 'mixed'\]"),
    (lambda x: fn.readers.file(files=["a"], device="gpu"), r"fn.readers.file: device='gpu' is not supported"),
    (lambda x: fn.flip(x, name=3), "fn.flip: argument 'name' must be a string, got 3"),
])
def test_definition_errors_name_the_operator_and_argument(make, message):
    with pytest.raises((OpArgumentError, TypeError), match=message):
        _in_pipeline(make)


def test_errors_name_the_external_source_too():
    with pytest.raises(OpArgumentError, match="fn.external_source: unknown argument 'sorce'"):
        _in_pipeline(lambda x: fn.external_source(sorce=lambda: None))


def test_nodes_cannot_be_combined_outside_the_definition_scope():
    with Pipeline(batch_size=1, num_threads=1, device_id=None):
        x = fn.random.uniform()
    with pytest.raises(RuntimeError, match=r"`\+` on DataNode\(name='__random_uniform_0', device='cpu'\) was "
                                           "used outside a pipeline definition"):
        x + 1
    with pytest.raises(RuntimeError, match=r"`<` on DataNode\(name='__random_uniform_0'.* outside a pipeline"):
        2 > x
    with pytest.raises(RuntimeError, match=r"`-` on DataNode.* outside a pipeline"):
        -x
    with pytest.raises(RuntimeError, match=r"`\[\]` on DataNode.* outside a pipeline"):
        x[0]
    with pytest.raises(RuntimeError, match="fn.external_source was called outside a pipeline definition"):
        fn.external_source(source=lambda: [np.zeros(1)])
    with pytest.raises(RuntimeError, match="fn._constant was called outside a pipeline definition"):
        types.Constant([1, 2])


def test_operators_cannot_be_added_after_build():
    pipe = Pipeline(batch_size=1, num_threads=1, device_id=None)
    with pipe:
        x = fn.random.uniform()
        pipe.set_outputs(x)
    pipe.build()
    with pipe, pytest.raises(RuntimeError, match="fn.random.normal: cannot add operators to pipeline after it "
                                                 "was built"):
        fn.random.normal()


def test_a_numpy_array_for_a_per_sample_argument_is_every_samples_value():
    """As in DALI: fn.normalize(mean=<array>) takes the array as each sample's mean (an argument input);
    an array that fits the argument's own type stays a constant, and a non-tensor argument refuses one."""
    image = np.arange(4 * 4 * 3, dtype=np.uint8).reshape(4, 4, 3)
    mean = np.array([1.0, 2.0, 3.0], np.float32).reshape(1, 1, 3)

    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        x = fn.external_source(source=lambda: [image, image + 1], layout="HWC")
        return fn.normalize(x, dtype=types.FLOAT, mean=mean, stddev=np.full((1, 1, 3), 2.0, np.float32))

    p = pipe()
    p.build()
    out = p.run()[0]
    for i, x in enumerate((image, image + 1)):
        np.testing.assert_allclose(np.asarray(out[i]), (x.astype(np.float32) - mean) / 2.0, rtol=1e-6)
    with Pipeline(batch_size=1, num_threads=1, device_id=None):
        x = fn.external_source(source=lambda: [image], layout="HWC")
        node = fn.crop_mirror_normalize(x, mean=np.array([1.0, 2.0, 3.0]))
        assert "mean" not in node.source.arg_inputs and node.source.args["mean"] == (1.0, 2.0, 3.0)
        with pytest.raises(OpArgumentError, match="argument 'num_attempts'"):
            fn.random_resized_crop(x, size=(2, 2), num_attempts=np.array([1, 2]))
