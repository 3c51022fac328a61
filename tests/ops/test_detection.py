"""Unit tests of the transform, box and detection operators: semantics DALI is not needed for,
and the errors (each names the operator and the argument or input)."""

from __future__ import annotations

import numpy as np
import pytest

from jaxdali import fn, pipeline_def, types
from jaxdali.ops.schema import OpArgumentError
from tests.run_once import run_once


def run(graph, *batches, batch_size=2):
    """Runs ``graph(*nodes)`` once on external sources returning ``batches``; NumPy samples per output."""
    return run_once(lambda: graph(*[fn.external_source(source=lambda b=b: b) for b in batches]),
                    batch_size=batch_size, seed=3)[0]

BOXES = [np.array([[0.1, 0.2, 0.3, 0.5]], np.float32), np.zeros((0, 4), np.float32)]
LABELS = [np.array([5], np.int32), np.zeros(0, np.int32)]
ANCHORS = [0.0, 0.0, 0.5, 0.5, 0.5, 0.5, 1.0, 1.0]
def MASK_INPUTS(ids, polygons=((0, 0, 2), (1, 2, 5))):  # noqa: N802 (a table-building helper)
    return ([np.array(ids, np.int32)] * 2, [np.array(polygons, np.int32)] * 2,
            [np.arange(10, dtype=np.float32).reshape(5, 2)] * 2)


POINTS = [np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)] * 2


def test_transforms_map_points_like_coord_transform_composes_them():
    (m,) = run(lambda: fn.transforms.rotation(fn.transforms.translation(offset=[1.0, 0.0]), angle=90.0))[0][:1]
    np.testing.assert_allclose(m, [[0, -1, 0], [1, 0, 1]], atol=1e-6)  # translate, then turn counter-clockwise
    out = run(lambda p: fn.coord_transform(p, MT=fn.transforms.scale(scale=[2.0, 3.0], center=[1.0, 1.0])), POINTS)
    np.testing.assert_array_equal(out[0][0], [[1.0, 4.0], [5.0, 10.0]])


def test_transforms_combine_applies_the_first_input_first():
    out = run(lambda: fn.transforms.combine(fn.transforms.translation(offset=[1.0, 2.0]),
                                            fn.transforms.scale(scale=[2.0, 3.0])))
    np.testing.assert_array_equal(out[0][0], [[2, 0, 2], [0, 3, 6]])


def test_bb_flip_and_coord_flip_keep_ragged_batches():
    flipped, = run(lambda b: fn.bb_flip(b), BOXES)
    assert flipped[1].shape == (0, 4)
    np.testing.assert_allclose(flipped[0], [[0.6, 0.2, 0.3, 0.5]], atol=1e-7)


