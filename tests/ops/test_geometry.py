"""fn.crop, fn.flip, fn.transpose, fn.reshape and the pure crop-window arithmetic.

Expected values marked "DALI 2.4" were produced by running the same inputs through NVIDIA DALI 2.4
(CPU pipelines) and are hard-coded here; the tests do not import DALI.
"""

from __future__ import annotations

import numpy as np
import pytest

from jaxdali import fn, types
from jaxdali.ops.convert import convert
from jaxdali.ops.crop_plan import WindowOutOfBounds, crop_anchor, crop_window, crop_windows
from jaxdali.ops.schema import OpArgumentError
from tests.run_once import fed, run_once


def run_pipe(make, inputs, layout="HWC", num_threads=1, device_id=None, batch_size=None):
    """Feeds ``inputs`` (one batch) through ``make(x)``; returns the outputs as NumPy samples, and their layouts."""
    return run_once(lambda: make(fed(inputs, layout)), batch_size=batch_size or len(inputs), num_threads=num_threads,
                    device_id=device_id, exec_pipelined=False)

def one(make, inputs, layout="HWC", **kw):
    """The first output of ``run_pipe`` as a list of samples."""
    return run_pipe(make, inputs, layout, **kw)[0][0]


def grid(*shape, dtype=np.uint8, start=0):
    return (np.arange(int(np.prod(shape))) + start).astype(dtype).reshape(shape)


# -- the pure window arithmetic ------------------------------------------------------------------------

# (extent, crop, pos, rounding, anchor) -- DALI 2.4
ANCHORS = [
    (10, 5, 0.0, "round", 0),
    (10, 5, 0.25, "round", 1),
    (10, 5, 0.5, "round", 3),      # 2.5 rounds half away from zero
    (10, 5, 0.5, "truncate", 2),
    (10, 5, 0.75, "round", 4),
    (10, 5, 0.75, "truncate", 3),
    (10, 5, 1.0, "round", 5),
    (10, 5, 0.3, "round", 2),      # 1.5 -> 2
    (10, 5, 0.3, "truncate", 1),
    (11, 6, 0.5, "round", 3),
    (5, 8, 0.5, "round", -2),      # window larger than the input: -1.5 rounds away from zero
    (5, 8, 0.5, "truncate", -1),   # and truncates toward zero
    (5, 6, 0.5, "round", -1),
]


@pytest.mark.parametrize("extent,crop,pos,rounding,expected", ANCHORS)
def test_crop_anchor_table(extent, crop, pos, rounding, expected):
    assert int(crop_anchor(pos, extent, crop, rounding)) == expected


def test_crop_anchor_vectorised_matches_scalar():
    pos = np.linspace(0, 1, 101, dtype=np.float32)
    got = crop_anchor(pos, 37, 12, "round")
    assert got.tolist() == [int(crop_anchor(p, 37, 12, "round")) for p in pos]


def test_crop_window_trim_and_error():
    # DALI 2.4: a (8, 3) window at pos_x 0.2 on a 5x5 image, trimmed -> 5x3 at (0, 0)
    assert crop_window((5, 5, 3), "HWC", (None, 8, 3), (0.5, 0.5, 0.2), "round", "trim_to_shape") == \
        ((0, 0, 0), (5, 3, 3))
    assert crop_window((5, 5, 3), "HWC", (None, 8, 8), (0.5, 0.5, 0.5), "round", "pad") == ((-2, -2, 0), (8, 8, 3))
    with pytest.raises(WindowOutOfBounds, match=r"slice_anchor=\{-2 x 1 x 0\}, slice_shape=\{8 x 3 x 3\}"):
        crop_window((5, 5, 3), "HWC", (None, 8, 3), (0.5, 0.5, 0.5), "round", "error")


