"""``fn.random.coin_flip``, ``uniform``, ``normal`` and ``choice``: shapes, types and distributions.

The values follow DALI's distributions, not its exact streams. Frequencies are checked on large
draws; every draw is a pure function of the seeds, so these checks are deterministic, not flaky.
Rows marked "DALI 2.4" were measured with NVIDIA DALI 2.4 and are hard-coded here.
(Determinism across ``num_threads`` and ``prefetch_queue_depth`` for coin_flip, uniform and normal
is in tests/pipeline/test_pipeline.py.)
"""

from __future__ import annotations

import numpy as np
import pytest

from jaxdali import fn, pipeline_def, types
from jaxdali.ops.schema import OpArgumentError

N = 20000  # values per sample in the frequency checks


def run(make, batch_size=2, iterations=1, seed=11, num_threads=1, depth=1):
    """Outputs of ``make()`` as lists of NumPy samples (one list per output), for each iteration."""

    @pipeline_def(batch_size=batch_size, num_threads=num_threads, device_id=None, seed=seed,
                  prefetch_queue_depth=depth)
    def pipe():
        out = make()
        return tuple(out) if isinstance(out, (list, tuple)) else out

    p = pipe()
    try:
        result = []
        for _ in range(iterations):
            result.append([[np.asarray(o.at(i)) for i in range(len(o))] for o in p.run()])
        return result if iterations > 1 else result[0]
    finally:
        p.close()


def source(*samples):
    return fn.external_source(source=lambda: [np.asarray(s) for s in samples])


def frequencies(values) -> dict:
    v, c = np.unique(np.asarray(values), return_counts=True)
    return dict(zip(v.tolist(), (c / np.asarray(values).size).tolist()))


def assert_frequencies(values, expected: dict, tol: float = 0.015):
    got = frequencies(values)
    assert set(got) <= set(expected), f"unexpected values {sorted(set(got) - set(expected))}"
    for k, p in expected.items():
        assert abs(got.get(k, 0.0) - p) < tol, f"value {k}: frequency {got.get(k, 0.0):.4f}, expected {p:.4f}"


# -- coin_flip ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("probability", [0.0, 0.1, 0.3, 0.5, 0.9, 1.0])
def test_coin_flip_frequency_matches_probability(probability):
    (out,) = run(lambda: fn.random.coin_flip(probability=probability, shape=[N]))
    for s in out:
        assert s.dtype == np.int32 and set(np.unique(s).tolist()) <= {0, 1}
        assert abs(s.mean() - probability) < 0.015
    if probability in (0.0, 1.0):  # exact at the ends
        assert all((s == probability).all() for s in out)


def test_coin_flip_per_sample_probability_input():
    probs = [0.0, 0.25, 0.75, 1.0]
    (out,) = run(lambda: fn.random.coin_flip(probability=source(*[np.float32(p) for p in probs]), shape=[N]),
                 batch_size=4)
    assert [round(float(s.mean()), 2) for s in out] == probs


def test_coin_flip_shapes_and_types():
    def graph():
        ref = source(np.zeros((2, 3), np.uint8), np.zeros((1, 5), np.uint8))  # ragged
        return (fn.random.coin_flip(), fn.random.coin_flip(shape=[4]), fn.random.coin_flip(ref),
                fn.random.coin_flip(dtype=types.BOOL, shape=[3]), fn.random.coin_flip(shape=source(
                    np.array([2], np.int32), np.array([3, 1], np.int32))))

    scalar, fixed, like, flags, per_sample = run(graph)
    assert [s.shape for s in scalar] == [(), ()] and scalar[0].dtype == np.int32  # DALI 2.4: int32 0-D
    assert [s.shape for s in fixed] == [(4,), (4,)]
    assert [s.shape for s in like] == [(2, 3), (1, 5)]
    assert flags[0].dtype == np.bool_
    assert [s.shape for s in per_sample] == [(2,), (3, 1)]


def test_coin_flip_probability_out_of_range_is_rejected():
    with pytest.raises(OpArgumentError, match=r"fn.random.coin_flip: argument 'probability' must be >= 0, got -0.1"):
        run(lambda: fn.random.coin_flip(probability=-0.1))