@pytest.mark.parametrize("graph,batches,pattern", [
    (lambda: fn.transforms.shear(shear=[1.0, 2.0], angles=[1.0, 2.0]), (), r"fn\.transforms\.shear: give exactly one"),
    (lambda: fn.transforms.shear(shear=[1.0, 2.0, 3.0]), (), r"fn\.transforms\.shear: argument 'shear' must have 2"),
    (lambda: fn.transforms.shear(angles=[90.0, 0.0]), (), r"'angles' must be in \(-90, 90\)"),
    (lambda: fn.transforms.scale(scale=[2.0, 3.0], center=[1.0, 2.0, 3.0]), (),
     r"fn\.transforms\.scale: argument 'center' has 3 elements"),
    (lambda: fn.transforms.translation(fn.transforms.translation(offset=[1.0, 2.0]), offset=[1.0, 2.0, 3.0]), (),
     r"fn\.transforms\.translation: argument 'offset' has 3 elements, but the input transform has 2"),
    (lambda: fn.transforms.translation(offset=[1.0] * 7), (), r"7 dimensions are not supported"),
    (lambda: fn.transforms.rotation(angle=10.0, axis=[0.0, 0.0, 0.0]), (), r"'axis' must not be a zero vector"),
    (lambda: fn.transforms.rotation(fn.transforms.translation(offset=[1.0, 2.0]), angle=10.0, axis=[0, 0, 1.0]),
     (), r"describe a 3D transform, but the input transform has 2"),
    (lambda: fn.transforms.crop(from_start=[1.0, 1.0], from_end=[1.0, 2.0]), (), r"fn\.transforms\.crop: .*empty"),
    (lambda: fn.transforms.combine(fn.transforms.translation(offset=[1.0, 2.0]),
                                   fn.transforms.translation(offset=[1.0, 2.0, 3.0])), (),
     r"fn\.transforms\.combine: all input transforms must have the same number of dimensions"),
    (lambda p: fn.coord_transform(p, M=[1.0, 2.0, 3.0]), (POINTS,), r"fn\.coord_transform: argument 'M' has 3"),
    (lambda p: fn.coord_transform(p, T=[1.0, 2.0, 3.0]), (POINTS,), r"fn\.coord_transform: argument 'T' has 3"),
    (lambda p: fn.coord_transform(p, MT=[1.0] * 5), (POINTS,), r"fn\.coord_transform: argument 'MT' has 5"),
    (lambda p: fn.coord_transform(p, M=[1.0], MT=[1.0] * 6), (POINTS,), r"give 'MT', or 'M' and/or 'T'"),
    (lambda p: fn.coord_transform(p, dtype=types.UINT8), (POINTS,), r"fn\.coord_transform: argument 'dtype'"),
    (lambda p: fn.coord_transform(p), ([np.zeros(2, np.float32)] * 2,), r"at least 2 dimensions"),
    (lambda p: fn.coord_transform(p), ([np.zeros((2, 2))] * 2,), r"fn\.coord_transform: input type float64"),
    (lambda b: fn.bb_flip(b), ([np.zeros((2, 5), np.float32)] * 2,), r"fn\.bb_flip: the input must hold rows of 4"),
    (lambda b: fn.bb_flip(b), ([np.zeros((2, 4))] * 2,), r"fn\.bb_flip: the input must be float32"),
    (lambda b: fn.bbox_paste(b, ratio=0.5), (BOXES,), r"fn\.bbox_paste: argument 'ratio' must be >= 1"),
    (lambda p: fn.coord_flip(p, layout="xx"), (POINTS,), r"fn\.coord_flip: argument 'layout'"),
    (lambda p: fn.coord_flip(p), ([np.zeros((2, 4), np.float32)] * 2,), r"fn\.coord_flip: points must have 1 to 3"),
    (lambda b, lab: fn.box_encoder(b, lab, anchors=[0.0, 0.0, 1.0]), (BOXES, LABELS),
     r"fn\.box_encoder: argument 'anchors' must hold 4 values"),
    (lambda b, lab: fn.box_encoder(b, lab, anchors=ANCHORS, stds=[1.0, 0.0, 1.0, 1.0]), (BOXES, LABELS),
     r"fn\.box_encoder: argument 'stds' must not contain 0"),
    (lambda b, lab: fn.box_encoder(b, lab, anchors=ANCHORS, means=[1.0]), (BOXES, LABELS),
     r"fn\.box_encoder: argument 'means' must have 4 values"),
    (lambda b, lab: fn.box_encoder(b, lab, anchors=ANCHORS), (BOXES, [np.zeros(3, np.int32)] * 2),
     r"fn\.box_encoder: sample 0: the boxes must have shape \(N, 4\) and the labels N values"),
    (lambda b, lab: fn.box_encoder(b, lab, anchors=ANCHORS), (BOXES, [np.zeros(1, np.int64)] * 2),
     r"fn\.box_encoder: the labels \(input 1\) must be int32"),
    (lambda b: fn.random_bbox_crop(b, bbox_layout="xyZW"), (BOXES,), r"fn\.random_bbox_crop: argument 'bbox_layout'"),
    (lambda b: fn.random_bbox_crop(b, scaling=[0.5, 0.2]), (BOXES,), r"fn\.random_bbox_crop: argument 'scaling'"),
    (lambda b: fn.random_bbox_crop(b, aspect_ratio=[1.0]), (BOXES,), r"random_bbox_crop: argument 'aspect_ratio'"),
    (lambda b: fn.random_bbox_crop(b, thresholds=[1.5]), (BOXES,), r"random_bbox_crop: argument 'thresholds'"),
    (lambda b: fn.random_bbox_crop(b, crop_shape=[10, 10]), (BOXES,), r"'crop_shape' needs 'input_shape'"),
    (lambda b: fn.random_bbox_crop(b, crop_shape=[10, 10], input_shape=[5, 20], allow_no_crop=False), (BOXES,),
     r"fn\.random_bbox_crop: sample 0: 'crop_shape' \[10.0, 10.0\] must be positive and fit"),
    (lambda b: fn.random_bbox_crop(b), ([np.array([[0.5, 0.5, 1.2, 0.9]], np.float32)] * 2,),
     r"fn\.random_bbox_crop: sample 0: box \[0.5, 0.5, 1.2.* is not inside the normalised image"),
    (lambda b, lab: fn.random_bbox_crop(b, lab), (BOXES, [np.zeros(3, np.int32)] * 2),
     r"fn\.random_bbox_crop: sample 0: 3 labels for 1 boxes"),
    (lambda: fn.roi_random_crop(crop_shape=[4, 4], roi_start=[1, 1]), (), r"exactly one of 'roi_end' and 'roi_shape'"),
    (lambda: fn.roi_random_crop(crop_shape=[4, 4], roi_start=[1, 1], roi_end=[2, 2], roi_shape=[1, 1]), (),
     r"fn\.roi_random_crop: give exactly one of 'roi_end' and 'roi_shape'"),
    (lambda: fn.roi_random_crop(crop_shape=[4, 4], roi_start=[1, 1, 1], roi_end=[2, 2]), (),
     r"fn\.roi_random_crop: argument 'roi_start' must have one value per dimension \(2"),
    (lambda: fn.roi_random_crop(crop_shape=[40, 4], roi_start=[1, 1], roi_end=[2, 2], in_shape=[10, 10]), (),
     r"fn\.roi_random_crop: sample 0: the crop \[40, 4\] is larger than the input \[10, 10\]"),
    (lambda x: fn.roi_random_crop(x, crop_shape=[4, 4], roi_start=[1, 1], roi_end=[2, 2], in_shape=[10, 10]),
     ([np.zeros((10, 10), np.uint8)] * 2,), r"as the data input or as 'in_shape', not both"),
    (lambda s: fn.random_crop_generator(s), ([np.array([5], np.int64)] * 2,),
     r"fn\.random_crop_generator: each sample must be a 1-D integer shape with at least 2 values"),
    # An image (not its shape) used to be flattened and its first two values taken as H and W.
    (lambda s: fn.random_crop_generator(s), ([np.full((4, 5, 3), 9, np.int64)] * 2,),
     r"fn\.random_crop_generator: each sample must be a 1-D integer shape .* got int64 of shape \[4, 5, 3\]"),
    (lambda s: fn.random_crop_generator(s, random_area=[0.5, 0.1]), ([np.array([5, 5], np.int64)] * 2,),
     r"fn\.random_crop_generator: .*random_area"),
    (lambda i, p, v: fn.segmentation.select_masks(i, p, v), MASK_INPUTS(ids=[1, 1]),
     r"fn\.segmentation\.select_masks: sample 0: mask id 1 is requested more than once"),
    (lambda i, p, v: fn.segmentation.select_masks(i, p, v), MASK_INPUTS(ids=[4]),
     r"fn\.segmentation\.select_masks: sample 0: mask id 4 has no polygon"),
    (lambda i, p, v: fn.segmentation.select_masks(i, p, v), MASK_INPUTS(ids=[0], polygons=[[0, 0, 9]]),
     r"polygon \[0, 0, 9\] does not index the 5 vertices"),
    (lambda m: fn.segmentation.random_mask_pixel(m), ([np.zeros((0, 4), np.uint8)] * 2,),
     r"fn\.segmentation\.random_mask_pixel: sample 0: the mask is empty"),
    (lambda b: fn.random_bbox_crop(b, thresholds=[0.99], scaling=[0.1, 0.2], allow_no_crop=False, num_attempts=100),
     (BOXES,),
     r"fn\.random_bbox_crop: sample 0: no crop window satisfies the thresholds"),
])
def test_bad_arguments_and_inputs_name_the_operator(graph, batches, pattern):
    with pytest.raises((OpArgumentError, ValueError, TypeError, RuntimeError), match=pattern):
        run(graph, *batches)


