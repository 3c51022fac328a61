"""Differential tests of the geometry operators of issue 22 against NVIDIA DALI 2.4 (CPU pipelines).

Resizing operators share ``fn.resize``'s filters, whose uint8 output is within +-1 of DALI's (the
rounding of the filter weights, see ``fn.resize``): they are compared with that tolerance and a bound
on the share of pixels that differ at all. Box geometry is compared within float32 rounding. Random
operators draw from another generator than DALI's: where the draw is determined the values are
compared, elsewhere the frequencies of the outcomes.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("nvidia.dali")

from tests.differential.twin import assert_same, photos, run, run_both  # noqa: E402

#: DALI warns that fast_resize_crop_mirror and ssd_random_crop are deprecated.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

COVERED_OPERATORS = ("resize_crop_mirror", "fast_resize_crop_mirror", "experimental.resize", "tensor_resize",
                     "bbox_rotate", "segmentation.random_object_bbox", "ssd_random_crop")


@pytest.fixture(scope="module")
def images() -> list[np.ndarray]:
    """Four real photos, one of them of another size (40 x 57)."""
    batch = photos(4, (48, 64))
    batch[1] = np.ascontiguousarray(batch[1][:40, :57])
    return batch


def assert_resized_close(ours: list, theirs: list, max_share: float = 0.1) -> None:
    """Same shapes and types, values within 1, and at most ``max_share`` of them off by one."""
    assert_same(ours, theirs, atol=1)
    for a_out, b_out in zip(ours, theirs):
        for a, b in zip(a_out, b_out):
            assert np.mean(a != b) <= max_share


RCM_CASES = {
    "shorter_crop_x": dict(resize_shorter=37, crop=(30, 33), crop_pos_x=0.3),
    "upscale_mirror_h": dict(size=[70, 90], crop=(50, 61), mirror=1, crop_pos_y=0.77),
    "crop_hw_mirror_both": dict(size=[30, 25], crop_h=20, crop_w=20, mirror=3),
    "resize_x_truncate": dict(resize_x=100, crop=(40, 70), mirror=1, rounding="truncate", crop_pos_x=0.33),
    "crop_larger_than_resized": dict(size=[20, 20], crop=(30, 30)),
    "no_crop": dict(resize_y=30, mirror=2),
    "cubic_float": dict(size=[33, 41], crop=(21, 17), interp_type=3, dtype="FLOAT"),
}


@pytest.mark.parametrize("op", ["resize_crop_mirror", "fast_resize_crop_mirror"])
@pytest.mark.parametrize("case", sorted(RCM_CASES))
def test_resize_crop_mirror_matches_dali(images, op, case):
    kwargs = dict(RCM_CASES[case])

    def body(fn, types, x):
        dtype = {"dtype": getattr(types, kwargs["dtype"])} if "dtype" in kwargs else {}
        return getattr(fn, op)(x, **{**kwargs, **dtype})

    ours, theirs = run_both(body, [(images, "HWC")])
    if "dtype" in kwargs:  # float output of the cubic filter: DALI's weights are quantised, ours are not
        assert_same(ours, theirs, atol=0.1)
    else:
        assert_resized_close(ours, theirs)


def test_resize_crop_mirror_nearest_neighbour_is_exact(images):
    # NN picks whole pixels: away from positions exactly between two pixels (none in these windows; see
    # the module notes of jaxdali.ops.resize_crop_mirror) the outputs are equal.
    for mirror in range(4):
        body = lambda fn, types, x: fn.resize_crop_mirror(x, size=[31, 43], interp_type=0, crop=(11, 13),  # noqa: E731
                                                          mirror=mirror, crop_pos_x=0.3)
        ours, theirs = run_both(body, [(images, "HWC")])
        assert_same(ours, theirs, what=f"mirror={mirror}")


def test_resize_crop_mirror_per_sample_arguments_match_dali(images):
    mirror = [np.int32(v) for v in (0, 1, 2, 3)]
    pos = [np.float32(v) for v in (0.0, 0.25, 0.6, 1.0)]
    crop_w = [np.float32(v) for v in (10, 20, 30, 33)]

    def body(fn, types, x, m, p, w):
        return fn.resize_crop_mirror(x, resize_shorter=36, crop_h=25, crop_w=w, crop_pos_x=p, mirror=m)

    ours, theirs = run_both(body, [(images, "HWC"), mirror, pos, crop_w])
    assert_resized_close(ours, theirs)


def test_resize_crop_mirror_on_sequences_matches_dali(images):
    frames = [np.stack([images[0], images[2], images[3]]), np.stack([images[3], images[0]])]
    # A third crop value does not crop frames. (DALI 2.4 applies `mirror` to the wrong axes of sequences -- bit 1
    # flips H, bits 2 and 4 do nothing --, so mirrored sequences are checked against flip in tests/ops.)
    body = lambda fn, types, x: fn.resize_crop_mirror(x, size=[30, 40], crop=(2, 20, 25))  # noqa: E731
    ours, theirs = run_both(body, [(frames, "FHWC")])
    assert ours[0][0].shape == (3, 20, 25, 3)
    assert_resized_close(ours, theirs)


@pytest.mark.parametrize("kwargs", [dict(size=[6, 30, 40], crop=(4, 20, 25), mirror=4),
                                    dict(size=[6, 30, 40], crop=(4, 20, 25), mirror=1),
                                    dict(resize_x=30, crop=(5, 10, 12), crop_pos_z=0.2)])
def test_resize_crop_mirror_on_volumes_matches_dali(images, kwargs):
    volume = [np.stack([images[0], images[2], images[3]] * 2 + [images[0], images[2]])]  # 8 x 48 x 64
    ours, theirs = run_both(lambda fn, types, x: fn.resize_crop_mirror(x, **kwargs), [(volume, "DHWC")])
    assert_resized_close(ours, theirs)


@pytest.mark.parametrize("kwargs", [dict(size=[30, 40]), dict(resize_shorter=20, save_attrs=True),
                                    dict(resize_x=50, interp_type=3, antialias=False)])
def test_experimental_resize_gives_dalis_resize(images, kwargs):
    # DALI runs experimental.resize on the GPU only: its CPU fn.resize is the reference.
    ours = run("jaxdali", lambda fn, types, x: fn.experimental.resize(x, **kwargs), [(images, "HWC")])
    theirs = run("dali", lambda fn, types, x: fn.resize(x, **kwargs), [(images, "HWC")])
    assert_resized_close(ours, theirs)


# -- tensor_resize -----------------------------------------------------------------------------------------

_rng = np.random.default_rng(0)
FLOATS = [_rng.random((12, 16, 3), dtype=np.float32) * 255, _rng.random((10, 13, 3), dtype=np.float32) * 255]

TENSOR_RESIZE_CASES = {
    "sizes_of_two_axes": dict(sizes=[6, 9], axes=[0, 1]),
    "sizes_of_every_axis": dict(sizes=[6, 9, 3]),
    "scales": dict(scales=[0.5, 1.5], axes=[0, 1]),
    "scales_aligned_to_the_ends": dict(scales=[0.7, 1.3], axes=[0, 1], alignment=[0.0, 1.0]),
    "scales_truncated": dict(scales=[0.7], axes=[1], size_rounding="truncate", alignment=0.2),
    "scales_ceil": dict(scales=[0.7], axes=[1], size_rounding="ceil"),
    "missing_size_takes_the_mean_scale": dict(sizes=[3, 0], axes=[0, 1]),
    "not_larger_scales_the_channels_too": dict(sizes=[5, 7], axes=[0, 1], mode="not_larger"),
    "fractional_sizes": dict(sizes=[5.5, 7.3], axes=[0, 1]),
    "axis_names_and_roi": dict(sizes=[8, 10], axis_names="HW", roi_start=[2, 3], roi_end=[10, 12]),
    "negative_axis_cubic": dict(sizes=[8], axes=[-2], interp_type=3),
    "max_size": dict(sizes=[6, 9], axes=[0, 1], max_size=[5, 100]),
}


@pytest.mark.parametrize("case", sorted(TENSOR_RESIZE_CASES))
def test_tensor_resize_matches_dali_on_float_tensors(case):
    kwargs = TENSOR_RESIZE_CASES[case]
    ours, theirs = run_both(lambda fn, types, x: fn.tensor_resize(x, **kwargs), [(FLOATS, "HWC")])
    # float32 sums of the same weights in another order; the cubic weights are quantised in DALI
    assert_same(ours, theirs, atol=0.05 if kwargs.get("interp_type") else 1e-3)


@pytest.mark.parametrize("kwargs", [dict(sizes=[30, 40], axes=[0, 1]), dict(scales=[0.6, 0.45], axes=[0, 1])])
def test_tensor_resize_matches_dali_on_photos(images, kwargs):
    ours, theirs = run_both(lambda fn, types, x: fn.tensor_resize(x, **kwargs), [(images, "HWC")])
    assert_resized_close(ours, theirs)


@pytest.mark.parametrize("shapes,sizes", [([(20,), (13,)], [7]), ([(4, 5, 6)], [3, 7, 2])])
def test_tensor_resize_matches_dali_without_a_layout(shapes, sizes):
    batch = [_rng.random(s, dtype=np.float32) for s in shapes]
    ours, theirs = run_both(lambda fn, types, x: fn.tensor_resize(x, sizes=sizes), [batch])
    assert_same(ours, theirs, atol=1e-5)


# -- bbox_rotate ---------------------------------------------------------------------------------------------

BOXES = [np.array([[0.1, 0.2, 0.4, 0.5], [0.6, 0.1, 0.9, 0.3], [0.0, 0.0, 1.0, 1.0], [0.8, 0.8, 0.99, 0.95]], np.float32),
         np.array([[0.3, 0.3, 0.35, 0.6]], np.float32), np.zeros((0, 4), np.float32)]
LABELS = [np.array([1, 2, 3, 4], np.int32), np.array([7], np.int32), np.zeros(0, np.int32)]

BBOX_ROTATE_CASES = {
    **{f"expand_{a:g}": dict(angle=a) for a in (30.0, -75.0, 90.0, 180.0, 45.0, 12.5)},
    **{f"{mode}_{a:g}": dict(angle=a, mode=mode) for mode in ("fixed", "halfway") for a in (30.0, -50.0, 120.0)},
    "keep_size": dict(angle=30.0, keep_size=True),
    "keep_size_halfway": dict(angle=-50.0, keep_size=True, mode="halfway"),
    "size": dict(angle=30.0, size=[150, 150]),
    "shape_layout": dict(angle=30.0, input_shape=[3, 100, 200], shape_layout="CHW"),
    "xyWH": dict(angle=30.0, bbox_layout="xyWH"),
}


@pytest.mark.parametrize("case", sorted(BBOX_ROTATE_CASES))
def test_bbox_rotate_matches_dali(case):
    kwargs = {"input_shape": [100, 200], **BBOX_ROTATE_CASES[case]}
    ours, theirs = run_both(lambda fn, types, b: fn.bbox_rotate(b, **kwargs), [BOXES])
    assert_same(ours, theirs, atol=2e-6)  # float32 arithmetic in another order


@pytest.mark.parametrize("threshold", [0.1, 0.5])
@pytest.mark.parametrize("column", [False, True])
def test_bbox_rotate_removes_boxes_and_labels_like_dali(threshold, column):
    labels = [x[:, None] for x in LABELS] if column else LABELS
    ours, theirs = run_both(lambda fn, types, b, l: fn.bbox_rotate(
        b, l, angle=30.0, input_shape=[100, 200], keep_size=True, remove_threshold=threshold), [BOXES, labels])
    assert_same(ours, theirs, atol=2e-6)
    assert len(ours[0][0]) == (2 if threshold == 0.5 else 4)


def test_bbox_rotate_in_pixels_with_per_sample_arguments_matches_dali():
    angles = [np.float32(a) for a in (-50.0, 20.0, 100.0)]
    shapes = [np.array(s, np.int64) for s in ((100, 200, 3), (64, 48, 3), (30, 90, 3))]

    def body(fn, types, b, a, s):
        return fn.bbox_rotate(b, angle=a, input_shape=s, shape_layout="HWC", bbox_normalized=False, mode="halfway")

    ours, theirs = run_both(body, [[x * 40 for x in BOXES], angles, shapes])
    assert_same(ours, theirs, atol=2e-5)  # pixel coordinates: float32 rounding of values up to ~200


# -- segmentation.random_object_bbox ---------------------------------------------------------------------------
# The draws come from another generator than DALI's, so deterministic cases (a single qualifying blob, or
# none) are compared value for value and random ones by their frequencies.

MASK = np.zeros((10, 12), np.int32)
MASK[0, 0:9], MASK[4:7, 4:7], MASK[8:10, 0:2] = 1, 1, 1  # class 1: a thin blob, a 3x3 and a 2x2
MASK[2:4, 9:12], MASK[1, 1] = 2, 2  # class 2: a 2x3 and a single pixel
L_SHAPE = np.zeros((10, 10), np.int32)
L_SHAPE[0, 0:6], L_SHAPE[0:6, 0], L_SHAPE[7:10, 5:9] = 1, 1, 1  # the L has the larger box, not more pixels
VOLUME = np.zeros((4, 5, 6), np.uint8)
VOLUME[1:3, 1:4, 2:5], VOLUME[0, 0, 0] = 3, 3

OBJECT_CASES = {
    "k_largest_after_threshold": ([MASK], dict(format="box", classes=[1], k_largest=1, threshold=[2, 2],
                                               output_class=True)),
    "k_largest_ties_keep_raster_order": ([MASK], dict(format="box", classes=[1], k_largest=1, output_class=True)),
    "k_largest_by_box_volume": ([L_SHAPE], dict(format="box", k_largest=1)),
    "zero_is_a_class": ([MASK], dict(format="box", classes=[0, 1], threshold=[11, 13], output_class=True)),
    "background_below_the_classes": ([MASK], dict(format="box", classes=[-1, 0, 1], threshold=[11, 13],
                                                  output_class=True)),
    "background_given": ([MASK], dict(format="box", background=1, threshold=[11, 13], output_class=True)),
    "one_threshold_for_all_axes": ([MASK], dict(classes=[2], threshold=2)),
    "start_end": ([MASK], dict(classes=[2], format="start_end", threshold=[2, 3])),
    "no_foreground": ([MASK, MASK], dict(classes=[3], foreground_prob=0.0, output_class=True)),
    "absent_class": ([MASK], dict(classes=[4], format="box", output_class=True)),
    "volume_6_connected": ([VOLUME], dict(format="box", output_class=True, k_largest=1)),
    "channel_axis_is_spatial": ([MASK[:, :, None].astype(np.uint8)], dict(format="box", classes=[2],
                                                                          threshold=[2, 3, 1])),
    "empty_mask": ([np.zeros((0, 5), np.int32)], dict(format="box", output_class=True)),
}


@pytest.mark.parametrize("case", sorted(OBJECT_CASES))
def test_random_object_bbox_deterministic_cases_match_dali(case):
    masks, kwargs = OBJECT_CASES[case]
    ours, theirs = run_both(lambda fn, types, m: fn.segmentation.random_object_bbox(m, **kwargs), [masks])
    assert_same(ours, theirs)


def _frequencies(lib: str, **kwargs) -> dict:
    outs = run(lib, lambda fn, types, m: fn.segmentation.random_object_bbox(m, format="box", **kwargs),
               [[MASK] * 64], iterations=8)
    boxes = [tuple(b.tolist()) for b in outs[0]]
    return {box: boxes.count(box) / len(boxes) for box in set(boxes)}


@pytest.mark.parametrize("kwargs", [dict(class_weights=[1.0, 3.0]), dict(ignore_class=True),
                                    dict(foreground_prob=0.3, classes=[2]), dict(classes=[1], k_largest=2)])
def test_random_object_bbox_draws_like_dali(kwargs):
    ours, theirs = _frequencies("jaxdali", **kwargs), _frequencies("dali", **kwargs)
    assert set(ours) == set(theirs)
    for box in theirs:  # 512 draws: a frequency's standard deviation is at most 0.022
        assert abs(ours[box] - theirs[box]) < 0.1, (box, ours[box], theirs[box])


# -- ssd_random_crop ----------------------------------------------------------------------------------------


def test_ssd_random_crop_passes_uncroppable_hw_images_through_like_dali():
    """DALI's own checkpointing test: 2-D (HW) images, 7 boxes that lie outside the image (no window can
    hold a box centre, so no sample is cropped) and a single label."""
    rng = np.random.default_rng(4)
    images = [rng.integers(0, 256, (100, 100), dtype=np.uint8) for _ in range(4)]
    boxes = [(rng.random((7, 4)) * 100).astype(np.float32) for _ in range(4)]
    labels = [np.array([k], np.int32) for k in range(4)]
    ours, theirs = run_both(lambda fn, types, i, b, l: fn.ssd_random_crop(i, b, l, num_attempts=3),
                            [images, boxes, labels], iterations=3)
    assert_same(ours, theirs)
    for out, given in zip(ours, (images, boxes, labels)):
        for got, want in zip(out, given * 3):
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("attempts", [1, 10])
def test_ssd_random_crop_draws_like_dali(attempts):
    batch = photos(4, (48, 64)) * 16
    boxes = [np.array([[0.1, 0.2, 0.5, 0.6], [0.4, 0.4, 0.9, 0.8]], np.float32)] * 64
    labels = [np.array([3, 7], np.int32)] * 64
    stats = {}
    for lib in ("jaxdali", "dali"):
        images, kept, kept_labels = run(lib, lambda fn, types, i, b, l: fn.ssd_random_crop(i, b, l, num_attempts=attempts),
                                        [(batch, "HWC"), boxes, labels], iterations=8)
        for image, box, label in zip(images, kept, kept_labels):  # what every crop must satisfy
            assert image.dtype == np.uint8 and box.dtype == np.float32 and len(box) == len(label) >= 1
            assert ((box >= 0) & (box <= 1)).all()
        stats[lib] = np.array([
            np.mean([x.shape[:2] == (48, 64) for x in images]),  # uncropped: 1/7 + failed rounds
            np.mean([x.shape[0] * x.shape[1] / (48 * 64) for x in images]),  # relative area
            np.mean([len(b) for b in kept]) / 2,  # share of boxes kept
            np.mean([x.shape[1] / x.shape[0] for x in images]) / 2,  # aspect ratio (halved)
        ])
    # 512 draws each; the differences seen are below 0.02
    np.testing.assert_allclose(stats["jaxdali"], stats["dali"], atol=0.06)