# -- uniform -----------------------------------------------------------------------------------------------------

def test_uniform_default_is_a_float_scalar_in_minus_one_one():
    (out,) = run(lambda: fn.random.uniform(), batch_size=N)
    values = np.array(out)
    assert values.dtype == np.float32 and out[0].shape == ()
    assert values.min() >= -1 and values.max() < 1
    assert abs(values.mean()) < 0.02 and abs(values.var() - 1 / 3) < 0.02


@pytest.mark.parametrize("lo,hi", [(2.0, 5.0), (-10.0, -9.5), (0.0, 1000.0)])
def test_uniform_range(lo, hi):
    (out,) = run(lambda: fn.random.uniform(range=[lo, hi], shape=[N]))
    for s in out:
        assert s.min() >= lo and s.max() < hi
        width = hi - lo
        assert abs(s.mean() - (lo + hi) / 2) < 0.02 * width
        assert abs(s.std() - width / np.sqrt(12)) < 0.02 * width
        # evenly spread: each tenth of the range gets about a tenth of the values
        hist, _ = np.histogram(s, bins=10, range=(lo, hi))
        assert np.abs(hist / N - 0.1).max() < 0.015


def test_uniform_range_of_equal_ends_is_a_constant():
    (out,) = run(lambda: fn.random.uniform(range=[5, 5], shape=[3]))
    assert [s.tolist() for s in out] == [[5.0] * 3] * 2


def test_uniform_values_draws_only_those_values_evenly():
    (out, as_int) = run(lambda: (fn.random.uniform(values=[1, 5, 7], shape=[N]),
                                 fn.random.uniform(values=[1, 5, 7], shape=[N], dtype=types.INT32)))
    for s in out:
        assert s.dtype == np.float32
        assert_frequencies(s, {1.0: 1 / 3, 5.0: 1 / 3, 7.0: 1 / 3})
    assert as_int[0].dtype == np.int32 and set(np.unique(as_int[0]).tolist()) == {1, 5, 7}


def test_uniform_values_take_precedence_over_range():
    (out,) = run(lambda: fn.random.uniform(range=[0, 1], values=[2]))  # DALI 2.4: [2.0, 2.0]
    assert [s.item() for s in out] == [2.0, 2.0]


# DALI 2.4: integer output truncates the bounds toward zero, draws in [lo, hi) and rounds to nearest.
INT_RANGES = [
    ([0, 3], {0: 1 / 6, 1: 1 / 3, 2: 1 / 3, 3: 1 / 6}),
    ([0.5, 3.5], {0: 1 / 6, 1: 1 / 3, 2: 1 / 3, 3: 1 / 6}),   # the bounds truncate to [0, 3]
    ([-2.5, 2.5], {-2: 1 / 8, -1: 1 / 4, 0: 1 / 4, 1: 1 / 4, 2: 1 / 8}),
    ([-2.7, 2.7], {-2: 1 / 8, -1: 1 / 4, 0: 1 / 4, 1: 1 / 4, 2: 1 / 8}),
    ([1, 2], {1: 1 / 2, 2: 1 / 2}),
    ([0.2, 0.9], {0: 1.0}),
]


@pytest.mark.parametrize("dtype", [types.INT32, types.INT8], ids=["int32", "int8"])
@pytest.mark.parametrize("bounds,expected", INT_RANGES, ids=[str(r[0]) for r in INT_RANGES])
def test_uniform_integer_output_rounds_like_dali(bounds, expected, dtype):
    (out,) = run(lambda: fn.random.uniform(range=bounds, dtype=dtype, shape=[N]), batch_size=1)
    assert out[0].dtype == types.to_numpy_type(dtype)
    assert_frequencies(out[0], expected)


def test_uniform_integer_rounding_with_per_sample_range():
    ranges = [np.array([0.5, 3.5], np.float32), np.array([-2.7, 2.7], np.float32)]
    (out,) = run(lambda: fn.random.uniform(range=source(*ranges), dtype=types.INT16,
                                           shape=[N]))
    assert_frequencies(out[0], INT_RANGES[1][1])
    assert_frequencies(out[1], INT_RANGES[3][1])