def test_schema_rejects_bad_constants_when_the_graph_is_defined():
    with pytest.raises(OpArgumentError, match=r"fn\.bb_flip: argument 'horizontal' must be <= 1"):
        run(lambda b: fn.bb_flip(b, horizontal=2), BOXES)


def test_box_encoder_matches_every_box_and_leaves_the_rest_background():
    boxes = [np.array([[0.05, 0.05, 0.4, 0.4], [0.6, 0.6, 0.9, 0.95]], np.float32), np.zeros((0, 4), np.float32)]
    labels = [np.array([3, 7], np.int32), np.zeros(0, np.int32)]
    anchors = [0.0, 0.0, 0.5, 0.5, 0.5, 0.0, 1.0, 0.5, 0.5, 0.5, 1.0, 1.0]
    enc, lab = run(lambda b, lab_: tuple(fn.box_encoder(b, lab_, anchors=anchors)), boxes, labels)
    assert lab[0].tolist() == [3, 0, 7] and lab[1].tolist() == [0, 0, 0]
    np.testing.assert_allclose(enc[0][0], [0.225, 0.225, 0.35, 0.35], atol=1e-7)  # the box, in centre form
    np.testing.assert_allclose(enc[0][1], [0.75, 0.25, 0.5, 0.5])  # background keeps the anchor


SSD_CROP = dict(thresholds=[0.1, 0.3, 0.5], scaling=[0.3, 1.0], aspect_ratio=[0.5, 2.0], num_attempts=20,
                output_bbox_indices=True)
MANY_BOXES = [np.array([[0.1, 0.1, 0.6, 0.5], [0.3, 0.4, 0.9, 0.95]], np.float32)] * 8