def test_crop_window_depth_uses_d_then_f_and_is_ignored_otherwise():
    assert crop_window((6, 5, 5, 2), "FHWC", (2, 3, 3), (0.5,) * 3, "round", "error") == ((2, 1, 1, 0), (2, 3, 3, 2))
    assert crop_window((4, 5, 6, 1), "DHWC", (2, 3, 3), (1.0, 0.5, 0.5), "round", "error")[0] == (2, 1, 2, 0)
    assert crop_window((5, 5, 3), "HWC", (2, 3, 3), (0.5,) * 3, "round", "error") == ((1, 1, 0), (3, 3, 3))


def _crop_args(batch_size: int, per_sample: dict, **constants):
    from jaxdali.ops.operator import ArgValues
    from jaxdali.tensors import TensorListCPU

    defaults = dict(crop=None, crop_d=None, crop_h=None, crop_w=None, crop_pos_x=0.5, crop_pos_y=0.5, crop_pos_z=0.5,
                    rounding="round", out_of_bounds_policy="error")
    tensors = {name: TensorListCPU([np.float32(v) for v in values]) for name, values in per_sample.items()}
    return ArgValues("crop", defaults | constants, tensors, batch_size)


def test_crop_windows_of_a_batch_are_each_samples_window():
    gen = np.random.default_rng(3)
    shapes = [(int(h), int(w), 3) for h, w in gen.integers(4, 40, (30, 2))]
    pos_x, crop_h = gen.random(30), gen.integers(1, 50, 30).astype(float) + 0.7
    for policy in ("pad", "trim_to_shape"):
        args = _crop_args(30, {"crop_pos_x": pos_x, "crop_h": crop_h}, crop_w=5.0, out_of_bounds_policy=policy)
        expected = [crop_window(shape, "HWC", (None, int(crop_h[i]), 5), (0.5, 0.5, np.float32(pos_x[i])), "round",
                                policy) for i, shape in enumerate(shapes)]
        assert crop_windows("crop", args, shapes, "HWC") == expected
    args = _crop_args(30, {"crop_pos_x": pos_x, "crop_h": crop_h}, crop_w=5.0)
    first_out = next(i for i, shape in enumerate(shapes) if int(crop_h[i]) > shape[0])
    with pytest.raises(WindowOutOfBounds, match=f"fn.crop: sample {first_out}: Slice can't be placed"):
        crop_windows("crop", args, shapes, "HWC")


@pytest.mark.parametrize("bad, message", [(0.5, "must be >= 1 for sample 1, got 0.5"),
                                          (float("nan"), "must be >= 1 for sample 1, got nan"),
                                          (1e30, "is too large for sample 1")])
def test_per_sample_crop_sizes_are_checked_naming_argument_and_sample(bad, message):
    args = _crop_args(2, {"crop_h": [3.0, bad]}, crop_w=2.0)
    with pytest.raises(ValueError, match=f"fn.crop: argument 'crop_h' {message}"):
        crop_windows("crop", args, [(8, 8, 3), (8, 8, 3)], "HWC")


# -- dtype conversion (shared by crop, cast, crop_mirror_normalize) ---------------------------------------

FLOATS = np.array([-1.5, 300.7, 2.5, 3.5, 2.7, 0.5, 1.5, -0.6, 254.5, 255.5], np.float32)


def test_convert_truncate_saturates_like_dali_crop():
    # DALI 2.4 fn.crop(dtype=UINT8) on float input: clamp, then truncate toward zero
    assert convert(FLOATS, np.uint8, rounding="truncate").tolist() == [0, 255, 2, 3, 2, 0, 1, 0, 254, 255]


# -- fn.crop --------------------------------------------------------------------------------------------


def test_crop_center_hwc_matches_slicing():
    imgs = [grid(40 + i, 50, 3, start=i) for i in range(3)]
    out = one(lambda x: fn.crop(x, crop=(32, 20)), imgs)
    for img, o in zip(imgs, out):
        y0 = int(np.floor((img.shape[0] - 32) / 2 + 0.5))
        np.testing.assert_array_equal(o, img[y0:y0 + 32, 15:35])


