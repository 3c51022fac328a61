"""Tests of fn.ssd_random_crop (DALI is not needed; its draws are compared with DALI's in
tests/differential/test_ops_geo.py)."""

from __future__ import annotations

import numpy as np
import pytest

from jaxdali import fn, pipeline_def
from jaxdali.ops.detection.ssd_random_crop import choose_windows

rng = np.random.default_rng(2)
IMAGES = [rng.integers(0, 256, (40, 60, 3), dtype=np.uint8) for _ in range(8)]
BOXES = [np.array([[0.1, 0.2, 0.5, 0.6], [0.4, 0.4, 0.9, 0.8], [0.7, 0.05, 0.95, 0.3]], np.float32)] * 8
LABELS = [np.array([1, 2, 3], np.int32)] * 8


def _pipeline(checkpoint=None, labels=LABELS, **kwargs):
    @pipeline_def(batch_size=8, num_threads=2, device_id=None, seed=9, enable_checkpointing=True,
                  checkpoint=checkpoint)
    def pipe():
        image = fn.external_source(source=lambda iteration: IMAGES, layout="HWC")
        boxes = fn.external_source(source=lambda iteration: BOXES)
        label = fn.external_source(source=lambda iteration: labels)
        return tuple(fn.ssd_random_crop(image, boxes, label, **kwargs))

    p = pipe()
    p.build()
    return p


def _take(p, batches):
    return [[np.asarray(o.at(i)).tolist() for o in p.run() for i in range(8)] for _ in range(batches)]


def test_crops_are_reproducible_and_resume_from_a_checkpoint():
    p = _pipeline(num_attempts=3)
    first = _take(p, 2)
    checkpoint = p.checkpoint()
    rest = _take(p, 2)
    p.close()
    again = _pipeline(num_attempts=3)
    assert _take(again, 4) == first + rest
    again.close()
    resumed = _pipeline(checkpoint=checkpoint, num_attempts=3)
    assert _take(resumed, 2) == rest
    resumed.close()


def test_the_image_boxes_and_labels_are_cut_together():
    p = _pipeline(num_attempts=5)
    for _ in range(3):
        images, boxes, labels = p.run()
        for i in range(8):
            image, box, label = np.asarray(images.at(i)), np.asarray(boxes.at(i)), np.asarray(labels.at(i))
            assert len(box) == len(label) >= 1 and set(label.tolist()) <= {1, 2, 3}
            if image.shape == IMAGES[i].shape:
                continue
            # the crop is a window of the image: find it, then check the boxes against it
            h, w = image.shape[:2]
            hits = [(y, x) for y in range(41 - h) for x in range(61 - w)
                    if np.array_equal(IMAGES[i][y:y + h, x:x + w], image)]
            assert hits
            y, x = hits[0]
            for b, lab in zip(box, label):
                original = BOXES[i][lab - 1]
                centre = ((original[0] + original[2]) / 2 * 60, (original[1] + original[3]) / 2 * 40)
                assert x - 1 <= centre[0] <= x + w + 1 and y - 1 <= centre[1] <= y + h + 1
                expected = np.clip((original * [60, 40, 60, 40] - [x, y, x, y]) / [w, h, w, h], 0, 1)
                np.testing.assert_allclose(b, expected, atol=0.05)  # pixel rounding of the window
    p.close()


def test_column_labels_keep_their_shape():
    p = _pipeline(labels=[x[:, None] for x in LABELS])
    _, boxes, labels = p.run()
    assert all(np.asarray(labels.at(i)).shape == (len(np.asarray(boxes.at(i))), 1) for i in range(8))
    p.close()


def test_the_no_crop_option_and_the_iou_thresholds():
    # a full-image box (IoU = the window's area) and a padding row that must not count
    boxes = np.array([[[0.0, 0.0, 1.0, 1.0], [0.5, 0.5, 0.5, 0.5]]], np.float32)
    present = np.array([[True, False]])
    u = np.zeros((1, 64, 5))
    u[..., 0] = 6.5 / 7  # every round: no crop
    assert np.isnan(choose_windows(boxes, present, u, 1)).all()
    u[..., 0] = 5.5 / 7  # min IoU 0.9: only windows of area >= 0.9 qualify
    u[..., 1:3] = 0.99  # w = h = 0.993
    window = choose_windows(boxes, present, u, 1)[0]
    assert window[2] * window[3] >= 0.9
    u[..., 1:3] = 0.5  # w = h = 0.65: area 0.42 < 0.9 in every round, so no round ends: no crop
    assert np.isnan(choose_windows(boxes, present, u, 1)).all()
    u[..., 0] = 0.5 / 7  # min IoU -1: any window whose centre test passes
    u[:, 3:, 0] = 6.5 / 7  # (the later rounds would not crop)
    window = choose_windows(boxes, present, u, 1)[0]
    np.testing.assert_allclose(window[2:], [0.65, 0.65], atol=1e-6)


@pytest.mark.parametrize("kwargs,message", [({"num_attempts": 0}, "argument 'num_attempts' must be >= 1")])
def test_bad_arguments_name_the_operator_and_the_argument(kwargs, message):
    with pytest.raises(ValueError, match="fn.ssd_random_crop: " + message):
        _pipeline(**kwargs)


def test_a_cropped_sample_needs_one_label_per_box():
    p = _pipeline(labels=[np.array([1, 2], np.int32)] * 8, num_attempts=5)
    with pytest.raises(ValueError, match=r"fn.ssd_random_crop: sample \d is cropped, which keeps some of its 3 boxes "
                                         r"and their labels, but it has 2 labels: give one per box"):
        for _ in range(4):   # each sample is cropped with probability about 6/7: some of these 32 are
            p.run()
    p.close()


def test_labels_of_another_shape_are_refused():
    p = _pipeline(labels=[np.ones((3, 2), np.int32)] * 8)
    with pytest.raises(ValueError, match=r"fn.ssd_random_crop: labels of sample 0 must have shape \[N\] or \[N, 1\], "
                                         r"got \[3, 2\]"):
        p.run()
    p.close()


def test_hw_and_float_images_are_cut_at_the_windows_of_their_hwc_uint8_twins():
    def crops(images, layout):
        @pipeline_def(batch_size=8, num_threads=2, device_id=None, seed=9)
        def pipe():
            image = fn.external_source(source=lambda: images, layout=layout)
            boxes = fn.external_source(source=lambda: BOXES)
            label = fn.external_source(source=lambda: LABELS)
            return tuple(fn.ssd_random_crop(image, boxes, label, num_attempts=5))

        p = pipe()
        out = [[np.asarray(o.at(i)) for i in range(8)] for o in p.run()]
        p.close()
        return out

    hwc = crops(IMAGES, "HWC")
    hw = crops([np.ascontiguousarray(x[:, :, 0]) for x in IMAGES], "HW")
    floats = crops([x.astype(np.float32) for x in IMAGES], "HWC")
    assert any(x.shape != IMAGES[0].shape for x in hwc[0])
    for i in range(8):
        np.testing.assert_array_equal(hw[0][i], hwc[0][i][:, :, 0])
        np.testing.assert_array_equal(floats[0][i], hwc[0][i].astype(np.float32))
        for k in (1, 2):
            np.testing.assert_array_equal(hw[k][i], hwc[k][i])
