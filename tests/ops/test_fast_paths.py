"""Fast paths of small and per-pixel operators give the values of the general formulas (issue 22, speed):
rounding, the per-level colour tables, the OpenCV colour matrix, cached transform matrices,
column-wise coordinate transforms, and random.beta's per-sample generators."""

from __future__ import annotations

import numpy as np
import pytest

from jaxdali import fn, pipeline_def, types
from jaxdali.ops.color import _apply_matrix, hsv_matrix
from jaxdali.ops.convert import convert, round_half_away


def _reference_round(x: np.ndarray) -> np.ndarray:
    """Half away from zero by the definition: trunc, then step away when the rest is at least 0.5."""
    t = np.trunc(x)
    return np.where(np.abs(x - t) >= 0.5, t + np.sign(x), t)


@pytest.mark.parametrize("src", [np.float16, np.float32, np.float64])
def test_round_half_away_and_convert_match_the_definition(src):
    halves = np.arange(-600, 600, 0.5)
    specials = [np.nan, np.inf, -np.inf, 0.49999997, -0.49999997, 255.5, 254.5, -0.5, 1e30, -1e30, 2.0 ** 40 + 0.5]
    x = np.concatenate([halves, np.random.default_rng(0).normal(0, 400, 5000), specials]).astype(src)
    with np.errstate(invalid="ignore", over="ignore"):
        expected = _reference_round(x)
        np.testing.assert_array_equal(round_half_away(x), expected)
    expected = expected.astype(np.float64)  # the clamping bounds are exact here
    for dtype in (np.uint8, np.int8, np.int16, np.uint16, np.int32):
        info = np.iinfo(dtype)
        want = np.where(np.isnan(expected), 0, np.clip(np.nan_to_num(expected, nan=0), info.min, info.max))
        got = convert(x, dtype)
        assert got.dtype == dtype
        np.testing.assert_array_equal(got, want.astype(dtype), err_msg=f"{np.dtype(src)} -> {np.dtype(dtype)}")
    assert round_half_away(np.float64(2.5)) == 3.0 and round_half_away(np.float64(-2.5)) == -3.0


def _run(make, images, batch_size=None, threads=2):
    @pipeline_def(batch_size=batch_size or len(images), num_threads=threads, device_id=None, seed=3)
    def pipe():
        x = fn.external_source(source=lambda: images, layout="HWC")
        return make(x)

    p = pipe()
    p.build()
    out = p.run()
    p.close()
    return [[np.asarray(t.at(i)) for i in range(len(t))] for t in out]


IMAGES = [np.random.default_rng(i).integers(0, 256, (17, 23, 3), dtype=np.uint8) for i in range(3)]


@pytest.mark.parametrize("dtype,np_dtype", [(types.FLOAT, np.float32), (types.INT16, np.int16)])
def test_brightness_from_uint8_to_other_types_is_the_formula(dtype, np_dtype):
    (out,) = _run(lambda x: (fn.brightness(x, brightness=1.3, brightness_shift=0.1, dtype=dtype),), IMAGES)
    shift = 0.1 if np_dtype == np.float32 else 0.1 * np.iinfo(np_dtype).max
    for img, o in zip(IMAGES, out):
        expected = convert(img.astype(np.float32) * np.float32(1.3) + np.float32(shift), np_dtype)
        assert o.dtype == np_dtype
        np.testing.assert_array_equal(o, expected)


@pytest.mark.parametrize("op,kwargs,matrix", [
    ("hue", dict(hue=35.0), lambda: hsv_matrix(np.float32(35.0), np.float32(1.0), np.float32(1.0))),
    ("saturation", dict(saturation=0.4), lambda: hsv_matrix(np.float32(0.0), np.float32(0.4), np.float32(1.0))),
])
def test_hue_and_saturation_stay_within_one_level_of_the_float32_formula(op, kwargs, matrix):
    op_fn = getattr(fn, op)
    uint8_out, float_out = _run(lambda x: (op_fn(x, **kwargs), op_fn(x, dtype=types.FLOAT, **kwargs)), IMAGES)
    m = matrix()
    for img, u, f in zip(IMAGES, uint8_out, float_out):
        exact = _apply_matrix(img, m, None, np)
        np.testing.assert_allclose(f, exact, rtol=0, atol=1e-4)
        assert u.dtype == np.uint8
        assert np.abs(u.astype(int) - convert(exact, np.uint8)).max() <= 1


def test_cast_like_of_the_same_type_keeps_the_values():
    a, b = _run(lambda x: (fn.cast_like(x, x), fn.cast_like(x, fn.cast(x, dtype=types.FLOAT))), IMAGES)
    for img, same, widened in zip(IMAGES, a, b):
        assert same.dtype == np.uint8 and widened.dtype == np.float32
        np.testing.assert_array_equal(same, img)
        np.testing.assert_array_equal(widened, img.astype(np.float32))