def test_crop_chw_right_edge():
    chw = grid(3, 5, 5)
    (o,) = one(lambda x: fn.crop(x, crop=(3, 2), crop_pos_x=1.0), [chw], layout="CHW")
    assert o.shape == (3, 3, 2)
    assert o[0].tolist() == [[8, 9], [13, 14], [18, 19]]  # DALI 2.4


def test_crop_sequence_same_window_every_frame_and_crop_d_on_frames():
    seq = grid(6, 5, 5, 2)
    (o,) = one(lambda x: fn.crop(x, crop=(3, 3)), [seq], layout="FHWC")
    np.testing.assert_array_equal(o, seq[:, 1:4, 1:4])
    (o,) = one(lambda x: fn.crop(x, crop_h=3, crop_w=3, crop_d=2), [seq], layout="FHWC")
    assert o.shape == (2, 3, 3, 2) and o[:, 0, 0, 0].tolist() == [112, 162]  # DALI 2.4: frames 2, 3


def test_crop_volume_dhwc():
    vol = grid(4, 5, 6, 1)
    (o,) = one(lambda x: fn.crop(x, crop=(2, 3, 3), crop_pos_z=1.0), [vol], layout="DHWC")
    assert o.shape == (2, 3, 3, 1) and o[:, 0, 0, 0].tolist() == [68, 98]  # DALI 2.4


def test_crop_three_values_on_hwc_ignore_depth_and_unlabelled_3d_is_hwc():
    x = grid(5, 5, 3, start=1)
    assert one(lambda x: fn.crop(x, crop=(2, 3, 3)), [x])[0].shape == (3, 3, 3)
    assert one(lambda x: fn.crop(x, crop=(3, 3)), [x], layout="")[0].shape == (3, 3, 3)


def test_crop_without_window_arguments_is_identity():
    x = grid(5, 4, 3)
    np.testing.assert_array_equal(one(lambda x: fn.crop(x), [x])[0], x)


def test_crop_fractional_sizes_truncate():
    x = grid(5, 5, 3)
    assert one(lambda x: fn.crop(x, crop=(3.5, 1.5)), [x])[0].shape == (3, 1, 3)
    assert one(lambda x: fn.crop(x, crop_h=2.6, crop_w=2.4), [x])[0].shape == (2, 2, 3)


PAD_ROUND = [[0] * 8, [0] * 8, [0, 0, 1, 4, 7, 10, 13, 0], [0, 0, 16, 19, 22, 25, 28, 0],
             [0, 0, 31, 34, 37, 40, 43, 0], [0, 0, 46, 49, 52, 55, 58, 0], [0, 0, 61, 64, 67, 70, 73, 0], [0] * 8]
PAD_TRUNC = [[0] * 8, [0, 1, 4, 7, 10, 13, 0, 0], [0, 16, 19, 22, 25, 28, 0, 0], [0, 31, 34, 37, 40, 43, 0, 0],
             [0, 46, 49, 52, 55, 58, 0, 0], [0, 61, 64, 67, 70, 73, 0, 0], [0] * 8, [0] * 8]


@pytest.mark.parametrize("rounding,expected", [("round", PAD_ROUND), ("truncate", PAD_TRUNC)])
def test_crop_pad_policy_matches_dali(rounding, expected):
    x = grid(5, 5, 3, start=1)
    (o,) = one(lambda x: fn.crop(x, crop=(8, 8), out_of_bounds_policy="pad", rounding=rounding), [x])
    assert o[:, :, 0].tolist() == expected  # DALI 2.4


