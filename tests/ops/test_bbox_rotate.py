"""Tests of fn.bbox_rotate (DALI is not needed; the comparisons with DALI are in
tests/differential/test_ops_geo.py)."""

from __future__ import annotations

import numpy as np
import pytest

from jaxdali import fn, types
from tests.ops.test_resize import run

BOXES = [np.array([[0.2, 0.25, 0.5, 0.6], [0.55, 0.1, 0.9, 0.4]], np.float32)]


@pytest.mark.parametrize("angle,keep_size", [(30.0, False), (-65.0, False), (140.0, True), (17.0, True)])
def test_expanded_boxes_enclose_the_rectangles_that_rotate_moves(angle, keep_size):
    image = np.zeros((60, 100, 1), np.uint8)
    for k, (x0, y0, x1, y1) in enumerate(BOXES[0] * np.array([100, 60, 100, 60])):
        image[int(round(y0)):int(round(y1)), int(round(x0)):int(round(x1))] = 100 + 100 * k

    def graph(x, b):
        rotated = fn.rotate(x, angle=angle, keep_size=keep_size, interp_type=types.INTERP_NN, fill_value=0)
        return rotated, fn.bbox_rotate(b, angle=angle, input_shape=[60, 100], keep_size=keep_size)

    rotated, boxes = run(graph, [image], BOXES)
    rotated, boxes = np.asarray(rotated.at(0))[..., 0], np.asarray(boxes.at(0))
    h, w = rotated.shape
    for k, box in enumerate(boxes * np.array([w, h, w, h])):
        ys, xs = np.nonzero(rotated == 100 + 100 * k)
        # the rotated rectangle's pixels lie in the box, and touch its sides (to a pixel)
        assert xs.min() >= box[0] - 1 and xs.max() + 1 <= box[2] + 1
        assert ys.min() >= box[1] - 1 and ys.max() + 1 <= box[3] + 1
        assert xs.min() <= box[0] + 1.5 and xs.max() + 1 >= box[2] - 1.5
        assert ys.min() <= box[1] + 1.5 and ys.max() + 1 >= box[3] - 1.5


def test_fixed_mode_keeps_the_box_size_and_a_full_turn_keeps_the_boxes():
    def graph(b):
        return (fn.bbox_rotate(b, angle=30.0, input_shape=[100, 100], mode="fixed", keep_size=True),
                fn.bbox_rotate(b, angle=360.0, input_shape=[80, 120]))

    fixed, full_turn = [np.asarray(o.at(0)) for o in run(graph, BOXES, layout="")]
    np.testing.assert_allclose(fixed[:, 2:] - fixed[:, :2], BOXES[0][:, 2:] - BOXES[0][:, :2], atol=1e-6)
    np.testing.assert_allclose(full_turn, BOXES[0], atol=1e-6)


@pytest.mark.parametrize("kwargs,message", [
    ({"input_shape": [10, 10]}, "fn.bbox_rotate: argument 'angle'"),
    ({"angle": 10.0}, "fn.bbox_rotate: argument 'input_shape'"),
    ({"angle": 10.0, "input_shape": [10, 10], "mode": "shrink"}, "fn.bbox_rotate: argument 'mode' must be one of"),
    ({"angle": 10.0, "input_shape": [10, 10], "bbox_layout": "yxYX"}, "fn.bbox_rotate: argument 'bbox_layout'"),
    ({"angle": 10.0, "input_shape": [10, 10], "shape_layout": "DW"}, "fn.bbox_rotate: argument 'shape_layout'"),
    ({"angle": 10.0, "input_shape": [10], "shape_layout": "HW"}, "fn.bbox_rotate: argument 'input_shape' has 1"),
    ({"angle": 10.0, "input_shape": [0, 10]}, "fn.bbox_rotate: argument 'input_shape' must give a positive"),
    ({"angle": 10.0, "input_shape": [10, 10], "size": [5]}, "fn.bbox_rotate: argument 'size' must have 2"),
    ({"angle": 10.0, "input_shape": [10, 10], "remove_threshold": 1.5}, "fn.bbox_rotate: argument 'remove_threshold'"),
])
def test_bad_arguments_name_the_operator_and_the_argument(kwargs, message):
    with pytest.raises((ValueError, TypeError), match=message):
        run(lambda b: (fn.bbox_rotate(b, **kwargs),), BOXES, layout="")


def test_bad_inputs_are_reported():
    with pytest.raises(ValueError, match=r"fn.bbox_rotate: the boxes input must hold rows of 4 values"):
        run(lambda b: (fn.bbox_rotate(b, angle=5.0, input_shape=[9, 9]),), [np.zeros((2, 3), np.float32)], layout="")
    with pytest.raises(TypeError, match=r"fn.bbox_rotate: the boxes must be float32"):
        run(lambda b: (fn.bbox_rotate(b, angle=5.0, input_shape=[9, 9]),), [np.zeros((2, 4), np.int32)], layout="")
    with pytest.raises(ValueError, match=r"fn.bbox_rotate: labels of sample 0 must have shape \[2\] or \[2, 1\]"):
        run(lambda b, l: tuple(fn.bbox_rotate(b, l, angle=5.0, input_shape=[9, 9])), BOXES, [np.zeros(3, np.int32)],
            layout="")