def test_constant_transforms_are_fresh_arrays_each_batch():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        return fn.transforms.rotation(fn.transforms.translation(offset=[1.0, 2.0]), angle=30.0)

    p = pipe()
    p.build()
    first = p.run()[0].as_array()
    first += 100  # the caller owns its output: the operator's cache must not change
    second = p.run()[0].as_array()
    p.close()
    s, c = np.float32(np.sin(np.float32(np.pi / 6))), np.float32(np.cos(np.float32(np.pi / 6)))
    assert second.flags.writeable
    np.testing.assert_allclose(second[0], [[c, -s, c * 1 - s * 2], [s, c, s * 1 + c * 2]], rtol=1e-6)


def test_coord_transform_per_sample_and_constant_matrices_agree():
    points = [np.random.default_rng(i).uniform(0, 1, (5 + i, 2)).astype(np.float32) for i in range(3)]
    mt = [1.5, 0.2, 3.0, -0.1, 0.9, 2.0]

    @pipeline_def(batch_size=3, num_threads=1, device_id=None)
    def pipe():
        p = fn.external_source(source=lambda: points)
        per_sample = fn.external_source(source=lambda: [np.array(mt, np.float32)] * 3)
        return fn.coord_transform(p, MT=mt), fn.coord_transform(p, MT=per_sample)

    p = pipe()
    p.build()
    const, per = p.run()
    p.close()
    m = np.array(mt, np.float32).reshape(2, 3)
    for i, pts in enumerate(points):
        expected = (m[:, 0] * pts[:, :1] + m[:, 1] * pts[:, 1:]) + m[:, 2]
        np.testing.assert_array_equal(np.asarray(const.at(i)), expected)
        np.testing.assert_array_equal(np.asarray(per.at(i)), expected)


def _beta(alphas, threads):
    @pipeline_def(batch_size=len(alphas), num_threads=threads, device_id=None, seed=11)
    def pipe():
        a = fn.external_source(source=lambda: [np.float32(v) for v in alphas])
        return fn.random.beta(alpha=a, beta=0.7, shape=[500])

    p = pipe()
    p.build()
    out = [p.run()[0].as_array() for _ in range(2)]
    p.close()
    return out


def test_beta_samples_depend_only_on_their_own_key_and_arguments():
    base = _beta([0.5, 2.0, 8.0, 0.05], threads=1)
    other = _beta([0.5, 3.0, 8.0, 0.05], threads=3)  # sample 1 changes; a different thread split
    for batch_a, batch_b in zip(base, other):
        np.testing.assert_array_equal(batch_a[[0, 2, 3]], batch_b[[0, 2, 3]])
        assert not np.array_equal(batch_a[1], batch_b[1])
    assert not np.array_equal(base[0], base[1])  # each iteration draws anew
    assert np.isfinite(base[0]).all() and ((base[0] >= 0) & (base[0] <= 1)).all()


@pytest.mark.parametrize("dtype", [np.uint8, np.float32, np.int16])
def test_cat_along_channels_equals_concatenate(dtype):
    a = [np.random.default_rng(i).integers(0, 200, (6, 7, 1)).astype(dtype) for i in range(2)]
    b = [np.random.default_rng(9 + i).integers(0, 200, (6, 7, 3)).astype(dtype) for i in range(2)]

    @pipeline_def(batch_size=2, num_threads=2, device_id=None)
    def pipe():
        x = fn.external_source(source=lambda: a, layout="HWC")
        y = fn.external_source(source=lambda: b, layout="HWC")
        return fn.cat(x, y, axis=2), fn.cat(x, axis_name="C"), fn.cat(y, x, y, axis=-1)

    p = pipe()
    p.build()
    two, one, three = p.run()
    p.close()
    for i in range(2):
        np.testing.assert_array_equal(np.asarray(two.at(i)), np.concatenate([a[i], b[i]], 2))
        np.testing.assert_array_equal(np.asarray(one.at(i)), a[i])
        np.testing.assert_array_equal(np.asarray(three.at(i)), np.concatenate([b[i], a[i], b[i]], 2))


def test_arithmetic_on_large_batches_is_split_over_threads_with_the_same_values():
    big = [np.random.default_rng(i).integers(0, 256, (300, 400, 3), dtype=np.uint8) for i in range(4)]  # > 1 MiB

    @pipeline_def(batch_size=4, num_threads=3, device_id=None)
    def pipe():
        x = fn.external_source(source=lambda: big, layout="HWC")
        y = fn.external_source(source=lambda: big[::-1], layout="HWC")
        return x * 2.5 - y, x / (y - y), x + types.Constant(np.array([1, 2, 3], np.uint8))

    p = pipe()
    p.build()
    scaled, divided, shifted = (o.as_array() for o in p.run())
    p.close()
    x, y = np.stack(big).astype(np.float32), np.stack(big[::-1])
    np.testing.assert_array_equal(scaled, x * np.float32(2.5) - y.astype(np.float32))
    with np.errstate(divide="ignore", invalid="ignore"):
        np.testing.assert_array_equal(divided, x / (y - y).astype(np.float32))
    assert shifted.dtype == np.uint8
    np.testing.assert_array_equal(shifted, np.stack(big) + np.array([1, 2, 3], np.uint8))
