"""Tests of fn.resize_crop_mirror, fn.fast_resize_crop_mirror and fn.experimental.resize (DALI is not needed;
the differential tests against DALI are in tests/differential/test_ops_geo.py)."""

from __future__ import annotations

import numpy as np
import pytest

from jaxdali import fn, types
from tests.ops.test_resize import run

rng = np.random.default_rng(5)
IMAGES = [rng.integers(0, 256, (24, 32, 3), dtype=np.uint8), rng.integers(0, 256, (30, 21, 3), dtype=np.uint8)]


def _samples(out) -> list[np.ndarray]:
    return [np.asarray(out.at(i)) for i in range(len(out))]


@pytest.mark.parametrize("op", ["resize_crop_mirror", "fast_resize_crop_mirror"])
def test_nearest_neighbour_upscale_by_two_is_resize_then_crop_then_flip(op):
    # Doubling with NN repeats every pixel: the fused operator must give exactly resize + crop + flip.
    def graph(x):
        fused = getattr(fn, op)(x, size=[48, 64], interp_type=types.INTERP_NN, crop=(20, 30), crop_pos_x=0.25,
                                crop_pos_y=0.75, mirror=3)
        staged = fn.flip(fn.crop(fn.resize(x, size=[48, 64], interp_type=types.INTERP_NN), crop=(20, 30),
                                 crop_pos_x=0.25, crop_pos_y=0.75), horizontal=1, vertical=1)
        return fused, staged

    fused, staged = run(graph, IMAGES[:1])
    np.testing.assert_array_equal(_samples(fused)[0], _samples(staged)[0])


@pytest.mark.parametrize("layout,batch", [("FHWC", [np.stack(IMAGES[:1] * 3)]), ("DHWC", [np.stack(IMAGES[:1] * 4)])])
def test_mirror_flips_the_spatial_axes_of_sequences_and_volumes(layout, batch):
    mirror_bits = {"W": 1, "H": 2, "D": 4}

    def graph(x):
        return tuple(fn.resize_crop_mirror(x, resize_x=20, resize_y=15, crop=(10, 12), mirror=m) for m in (0, 1, 2, 4))

    plain, *mirrored = [_samples(o)[0] for o in run(graph, batch, layout=layout)]
    for (letter, bit), out in zip(mirror_bits.items(), mirrored):
        if letter in layout:
            np.testing.assert_array_equal(out, np.flip(plain, layout.index(letter)))
        else:
            np.testing.assert_array_equal(out, plain)


def test_a_window_past_the_resized_image_repeats_its_edges():
    flat = [np.full((10, 10, 3), 200, np.uint8)]
    (out,) = run(lambda x: (fn.resize_crop_mirror(x, size=[8, 8], crop=(16, 16)),), flat)
    assert _samples(out)[0].shape == (16, 16, 3)
    assert (_samples(out)[0] == 200).all()


def test_fast_variant_does_not_antialias_by_default():
    def graph(x):
        return (fn.fast_resize_crop_mirror(x, size=[6, 8], crop=(4, 4)),
                fn.resize_crop_mirror(x, size=[6, 8], crop=(4, 4), antialias=False),
                fn.resize_crop_mirror(x, size=[6, 8], crop=(4, 4)))

    fast, plain, antialiased = [_samples(o)[0] for o in run(graph, IMAGES[:1])]
    np.testing.assert_array_equal(fast, plain)
    assert (fast != antialiased).any()