def test_uniform_unsigned_output():
    (out,) = run(lambda: fn.random.uniform(range=[0, 3], dtype=types.UINT8, shape=[N]), batch_size=1)
    assert out[0].dtype == np.uint8
    assert_frequencies(out[0], INT_RANGES[0][1])


def test_uniform_shapes():
    def graph():
        ref = source(np.zeros((2, 3), np.float32), np.zeros((4, 1), np.float32))  # ragged
        return (fn.random.uniform(shape=[2, 2]), fn.random.uniform(ref),
                fn.random.uniform(shape=source(np.array([1, 2], np.int32), np.array([3], np.int32))),
                fn.random.uniform(shape=[0]))

    fixed, like, per_sample, empty = run(graph)
    assert [s.shape for s in fixed] == [(2, 2), (2, 2)]
    assert [s.shape for s in like] == [(2, 3), (4, 1)] and like[0].dtype == np.float32
    assert [s.shape for s in per_sample] == [(1, 2), (3,)]
    assert [s.shape for s in empty] == [(0,), (0,)]


@pytest.mark.parametrize("bounds,message", [
    ([3, 1], r"fn.random.uniform: invalid range \[3, 1\) for sample 0: the end must not be below the start"),
    ([3, 1, 2], r"fn.random.uniform: argument 'range' must be \[lo, hi\], got \[3.0, 1.0, 2.0\]"),
])
def test_uniform_bad_range_is_rejected(bounds, message):
    with pytest.raises(OpArgumentError, match=message):
        run(lambda: fn.random.uniform(range=bounds))


def test_uniform_bad_per_sample_range_names_the_sample():
    ranges = [np.array([0, 1], np.float32), np.array([2, -2], np.float32)]
    with pytest.raises(OpArgumentError, match=r"invalid range \[2, -2\) for sample 1"):
        run(lambda: fn.random.uniform(range=source(*ranges)))


# -- normal ----------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("mean,stddev", [(0.0, 1.0), (1.0, 2.0), (-50.0, 0.25)])
def test_normal_mean_and_stddev(mean, stddev):
    (out,) = run(lambda: fn.random.normal(mean=mean, stddev=stddev, shape=[N]))
    for s in out:
        assert s.dtype == np.float32
        assert abs(s.mean() - mean) < 0.03 * stddev
        assert abs(s.std() - stddev) < 0.03 * stddev
        # the bell shape: about 68.3% within one standard deviation, 95.4% within two
        z = np.abs(s - mean) / stddev
        assert abs((z < 1).mean() - 0.683) < 0.015 and abs((z < 2).mean() - 0.954) < 0.01


def test_normal_per_sample_arguments_and_zero_stddev():
    means = [np.float32(-5), np.float32(10)]
    stds = [np.float32(0), np.float32(3)]
    (out,) = run(lambda: fn.random.normal(mean=source(*means), stddev=source(*stds), shape=[N]))
    assert (out[0] == -5).all()
    assert abs(out[1].mean() - 10) < 0.1 and abs(out[1].std() - 3) < 0.1


def test_normal_integer_output_is_rounded():
    (out,) = run(lambda: fn.random.normal(mean=10, stddev=3, dtype=types.INT16, shape=[N]), batch_size=1)
    assert out[0].dtype == np.int16
    assert abs(out[0].mean() - 10) < 0.1 and abs(out[0].std() - np.sqrt(9 + 1 / 12)) < 0.1
    (default,) = run(lambda: fn.random.normal(), batch_size=3)
    assert [s.shape for s in default] == [(), (), ()] and default[0].dtype == np.float32


def test_normal_shape_like_input():
    (out,) = run(lambda: fn.random.normal(source(np.zeros((3, 1)), np.zeros((2, 2)))))
    assert [s.shape for s in out] == [(3, 1), (2, 2)]


def test_normal_negative_stddev_is_rejected():
    with pytest.raises(OpArgumentError, match="fn.random.normal: argument 'stddev' must be >= 0, got -1.0"):
        run(lambda: fn.random.normal(stddev=-1))