def test_crop_pad_fill_values_per_channel_and_broadcast():
    x = grid(5, 5, 3, start=1)
    (o,) = one(lambda x: fn.crop(x, crop=(8, 8), out_of_bounds_policy="pad", fill_values=[7, 8, 9]), [x])
    assert o[0, 0].tolist() == [7, 8, 9] and o[2, 2].tolist() == [1, 2, 3]
    (o,) = one(lambda x: fn.crop(x, crop=(8, 8), out_of_bounds_policy="pad", fill_values=[7]), [x])
    assert o[0, 0].tolist() == [7, 7, 7]
    (o,) = one(lambda x: fn.crop(x, crop=(8, 8), out_of_bounds_policy="pad", fill_values=[1, 2, 3]), [grid(3, 5, 5)],
               layout="CHW")
    assert o[:, 0, 0].tolist() == [1, 2, 3]


def test_crop_pad_fill_value_count_must_match_channels():
    with pytest.raises(ValueError, match="'fill_values' has 2 values but the output has 3 channels"):
        one(lambda x: fn.crop(x, crop=(8, 8), out_of_bounds_policy="pad", fill_values=[7, 8]), [grid(5, 5, 3)])


def test_crop_trim_to_shape():
    x = grid(5, 5, 3, start=1)
    (o,) = one(lambda x: fn.crop(x, crop=(8, 3), out_of_bounds_policy="trim_to_shape", crop_pos_x=0.2), [x])
    np.testing.assert_array_equal(o, x[:, 0:3])  # DALI 2.4


def test_crop_out_of_bounds_error_names_the_sample():
    imgs = [grid(9, 9, 3), grid(5, 5, 3)]
    with pytest.raises(ValueError, match=r"fn.crop: sample 1: Slice can't be placed out of bounds.*"
                                         r"input_shape=\{5 x 5 x 3\}, slice_anchor=\{-2 x 1 x 0\}"):
        one(lambda x: fn.crop(x, crop=(8, 3)), imgs)


def test_crop_dtype_conversion():
    f = FLOATS.reshape(1, 10, 1)
    (o,) = one(lambda x: fn.crop(x, crop=(1, 10), dtype=types.UINT8), [f])
    assert o.dtype == np.uint8 and o.ravel().tolist() == [0, 255, 2, 3, 2, 0, 1, 0, 254, 255]  # DALI 2.4
    (o,) = one(lambda x: fn.crop(x, crop=(2, 2), dtype=types.FLOAT), [grid(5, 5, 3)])
    assert o.dtype == np.float32
    (o,) = one(lambda x: fn.crop(x, crop=(1, 10), dtype=types.FLOAT16), [f])
    assert o.dtype == np.float16
    (o,) = one(lambda x: fn.crop(x, crop=(1, 10), output_dtype=types.FLOAT16), [f])
    assert o.dtype == np.float16


def test_crop_per_sample_positions_and_sizes():
    imgs = [grid(20, 30, 3, start=i) for i in range(4)]

    def make(x):
        px = fn.random.uniform(range=(0, 1))
        h = fn.random.uniform(values=[4.0, 6.0, 8.0])
        return fn.crop(x, crop_h=h, crop_w=5, crop_pos_x=px, crop_pos_y=0.0), px, h

    (out, px, h), _ = run_pipe(make, imgs)
    for img, o, p, hh in zip(imgs, out, px, h):
        x0 = int(crop_anchor(p, 30, 5, "round"))
        np.testing.assert_array_equal(o, img[0:int(hh), x0:x0 + 5])


def test_crop_per_sample_position_out_of_range_is_an_error():
    with pytest.raises(ValueError, match=r"crop_pos_x=1.5 for sample 0 is out of range \[0.0, 1.0\]"):
        one(lambda x: fn.crop(x, crop=(2, 2), crop_pos_x=fn.random.uniform(range=(1.5, 1.5))), [grid(5, 5, 3)])


