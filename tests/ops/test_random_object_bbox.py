"""Tests of fn.segmentation.random_object_bbox (DALI is not needed; the comparisons with DALI are in
tests/differential/test_ops_geo.py)."""

from __future__ import annotations

import numpy as np
import pytest

from jaxdali import fn, pipeline_def
from jaxdali.ops.detection.random_object_bbox import blob_boxes, labels_of
from tests.ops.test_resize import run

rng = np.random.default_rng(3)
MASKS = [(rng.uniform(0, 1, (24, 30)) > 0.6).astype(np.int32) * rng.integers(1, 4, (24, 30)) for _ in range(8)]


def test_blob_boxes_agree_in_2d_and_nd():
    # The 2-D path (OpenCV) and the N-D one (SciPy, on the mask with a unit axis) find the same blobs.
    for mask in MASKS[:3]:
        starts, ends = blob_boxes(mask == 2)
        starts3, ends3 = blob_boxes((mask == 2)[None])
        assert len(starts) > 3
        np.testing.assert_array_equal(starts, starts3[:, 1:])
        np.testing.assert_array_equal(ends, ends3[:, 1:])
        for s, e in zip(starts, ends):  # every box holds some of the class and is tight
            window = mask[s[0]:e[0], s[1]:e[1]] == 2
            assert window[0].any() and window[-1].any() and window[:, 0].any() and window[:, -1].any()


@pytest.mark.parametrize("mask", [np.array([[3, 5], [3, -2]]), np.array([0, 255, 7], np.uint8),
                                  np.array([1, 70000, 5]), np.array([True, False]), np.array([-128, 127, 5], np.int8),
                                  np.array([-30000, 30000, 5], np.int16), np.array([-300, 200, 200], np.int16)])
def test_labels_of_lists_the_distinct_labels_of_every_integer_type(mask):
    np.testing.assert_array_equal(labels_of(mask), np.unique(mask).astype(np.int64))


def _flat(outputs) -> tuple:
    return tuple(outputs) if isinstance(outputs, list) else (outputs,)


def _pipeline(checkpoint=None):
    @pipeline_def(batch_size=8, num_threads=2, device_id=None, seed=4, enable_checkpointing=True,
                  checkpoint=checkpoint)
    def pipe():
        masks = fn.external_source(source=lambda iteration: MASKS)
        return tuple(fn.segmentation.random_object_bbox(masks, format="start_end", output_class=True,
                                                        foreground_prob=0.8))

    return pipe()


def _take(p, batches):
    return [[np.asarray(o.at(i)).tolist() for o in p.run() for i in range(8)] for _ in range(batches)]


def test_draws_are_reproducible_vary_and_resume_from_a_checkpoint():
    p = _pipeline()
    first = _take(p, 2)
    checkpoint = p.checkpoint()
    rest = _take(p, 2)
    p.close()
    again = _pipeline()
    assert _take(again, 4) == first + rest
    again.close()
    resumed = _pipeline(checkpoint=checkpoint)
    assert _take(resumed, 2) == rest
    resumed.close()
    assert first[0] != first[1] and len({str(b[:3]) for b in first}) > 1


def test_every_output_box_is_a_blob_of_the_output_class():
    start, end, cls = run(lambda m: tuple(fn.segmentation.random_object_bbox(
        m, format="start_end", output_class=True, threshold=[2, 1])), MASKS, layout="")
    for mask, s, e, c in zip(MASKS, start, end, cls):
        s, e, c = np.asarray(s), np.asarray(e), int(np.asarray(c))
        starts, ends = blob_boxes(mask == c)
        assert e[0] - s[0] >= 2
        assert any((s == a).all() and (e == b).all() for a, b in zip(starts, ends))


def test_per_sample_classes_and_weights():
    classes = [np.array([1, 2], np.int32), np.array([3], np.int32)] * 4
    weights = [np.array([0.0, 1.0], np.float32), np.array([1.0], np.float32)] * 4
    (cls,) = run(lambda m, c, w: (fn.segmentation.random_object_bbox(
        m, classes=c, class_weights=w, output_class=True, format="box")[1],), MASKS, classes, weights, layout="")
    assert [int(np.asarray(c)) for c in cls] == [2, 3] * 4


@pytest.mark.parametrize("kwargs,message", [
    ({"ignore_class": True, "classes": [1]}, "cannot be used when 'ignore_class' is True"),
    ({"ignore_class": True, "output_class": True}, "cannot be used when 'ignore_class' is True"),
    ({"k_largest": 0}, "argument 'k_largest' must be at least 1"),
    ({"format": "xyWH"}, "argument 'format' must be one of"),
    ({"threshold": [1, 2, 3]}, "'threshold' must have 1 or 2 values"),
    ({"classes": [1, 2], "class_weights": [1.0]}, "'class_weights' has 1 values but there are 2 classes"),
    ({"class_weights": [1.0, -1.0]}, "'class_weights' must not be negative"),
    ({"foreground_prob": -0.5}, "argument 'foreground_prob' must be >= 0"),
])
def test_bad_arguments_name_the_operator_and_the_argument(kwargs, message):
    with pytest.raises((ValueError, TypeError), match="fn.segmentation.random_object_bbox: .*" + message):
        run(lambda m: _flat(fn.segmentation.random_object_bbox(m, **{"format": "box", **kwargs})), MASKS, layout="")


def test_a_float_mask_is_refused():
    with pytest.raises(TypeError, match="fn.segmentation.random_object_bbox: the mask must hold integer labels"):
        run(lambda m: (fn.segmentation.random_object_bbox(m, format="box"),), [np.zeros((4, 4), np.float32)],
            layout="")