def _crop_pipeline(checkpoint=None, **kwargs):
    @pipeline_def(batch_size=8, num_threads=1, device_id=None, seed=11, enable_checkpointing=True,
                  checkpoint=checkpoint)
    def pipe():
        boxes = fn.external_source(source=lambda iteration: MANY_BOXES)
        return tuple(fn.random_bbox_crop(boxes, **{**SSD_CROP, **kwargs}))

    return pipe()


def _take(p, batches):
    return [[np.asarray(o.at(i)).tolist() for o in p.run() for i in range(8)] for _ in range(batches)]


def test_random_bbox_crop_is_reproducible_and_resumes_from_a_checkpoint():
    p = _crop_pipeline()
    first = _take(p, 2)
    checkpoint = p.checkpoint()
    rest = _take(p, 3)
    p.close()
    again = _crop_pipeline()
    assert _take(again, 5) == first + rest  # the same seed gives the same windows
    again.close()
    resumed = _crop_pipeline(checkpoint=checkpoint)
    assert _take(resumed, 3) == rest
    resumed.close()
    windows = {tuple(b[0]) for b in first}
    assert len(windows) > 1  # the windows do vary


def test_random_bbox_crop_with_a_fixed_crop_shape_gives_pixel_windows():
    anchor, shape, boxes = run(lambda b: tuple(fn.random_bbox_crop(
        b, input_shape=[200, 100], crop_shape=[120, 80], allow_no_crop=False)), MANY_BOXES[:2])
    for a, s, kept in zip(anchor, shape, boxes):
        assert s.tolist() == [120.0, 80.0] and a.tolist() == np.round(a).tolist()
        assert 0 <= a[0] <= 80 and 0 <= a[1] <= 20
        assert kept.min() >= 0 and kept.max() <= 1


def test_random_bbox_crop_reads_and_writes_corner_size_boxes():
    xywh = [np.array([[0.1, 0.1, 0.5, 0.4]], np.float32)] * 2
    anchor, shape, boxes = run(lambda b: tuple(fn.random_bbox_crop(b, bbox_layout="xyWH")), xywh)
    np.testing.assert_array_equal(boxes[0], xywh[0])  # scaling [1, 1]: the whole image
    anchor, shape, boxes = run(lambda b: tuple(fn.random_bbox_crop(b, ltrb=False, scaling=[0.5, 0.9],
                                                                   allow_no_crop=False)), xywh)
    for a, s, b in zip(anchor, shape, boxes):
        ltrb = np.concatenate([xywh[0][0, :2], xywh[0][0, :2] + xywh[0][0, 2:]])
        expected = np.clip((ltrb - np.tile(a, 2)) / np.tile(s, 2), 0, 1)
        np.testing.assert_allclose(b[0], np.concatenate([expected[:2], expected[2:] - expected[:2]]), atol=1e-6)


def test_gpu_placement_gives_the_host_values():
    """bb_flip, coord_flip, coord_transform and box_encoder accept device="gpu" like DALI's; they run
    on the host and their outputs live on the pipeline's device."""
    labels = [np.array([4], np.int32), np.zeros(0, np.int32)]

    def graph(on_gpu):
        b = fn.external_source(source=lambda: BOXES)
        lab = fn.external_source(source=lambda: labels)
        p = fn.external_source(source=lambda: POINTS)
        if on_gpu:
            b, lab, p = b.gpu(), lab.gpu(), p.gpu()
        return (fn.bb_flip(b), fn.coord_flip(p, flip_y=1), fn.coord_transform(p, M=[2.0, 1.0, 0.0, 1.0]),
                *fn.box_encoder(b, lab, anchors=ANCHORS))

    results = []
    for on_gpu in (False, True):
        @pipeline_def(batch_size=2, num_threads=1, device_id=0 if on_gpu else None, seed=3)
        def pipe():
            return graph(on_gpu)

        p = pipe()
        outs = p.run()
        assert all((type(o).__name__ == "TensorListGPU") == on_gpu for o in outs)
        results.append([[np.asarray(o.as_cpu().at(i)) for i in range(2)] for o in outs])
        p.close()
    for host, device in zip(*results):
        for a, b in zip(host, device):
            np.testing.assert_array_equal(a, b)


def test_select_masks_keeps_every_polygon_of_a_mask():
    polygons = [np.array([[3, 0, 2], [1, 2, 4], [3, 4, 7]], np.int32)] * 2
    vertices = [np.arange(14, dtype=np.float32).reshape(7, 2)] * 2
    ids = [np.array([3], np.int32)] * 2
    selected, kept = run(lambda i, p, v: tuple(fn.segmentation.select_masks(i, p, v, reindex_masks=True)),
                         ids, polygons, vertices)
    assert selected[0].tolist() == [[0, 0, 2], [0, 2, 5]]
    np.testing.assert_array_equal(kept[0], vertices[0][[0, 1, 4, 5, 6]])