# -- choice ------------------------------------------------------------------------------------------------------------

def test_choice_of_an_integer_draws_from_its_range():
    (out,) = run(lambda: fn.random.choice(5, shape=[N]))
    for s in out:
        assert s.dtype == np.int32  # DALI 2.4
        assert_frequencies(s, {k: 0.2 for k in range(5)})


def test_choice_of_a_list_with_probabilities():
    (plain, weighted, zeros) = run(lambda: (fn.random.choice([10, 20, 30], shape=[N]),
                                            fn.random.choice([10, 20, 30], p=[0.2, 0.5, 0.3], shape=[N]),
                                            fn.random.choice([10, 20, 30], p=[0, 0, 1.0], shape=[4])))
    assert_frequencies(plain[0], {10: 1 / 3, 20: 1 / 3, 30: 1 / 3})
    assert_frequencies(weighted[0], {10: 0.2, 20: 0.5, 30: 0.3})
    assert [s.tolist() for s in zeros] == [[30] * 4] * 2  # DALI 2.4


def test_choice_per_sample_probabilities():
    probs = [np.array([1, 0], np.float32), np.array([0.25, 0.75], np.float32)]
    (out,) = run(lambda: fn.random.choice([7, 8], p=source(*probs), shape=[N]))
    assert (out[0] == 7).all()
    assert_frequencies(out[1], {7: 0.25, 8: 0.75})


def test_choice_output_type_follows_the_input():
    # DALI 2.4: a uint8 scalar gives uint8 values, a float list float32, an int64 array int32 (like any
    # int64 constant input).
    (small, floats, big) = run(lambda: (fn.random.choice(np.uint8(4), shape=[3]),
                                        fn.random.choice(np.array([1.5, 2.5], np.float32)),
                                        fn.random.choice(np.array([4, 5], np.int64), shape=[3])))
    assert small[0].dtype == np.uint8 and set(small[0].tolist()) <= {0, 1, 2, 3}
    assert floats[0].dtype == np.float32 and floats[0].shape == () and floats[0].item() in (1.5, 2.5)
    assert big[0].dtype == np.int32


def test_choice_of_a_matrix_picks_rows():
    rows = np.array([[1, 2], [3, 4], [5, 6]], np.int32)
    (one, many, weighted, like) = run(lambda: (fn.random.choice(rows), fn.random.choice(rows, shape=[N]),
                                               fn.random.choice(rows, p=[0, 0, 1.0]),
                                               fn.random.choice(rows, source(np.zeros((2, 3)), np.zeros((4, 1))))))
    # DALI 2.4: output shape is shape + the row shape.
    assert [s.shape for s in one] == [(2,), (2,)] and all(s.tolist() in rows.tolist() for s in one)
    assert many[0].shape == (N, 2)
    assert_frequencies(many[0][:, 0], {1: 1 / 3, 3: 1 / 3, 5: 1 / 3})
    np.testing.assert_array_equal(many[0][:, 1], many[0][:, 0] + 1)  # whole rows, never mixed
    assert [s.tolist() for s in weighted] == [[5, 6], [5, 6]]
    assert [s.shape for s in like] == [(2, 3, 2), (4, 1, 2)]


def test_choice_input_may_differ_per_sample():
    (out,) = run(lambda: fn.random.choice(source(np.array([-1, 1], np.int32), np.array([40, 50, 60], np.int32)),
                                          shape=[N]))
    assert_frequencies(out[0], {-1: 0.5, 1: 0.5})
    assert_frequencies(out[1], {40: 1 / 3, 50: 1 / 3, 60: 1 / 3})


@pytest.mark.parametrize("make,message", [
    (lambda: fn.random.choice([10, 20, 30], p=[0.5, 0.5]), r"fn.random.choice: 'p' has 2 entries for 3 elements"),
    (lambda: fn.random.choice([10, 20, 30], p=[0.5, 0.5, 0.5]),
     r"fn.random.choice: the probabilities 'p' must sum to 1, got 1.5 \(sample 0\)"),
    (lambda: fn.random.choice(0), r"fn.random.choice: sample 0 has nothing to choose from"),
])
def test_choice_errors(make, message):
    with pytest.raises(OpArgumentError, match=message):
        run(make)