@pytest.mark.parametrize("kwargs,message", [
    (dict(crop=(3, 3), crop_h=2), "'crop' cannot be given together with 'crop_h'"),
    (dict(crop_h=2), "`crop_w` and `crop_h` arguments must be provided together"),
    (dict(crop_w=2), "`crop_w` and `crop_h` arguments must be provided together"),
    (dict(crop_d=2), "`crop_d` argument must be provided together with `crop_w` and `crop_h`"),
    (dict(crop=(2,)), "`crop` argument should have 2 or 3 elements"),
    (dict(crop=(3, 3), crop_pos_x=1.5), "argument 'crop_pos_x' must be <= 1, got 1.5"),
    (dict(crop=(3, 3), rounding="floor"), "argument 'rounding' must be one of"),
    (dict(crop=(3, 3), dtype=types.INT16), "argument 'dtype' must be one of"),
    (dict(crop=(3, 3), bogus=1), "fn.crop: unknown argument 'bogus'"),
])
def test_crop_argument_errors(kwargs, message):
    with pytest.raises(OpArgumentError, match=message):
        one(lambda x: fn.crop(x, **kwargs), [grid(5, 5, 3)])


def test_crop_rejects_layouts_without_channels():
    with pytest.raises(ValueError, match='The layout "HW" does not match any of the allowed layouts'):
        one(lambda x: fn.crop(x, crop=(3, 3)), [grid(5, 5)], layout="HW")


# -- fn.flip ---------------------------------------------------------------------------------------------


def test_flip_defaults_to_horizontal():
    x = grid(2, 3, 2)
    (o,) = one(lambda x: fn.flip(x), [x])
    assert o[:, :, 0].tolist() == [[4, 2, 0], [10, 8, 6]]  # DALI 2.4


@pytest.mark.parametrize("layout,shape,kwargs,flipped_axes", [
    ("HWC", (2, 3, 2), dict(horizontal=0, vertical=1), (0,)),
    ("HWC", (2, 3, 2), dict(horizontal=1, vertical=1), (0, 1)),
    ("HWC", (2, 3, 2), dict(horizontal=2), (1,)),          # any non-zero value flips
    ("HWC", (2, 3, 2), dict(horizontal=-1), (1,)),
    ("CHW", (2, 3, 4), dict(), (2,)),
    ("DHWC", (2, 2, 2, 1), dict(horizontal=0, depthwise=1), (0,)),
    ("FHWC", (2, 2, 2, 1), dict(horizontal=0, depthwise=1), ()),   # no D axis: nothing to flip
    ("FHWC", (3, 2, 4, 1), dict(), (2,)),                  # every frame alike
    ("FCHW", (3, 1, 2, 4), dict(vertical=1, horizontal=0), (2,)),
])
def test_flip_table(layout, shape, kwargs, flipped_axes):
    x = grid(*shape)
    (o,) = one(lambda n: fn.flip(n, **kwargs), [x], layout=layout)
    np.testing.assert_array_equal(o, np.flip(x, flipped_axes) if flipped_axes else x)


def test_flip_per_sample_argument_and_ragged_batch():
    imgs = [grid(3, 4 + i, 3, start=i) for i in range(4)]
    (out, coin), _ = run_pipe(lambda x: (fn.flip(x, horizontal=(coin := fn.random.coin_flip())), coin), imgs)
    assert set(np.asarray(coin).ravel().tolist()) == {0, 1}  # seed 7 draws both values
    for img, o, c in zip(imgs, out, coin):
        np.testing.assert_array_equal(o, img[:, ::-1] if c else img)


def test_flip_rejects_2d_data():
    with pytest.raises(ValueError, match="The number of dimensions 2 does not match any of the allowed layouts"):
        one(lambda x: fn.flip(x), [grid(3, 4)], layout="")