def test_experimental_resize_equals_resize():
    def graph(x):
        return (fn.experimental.resize(x, resize_shorter=17, save_attrs=True),
                fn.resize(x, resize_shorter=17, save_attrs=True))

    a, a_attrs, b, b_attrs = run(lambda x: tuple(o for pair in graph(x) for o in pair), IMAGES)
    for x, y in zip(_samples(a) + _samples(a_attrs), _samples(b) + _samples(b_attrs)):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("kwargs,message", [
    ({"crop": (4, 4)}, "fn.resize_crop_mirror: exactly one way of specifying the size"),
    ({"size": [8, 8], "resize_shorter": 8}, "fn.resize_crop_mirror: exactly one way of specifying the size"),
    ({"size": [8, 8], "crop": (4, 4), "crop_h": 4}, "fn.resize_crop_mirror: argument 'crop' cannot be given"),
    ({"size": [8, 8], "crop_h": 4}, "fn.resize_crop_mirror: `crop_w` and `crop_h`"),
    ({"size": [8, 8], "crop": (4, 4), "crop_pos_x": 1.5}, "fn.resize_crop_mirror: argument 'crop_pos_x' must be <= 1"),
    ({"size": [8, 8], "mirror": 8}, "fn.resize_crop_mirror: argument 'mirror' must be <= 7"),
    ({"size": [8, 8], "crop": (4, 0)}, "fn.resize_crop_mirror: argument 'crop' must hold sizes >= 1"),
    ({"size": [8, 8], "out_of_bounds_policy": "pad"}, "fn.resize_crop_mirror.*out_of_bounds_policy"),
])
def test_bad_arguments_name_the_operator_and_the_argument(kwargs, message):
    with pytest.raises((ValueError, TypeError), match=message):
        run(lambda x: (fn.resize_crop_mirror(x, **kwargs),), IMAGES)


def test_per_sample_crop_position_out_of_range_is_an_error():
    pos = [np.float32(0.5), np.float32(-0.5)]
    with pytest.raises(ValueError, match=r"fn.resize_crop_mirror: crop_pos_x=-0.5 for sample 1 is out of range"):
        run(lambda x, p: (fn.resize_crop_mirror(x, size=[8, 8], crop=(4, 4), crop_pos_x=p),), IMAGES, pos)


# -- tensor_resize ---------------------------------------------------------------------------------------------


def test_tensor_resize_of_the_image_axes_equals_resize():
    def graph(x):
        return (fn.tensor_resize(x, sizes=[17, 11], axis_names="HW"), fn.resize(x, size=[17, 11]),
                fn.tensor_resize(x, scales=[0.5, 2.0], axes=[0, 1]), fn.resize(x, size=[12, 64]))

    a, b, c, d = run(graph, IMAGES[:1])
    np.testing.assert_array_equal(_samples(a)[0], _samples(b)[0])
    np.testing.assert_array_equal(_samples(c)[0], _samples(d)[0])


def test_tensor_resize_nearest_neighbour_doubling_repeats_elements():
    x = [np.arange(12, dtype=np.float32).reshape(3, 4)]
    (out,) = run(lambda s: (fn.tensor_resize(s, scales=[2.0, 2.0], interp_type=types.INTERP_NN),), x, layout="")
    np.testing.assert_array_equal(_samples(out)[0], np.repeat(np.repeat(x[0], 2, 0), 2, 1))


@pytest.mark.parametrize("kwargs,message", [
    ({}, "fn.tensor_resize: exactly one of the arguments 'sizes' and 'scales'"),
    ({"sizes": [4, 4, 3], "scales": [1, 1, 1]}, "fn.tensor_resize: exactly one of the arguments"),
    ({"sizes": [4], "axes": [0], "axis_names": "H"}, "fn.tensor_resize: arguments 'axes' and 'axis_names'"),
    ({"sizes": [4], "axes": [3]}, r"fn.tensor_resize: argument 'axes' holds 3, outside \[-3, 2\]"),
    ({"sizes": [4], "axis_names": "D"}, "fn.tensor_resize: argument 'axis_names' = 'D' names axes"),
    ({"sizes": [4, 5], "axes": [0]}, "fn.tensor_resize: argument 'sizes' expects either a single value or a list of 1"),
    ({"scales": [-1.0], "axes": [0]}, "fn.tensor_resize: argument 'scales' must hold positive values"),
    ({"sizes": [4], "axes": [0], "roi_start": [1]}, "fn.tensor_resize: arguments 'roi_start' and 'roi_end'"),
    ({"sizes": [4], "axes": [0], "size_rounding": "floor"}, "fn.tensor_resize: argument 'size_rounding' must be"),
])
def test_tensor_resize_bad_arguments_name_the_operator_and_the_argument(kwargs, message):
    with pytest.raises((ValueError, TypeError), match=message):
        run(lambda x: (fn.tensor_resize(x, **kwargs),), IMAGES)