# -- seeds and position-based values -----------------------------------------------------------------------------------

def test_values_differ_between_samples_iterations_and_seeds():
    def graph():
        return fn.random.uniform(shape=[4], seed=5), fn.random.uniform(shape=[4], seed=6)

    (a0, b0), (a1, _) = run(graph, iterations=2)
    assert not np.array_equal(a0[0], a0[1])   # samples of one batch
    assert not np.array_equal(a0[0], a1[0])   # iterations
    assert not np.array_equal(a0[0], b0[0])   # operator seeds


def test_operator_seed_overrides_the_pipeline_seed():
    a = run(lambda: fn.random.normal(shape=[4], seed=123), seed=1)
    b = run(lambda: (fn.random.coin_flip(), fn.random.normal(shape=[4], seed=123)), seed=2)[1:]
    np.testing.assert_array_equal(np.array(a[0]), np.array(b[0]))


def mixed_graph():
    prob = fn.random.uniform(range=[0, 1])
    return (fn.random.choice([1, 2, 3], shape=[5]), fn.random.coin_flip(probability=prob, shape=[5]),
            fn.random.uniform(values=[0, 1, 2], shape=[3]), fn.random.choice(source(*[np.int32(4)] * 6)))


@pytest.mark.parametrize("num_threads,depth", [(2, 1), (3, 3)])
def test_choice_and_per_sample_arguments_do_not_depend_on_threads_or_prefetch(num_threads, depth):
    reference = run(mixed_graph, batch_size=6, iterations=3, seed=77)
    got = run(mixed_graph, batch_size=6, iterations=3, seed=77, num_threads=num_threads, depth=depth)
    for ref_it, got_it in zip(reference, got):
        for ref_out, got_out in zip(ref_it, got_it):
            np.testing.assert_array_equal(np.array(ref_out), np.array(got_out))


def test_golden_values_for_seed_42():
    # Users rely on reproducible streams; do not update these values casually (only with a deliberate,
    # documented change of the generator).
    (u, c, n, k) = run(lambda: (fn.random.uniform(shape=[3], seed=42), fn.random.coin_flip(shape=[6], seed=42),
                                fn.random.normal(shape=[2], seed=42), fn.random.choice(10, shape=[4], seed=42)))
    np.testing.assert_allclose(u[0], GOLDEN_UNIFORM, rtol=1e-6)
    assert c[0].tolist() == GOLDEN_COIN
    np.testing.assert_allclose(n[0], GOLDEN_NORMAL, rtol=1e-6)
    assert k[0].tolist() == GOLDEN_CHOICE


GOLDEN_UNIFORM = [-0.7669752240180969, -0.17603866755962372, -0.05352141335606575]
GOLDEN_COIN = [1, 1, 1, 0, 0, 0]
GOLDEN_NORMAL = [0.009513049386441708, -0.5185652375221252]
GOLDEN_CHOICE = [1, 4, 4, 5]


@pytest.mark.parametrize("name", ["coin_flip", "uniform", "normal"])
def test_gpu_placement_draws_the_cpu_values_on_the_device(name):
    # DALI places these three on the GPU too (ported code passes device="gpu"); the draws stay the
    # same counter-based values as on the CPU, handed out as device batches.
    op = getattr(fn.random, name)

    @pipeline_def(batch_size=3, num_threads=1, device_id=0, seed=5)
    def pipe(device):
        return op(device=device, shape=(4,))

    cpu, gpu = pipe("cpu"), pipe("gpu")
    try:
        for _ in range(2):
            (host,), (device,) = cpu.run(), gpu.run()
            assert type(device).__name__ == "TensorListGPU"
            np.testing.assert_array_equal(np.asarray(device.as_cpu().as_tensor()), np.asarray(host.as_tensor()))
    finally:
        cpu.close()
        gpu.close()


def test_choice_stays_cpu_only_like_dali():
    with pytest.raises(OpArgumentError, match="fn.random.choice: device='gpu' is not supported"):
        run(lambda: fn.random.choice(5, device="gpu"))
