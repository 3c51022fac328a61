"""An SSD-style detection pipeline on a small COCO set built from real photos, through jaxdali and
DALI: coco reader -> decoders.image -> resize -> random_bbox_crop -> crop -> bb_flip -> resize ->
box_encoder. The crop windows are random (different generators), so DALI's half of the pipeline
takes jaxdali's windows as external inputs; everything after the window must then agree.
(``fn.slice`` is not on this branch: ``fn.crop`` takes the window, which is fixed-size here.)"""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

dali = pytest.importorskip("nvidia.dali")
dali_fn = pytest.importorskip("nvidia.dali.fn")
Image = pytest.importorskip("PIL.Image")

import jaxdali  # noqa: E402
from jaxdali import fn  # noqa: E402

BATCH = 6
IMAGE_HW = (240, 320)
CROP_WH = (200, 160)


def small_coco(folder: pathlib.Path, flowers: str) -> tuple[str, str]:
    """A COCO annotations file over 6 real photos with 1-3 boxes each (coordinates in pixels)."""
    rng = np.random.default_rng(4)
    photos = sorted(pathlib.Path(flowers).rglob("*.jpg"))[:: 37][:BATCH]
    images, annotations = [], []
    for image_id, photo in enumerate(photos, start=1):
        w, h = Image.open(photo).size
        images.append({"id": image_id, "file_name": str(photo.relative_to(flowers)), "width": w, "height": h})
        for _ in range(rng.integers(1, 4)):
            bw, bh = rng.uniform(0.2, 0.5) * w, rng.uniform(0.2, 0.5) * h
            x, y = rng.uniform(0, w - bw), rng.uniform(0, h - bh)
            annotations.append({"id": len(annotations) + 1, "image_id": image_id, "category_id": int(rng.integers(1, 4)),
                                "bbox": [x, y, bw, bh], "area": bw * bh, "iscrowd": 0})
    path = folder / "instances.json"
    path.write_text(json.dumps({"images": images, "annotations": annotations,
                                "categories": [{"id": k, "name": f"c{k}"} for k in (1, 2, 3)]}))
    return flowers, str(path)


def anchors_ltrb() -> list[float]:
    c = (np.arange(5) + 0.5) / 5
    cx, cy = np.meshgrid(c, c)
    boxes = [np.stack([cx - s / 2, cy - s / 2, cx + s / 2, cy + s / 2], -1).reshape(-1, 4) for s in (0.2, 0.4)]
    return np.clip(np.concatenate(boxes), 0, 1).ravel().tolist()


def _constant(batch):
    return lambda: batch  # no parameter: DALI would pass the iteration to a callable that takes one


def downstream(module, images, anchor, shape, boxes, labels):
    """The deterministic half: crop the window, mirror, resize, encode."""
    h, w = IMAGE_HW
    crop_w, crop_h = CROP_WH
    images = module.crop(images, crop_w=crop_w, crop_h=crop_h, crop_pos_x=anchor[0] / (w - crop_w),
                         crop_pos_y=anchor[1] / (h - crop_h))
    images = module.resize(images, size=[150, 150])
    boxes = module.bb_flip(boxes, ltrb=True, horizontal=1)
    images = module.flip(images, horizontal=1)
    encoded, classes = module.box_encoder(boxes, labels, anchors=anchors_ltrb(), offset=True)
    return images, encoded, classes


def test_ssd_pipeline_runs_end_to_end_and_matches_dali_after_the_window(tmp_path, flowers_root):
    root, annotations = small_coco(tmp_path, flowers_root)

    @jaxdali.pipeline_def(batch_size=BATCH, num_threads=2, device_id=None, seed=9)
    def ours():
        jpegs, boxes, labels = fn.readers.coco(file_root=root, annotations_file=annotations, ltrb=True, ratio=True)
        images = fn.resize(fn.decoders.image(jpegs), size=list(IMAGE_HW))
        anchor, shape, boxes, labels = fn.random_bbox_crop(
            boxes, labels, input_shape=[IMAGE_HW[1], IMAGE_HW[0]], crop_shape=list(CROP_WH), thresholds=[0.0],
            allow_no_crop=False, bbox_layout="xyXY", num_attempts=20)
        return (images, anchor, shape, boxes, labels) + downstream(fn, images, anchor, shape, boxes, labels)

    p = ours()
    out = [[np.asarray(o.at(i)) for i in range(BATCH)] for o in p.run()]
    p.close()
    images, anchor, shape, boxes, labels, final_images, encoded, classes = out
    assert all(s.tolist() == list(CROP_WH) for s in shape)
    assert all(len(b) == len(lab) > 0 for b, lab in zip(boxes, labels))
    assert all(im.shape == (150, 150, 3) for im in final_images)

    @dali.pipeline_def(batch_size=BATCH, num_threads=2, device_id=None, seed=9)
    def theirs():
        jpegs, _, _ = dali_fn.readers.coco(file_root=root, annotations_file=annotations, ltrb=True, ratio=True)
        decoded = dali_fn.resize(dali_fn.decoders.image(jpegs), size=list(IMAGE_HW))
        fed = [dali_fn.external_source(source=_constant(batch)) for batch in (anchor, shape, boxes, labels)]
        return (decoded,) + downstream(dali_fn, decoded, *fed)

    q = theirs()
    q.build()
    d_images, d_final, d_encoded, d_classes = [[np.asarray(o[i]) for i in range(BATCH)] for o in q.run()]
    for ours_, dali_ in zip(images, d_images):
        assert np.abs(ours_.astype(int) - dali_.astype(int)).max() <= 1  # decode + resize, as tested elsewhere
    for name, a, b in (("classes", classes, d_classes), ("boxes", encoded, d_encoded)):
        for x, y in zip(a, b):
            np.testing.assert_allclose(x, y, atol=1e-5, err_msg=name)  # offset logs: 1 ulp, see test_ops_detect
    for ours_, dali_ in zip(final_images, d_final):
        assert np.abs(ours_.astype(int) - dali_.astype(int)).mean() < 1.0