# -- fn.transpose -------------------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs,layout,expected_layout", [
    (dict(perm=[2, 0, 1]), "HWC", "CHW"),
    (dict(perm=[2, 0, 1], transpose_layout=False), "HWC", "HWC"),
    (dict(perm=[2, 0, 1], output_layout="ABC"), "HWC", "ABC"),
    (dict(perm=[2, 0, 1]), "", ""),
])
def test_transpose_layouts(kwargs, layout, expected_layout):
    x = grid(2, 3, 4)
    (out,), (got_layout,) = run_pipe(lambda n: fn.transpose(n, **kwargs), [x], layout=layout)
    np.testing.assert_array_equal(out[0], x.transpose(2, 0, 1))
    assert got_layout == expected_layout


def test_transpose_without_perm_reverses_axes():
    x = grid(2, 3, 4)
    np.testing.assert_array_equal(one(lambda n: fn.transpose(n), [x], layout="")[0], x.transpose())


def test_transpose_sequence_to_cfhw():
    seq = grid(2, 3, 4, 3)
    (out,), (layout,) = run_pipe(lambda n: fn.transpose(n, perm=[3, 0, 1, 2]), [seq, seq + 1], layout="FHWC")
    assert layout == "CFHW" and out[1].shape == (3, 2, 3, 4)
    np.testing.assert_array_equal(out[1], (seq + 1).transpose(3, 0, 1, 2))


@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.float32, np.float64, np.int64, np.float16, np.bool_])
@pytest.mark.parametrize("channels", [1, 3, 4])
def test_transpose_hwc_to_chw_of_every_type_and_channel_count(dtype, channels):
    """HWC -> CHW goes plane by plane through OpenCV for its types (the others, one channel and the
    strided sample of the second batch through NumPy): the same values either way."""
    x = grid(5, 7, channels, dtype=np.float64, start=-20).astype(dtype)
    strided = grid(5, 14, channels, dtype=np.float64).astype(dtype)[:, ::2]
    for batch in ([x, x[::-1].copy()], [x, strided]):
        out = one(lambda n: fn.transpose(n, perm=[2, 0, 1]), batch, num_threads=2)
        for got, sample in zip(out, batch):
            assert got.dtype == sample.dtype
            np.testing.assert_array_equal(got, sample.transpose(2, 0, 1))


@pytest.mark.parametrize("perm", [[2, 0, 0], [3, 0, 1]])
def test_transpose_invalid_permutation(perm):
    with pytest.raises(OpArgumentError, match="Invalid permutation"):
        one(lambda n: fn.transpose(n, perm=perm), [grid(2, 3, 4)])


def test_transpose_permutation_of_wrong_length():
    with pytest.raises(ValueError, match=r"perm \[1, 0\] has 2 entries for samples with 3 dimensions"):
        one(lambda n: fn.transpose(n, perm=[1, 0]), [grid(2, 3, 4)])


# -- fn.reshape ---------------------------------------------------------------------------------------

MNIST = grid(28, 28, 1)


@pytest.mark.parametrize("kwargs,shape,layout", [
    (dict(shape=[784]), (784,), ""),
    (dict(shape=[-1]), (784,), ""),
    (dict(shape=[-1, 28]), (28, 28), ""),
    (dict(shape=[28, 28, 1]), (28, 28, 1), "HWC"),          # same rank keeps the layout
    (dict(shape=[28, 28, 1], layout="ABC"), (28, 28, 1), "ABC"),
    (dict(layout="XYZ"), (28, 28, 1), "XYZ"),
    (dict(rel_shape=[0.5, 2, 1]), (14, 56, 1), "HWC"),
    (dict(rel_shape=[0.5, 2]), (14, 56), ""),
    (dict(rel_shape=[-1, 2]), (14, 56), ""),
    (dict(rel_shape=[0.3, -1]), (8, 98), ""),                # 8.4 rounds to 8
])
def test_reshape_table(kwargs, shape, layout):  # DALI 2.4
    (out,), (got_layout,) = run_pipe(lambda n: fn.reshape(n, **kwargs), [MNIST])
    assert out[0].shape == shape and got_layout == layout
    np.testing.assert_array_equal(out[0].ravel(), MNIST.ravel())


@pytest.mark.parametrize("kwargs,message", [
    (dict(shape=[785]), r"sample 0 has 784 elements \(shape \(28, 28, 1\)\) but the requested shape \(785,\)"),
    (dict(shape=[-1, -1]), "only one extent may be -1"),
    (dict(shape=[-1, 5]), "cannot fill the shape"),
    (dict(shape=[0, -1]), "Extent of 0 is illegal"),
    (dict(rel_shape=[0.32, -1]), "cannot fill the shape"),   # 8.96 rounds to 9, which does not divide 784
    (dict(rel_shape=[1, 1, 1, 1]), r"`rel_shape` has more elements \(4\) than there are dimensions"),
    (dict(shape=[28, 28], layout="ABC"), "Requested layout 'ABC' is not compatible with a 2D shape"),
])
def test_reshape_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        one(lambda n: fn.reshape(n, **kwargs), [MNIST])


@pytest.mark.parametrize("kwargs,message", [
    (dict(), "is no-op: arguments specify neither new shape nor layout"),
    (dict(shape=[784], rel_shape=[1, 1, 1]), "mutually exclusive"),
    (dict(src_dims=[1, 0, 2]), "argument 'src_dims' is not supported"),
])
def test_reshape_argument_errors(kwargs, message):
    with pytest.raises(OpArgumentError, match=message):
        one(lambda n: fn.reshape(n, **kwargs), [MNIST])


def test_reshape_ragged_batch_and_shape_input():
    a, b = grid(4, 6, 2), grid(3, 4, 1)
    out = one(lambda n: fn.reshape(n, shape=[12, -1]), [a, b])
    assert [o.shape for o in out] == [(12, 4), (12, 1)]  # DALI 2.4
    shapes = [np.array([2, -1], np.int32), np.array([-1, 3], np.int32)]

    def make(n):
        s = fn.external_source(source=lambda: shapes)
        return fn.reshape(n, s)

    out = one(make, [a, a])
    assert [o.shape for o in out] == [(2, 24), (16, 3)]


def test_reshape_per_sample_shape_argument():
    x = grid(4, 6, 2)
    shapes = [np.array([48], np.int32), np.array([6, 8], np.int32)]
    with pytest.raises(ValueError, match="same number of dimensions"):
        one(lambda n: fn.reshape(n, shape=fn.external_source(source=lambda: shapes)), [x, x])
    shapes[1] = np.array([-1], np.int32)
    assert [o.shape for o in one(lambda n: fn.reshape(n, shape=fn.external_source(source=lambda: shapes)), [x, x])] \
        == [(48,), (48,)]


# -- contracts shared by the operators ------------------------------------------------------------------

CONTRACT_OPS = {
    "crop": lambda x: fn.crop(x, crop=(6, 7), crop_pos_x=fn.random.uniform(range=(0, 1))),
    "crop_pad": lambda x: fn.crop(x, crop=(30, 9), out_of_bounds_policy="pad", fill_values=[1, 2, 3]),
    "flip": lambda x: fn.flip(x, horizontal=fn.random.coin_flip(), vertical=1),
    "transpose": lambda x: fn.transpose(x, perm=[2, 0, 1]),
    "reshape": lambda x: fn.reshape(x, shape=[-1]),
}


@pytest.mark.parametrize("name", sorted(CONTRACT_OPS))
def test_same_output_with_one_or_two_threads(name):
    imgs = [np.random.default_rng(i).integers(0, 256, (20, 24, 3), dtype=np.uint8) for i in range(5)]
    a = one(CONTRACT_OPS[name], imgs, num_threads=1)
    b = one(CONTRACT_OPS[name], imgs, num_threads=2)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("name", sorted(CONTRACT_OPS))
def test_batch_of_one(name):
    img = np.random.default_rng(0).integers(0, 256, (20, 24, 3), dtype=np.uint8)
    assert len(one(CONTRACT_OPS[name], [img])) == 1
