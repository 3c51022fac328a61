"""fn.readers.coco on a small COCO-format set built from real photos (made-up boxes, polygons and RLE
masks), compared with DALI 2.4's reader on the CPU output by output, bit for bit."""

from __future__ import annotations

import json
import os
import random

import numpy as np
import pytest

import jaxdali
from jaxdali import fn
from jaxdali.ops.readers.coco_masks import rle_from_polygon, rle_from_string

dali = pytest.importorskip("nvidia.dali")
dali_fn = pytest.importorskip("nvidia.dali.fn")
Image = pytest.importorskip("PIL.Image")

#: Operators these tests check against real DALI (collected by tests/test_operator_coverage.py).
COVERED_OPERATORS = ("readers.coco",)


def rle_text(counts) -> str:
    """COCO's compressed RLE text of run lengths (the inverse of rle_from_string)."""
    out = []
    for i, c in enumerate(counts):
        x = int(c) - (int(counts[i - 2]) if i > 2 else 0)
        while True:
            ch = x & 0x1F
            x >>= 5
            more = (x != -1) if ch & 0x10 else (x != 0)
            out.append(chr((ch | 0x20 if more else ch) + 48))
            if not more:
                break
    return "".join(out)


def mask_runs(mask: np.ndarray) -> list[int]:
    flat = mask.T.reshape(-1)
    bounds = np.concatenate(([0], np.flatnonzero(np.diff(flat)) + 1, [flat.size]))
    runs = np.diff(bounds).tolist()
    return [0] + runs if flat[0] else runs


def build_coco(folder, flowers: str, n_images: int = 14, seed: int = 0) -> tuple[str, list[dict]]:
    """A COCO annotations file over real photos: shuffled image ids, non-contiguous category ids listed out
    of order, 1-4 objects per image (tiny ones too), polygons (some explicitly closed), iscrowd RLE masks in
    both encodings, an image without objects, an unknown category and an annotation of a missing image."""
    rng = random.Random(seed)
    files = sorted(os.path.relpath(os.path.join(d, f), flowers)
                   for d, _, names in os.walk(flowers) for f in names if f.endswith(".jpg"))
    files = rng.sample(files, n_images)
    images, anns = [], []
    for k, (name, image_id) in enumerate(zip(files, rng.sample(range(100, 1000), n_images))):
        w, h = Image.open(os.path.join(flowers, name)).size
        images.append({"id": image_id, "file_name": name, "width": w, "height": h})
        if k == 3:
            continue
        for j in range(rng.randint(1, 4)):
            x0, y0 = rng.uniform(0, w * 0.6), rng.uniform(0, h * 0.6)
            bw, bh = rng.uniform(0.05, w * 0.4), rng.uniform(0.05, h * 0.4)
            ann = {"id": len(anns) + 1, "image_id": image_id, "iscrowd": 0,
                   "category_id": rng.choice([12, 3, 40, 7, 7, 99 if k == 5 else 3]),
                   "bbox": [round(x0, 3), round(y0, 3), round(bw, 3), round(bh, 3)]}
            if rng.random() < 0.2 and k % 2:
                mask = np.zeros((h, w), np.uint8)
                mask[int(y0):int(y0 + bh) + 1, int(x0):int(x0 + bw) + 1] = 1
                runs = mask_runs(mask)
                ann["segmentation"] = {"size": [h, w], "counts": runs if j % 2 else rle_text(runs)}
                ann["iscrowd"] = 1
            else:
                rings = []
                for _ in range(rng.randint(1, 2)):
                    ring = [round(v, 2) for _ in range(rng.randint(3, 7))
                            for v in (rng.uniform(x0, x0 + bw), rng.uniform(y0, y0 + bh))]
                    rings.append(ring + ring[:2] if rng.random() < 0.2 else ring)
                ann["segmentation"] = rings
            anns.append(ann)
    anns.append({"id": 999, "image_id": 5, "category_id": 3, "bbox": [1, 1, 5, 5], "iscrowd": 0,
                 "segmentation": [[1, 1, 5, 1, 5, 5]]})
    categories = [{"id": c, "name": f"c{c}"} for c in (12, 3, 40, 7)]
    path = os.path.join(folder, "instances.json")
    with open(path, "w") as f:
        json.dump({"info": {}, "images": images, "annotations": anns, "categories": categories}, f)
    return path, images


@pytest.fixture(scope="module")
def coco(tmp_path_factory, flowers_root):
    folder = tmp_path_factory.mktemp("coco")
    path, images = build_coco(str(folder), flowers_root)
    return flowers_root, path, images, folder


def _run(pipeline_def, lib_fn, file_root, batches=3, batch_size=5, **args):
    @pipeline_def(batch_size=batch_size, num_threads=1, device_id=None, seed=1)
    def p():
        return tuple(lib_fn.readers.coco(file_root=file_root, name="Reader", **args))

    pipe = p()
    pipe.build()
    return pipe, [pipe.run() for _ in range(batches)]


def _compare(file_root, batches=3, **args):
    dali_pipe, expected = _run(dali.pipeline_def, dali_fn, file_root, batches, **args)
    pipe, got = _run(jaxdali.pipeline_def, fn, file_root, batches, **args)
    assert pipe.reader_meta("Reader") == dali_pipe.reader_meta("Reader")
    for d_batch, o_batch in zip(expected, got, strict=True):
        assert len(d_batch) == len(o_batch)
        for d, o in zip(d_batch, o_batch):
            assert (d.dtype, d.layout()) == (o.dtype, o.layout())
            for i in range(len(d)):
                np.testing.assert_array_equal(o.at(i), d.at(i), strict=True)
                assert o[i].source_info() == d[i].source_info()
    return got


@pytest.mark.parametrize("args", [
    {},
    {"ltrb": True, "ratio": True, "image_ids": True},
    {"skip_empty": True, "size_threshold": 20.0, "include_iscrowd": False},
    {"avoid_class_remapping": True, "polygon_masks": True},
    {"polygon_masks": True, "ratio": True, "num_shards": 3, "shard_id": 2, "pad_last_batch": True},
    {"pixelwise_masks": True, "image_ids": True},
    {"pixelwise_masks": True, "ratio": True, "ltrb": True},
], ids=lambda a: ",".join(a) or "defaults")
def test_outputs_match_dali(coco, args):
    root, path, _, _ = coco
    got = _compare(root, annotations_file=path, **args)
    if args.get("pixelwise_masks"):
        labels_seen = set().union(*(np.unique(m).tolist() for batch in got for m in batch[3].samples()))
        assert labels_seen == {0, 1, 2, 3, 4}  # every category painted somewhere: the test has teeth


def test_pixelwise_masks_with_ratio_scale_vertices_back_in_float32(coco, tmp_path):
    """DALI rasterises ratio vertices times the image size in float32: at x = 86.5 on a 333-pixel-wide
    image, float64 would give 86.49999806 and move the polygon's edge by a column."""
    root, _, images, _ = coco
    w, h = 333, 250
    polygons = [[x, 20.0, x, 200.0, x + 30.5, 110.0] for x in (86.5, 67.5, 228.1, 179.7, 181.7)]
    doc = {"images": [{"id": 1, "file_name": images[0]["file_name"], "width": w, "height": h}],
           "categories": [{"id": 1}, {"id": 2}],
           "annotations": [{"id": k, "image_id": 1, "category_id": 1 + k % 2, "bbox": [1, 1, 50, 50], "iscrowd": 0,
                            "segmentation": [p]} for k, p in enumerate(polygons)]}
    path = tmp_path / "ratio.json"
    path.write_text(json.dumps(doc))
    _compare(root, batches=1, batch_size=1, annotations_file=str(path), pixelwise_masks=True, ratio=True)


def test_images_list_order_duplicates_and_unknown_names_match_dali(coco):
    root, path, images, _ = coco
    names = [images[3]["file_name"], images[0]["file_name"], images[0]["file_name"], "nope.jpg",
             images[7]["file_name"]]
    got = _compare(root, batches=2, batch_size=2, annotations_file=path, images=names, image_ids=True)
    assert [s.source_info() for s in got[0][0]] == names[:2]


def test_preprocessed_annotations_are_dalis_files_both_ways(coco):
    root, path, _, folder = coco
    args = dict(pixelwise_masks=True, image_ids=True, skip_empty=True)
    ours, theirs = folder / "saved_by_jaxdali", folder / "saved_by_dali"
    theirs.mkdir()
    _run(jaxdali.pipeline_def, fn, root, 1, annotations_file=path, save_preprocessed_annotations=True,
         save_preprocessed_annotations_dir=str(ours), **args)
    _run(dali.pipeline_def, dali_fn, root, 1, annotations_file=path, save_preprocessed_annotations=True,
         save_preprocessed_annotations_dir=str(theirs), **args)
    assert sorted(os.listdir(ours)) == sorted(os.listdir(theirs))
    for name in os.listdir(theirs):
        assert (ours / name).read_bytes() == (theirs / name).read_bytes(), name
    _compare(root, preprocessed_annotations=str(ours), pixelwise_masks=True, image_ids=True)
    with pytest.raises(ValueError, match="ltrb cannot be used when reading preprocessed_annotations"):
        _run(jaxdali.pipeline_def, fn, root, 1, preprocessed_annotations=str(ours), ltrb=True)


def test_shuffle_after_epoch_resumes_exactly_and_covers_every_image(coco):
    root, path, images, _ = coco

    def pipe(checkpoint=None):
        @jaxdali.pipeline_def(batch_size=4, num_threads=1, device_id=None, enable_checkpointing=True,
                              checkpoint=checkpoint)
        def p():
            return tuple(fn.readers.coco(file_root=root, annotations_file=path, image_ids=True,
                                         shuffle_after_epoch=True))

        return p()

    def ids(p, n):
        return [p.run()[3].as_array().ravel().tolist() for _ in range(n)]

    original = pipe()
    first = ids(original, 2)
    checkpoint = original.checkpoint()
    expected = ids(original, 5)
    assert ids(pipe(checkpoint), 5) == expected
    stream = sum(first + expected, [])
    assert sorted(stream[:14]) == sorted(i["id"] for i in images)
    assert stream[:14] != sorted(stream[:14]) and stream[:14] != stream[14:28]


def test_a_checkpoint_of_rewritten_annotations_is_refused(coco, tmp_path):
    from jaxdali.core.checkpoint import CheckpointError

    root, path, _, _ = coco
    doc = json.loads(open(path).read())
    annotations = tmp_path / "instances.json"
    annotations.write_text(json.dumps(doc))

    def pipe(checkpoint=None):
        @jaxdali.pipeline_def(batch_size=4, num_threads=1, device_id=None, enable_checkpointing=True,
                              checkpoint=checkpoint)
        def p():
            return fn.readers.coco(file_root=root, annotations_file=str(annotations))[1]

        return p()

    original = pipe()
    original.run()
    doc["images"] = [dict(image, id=image["id"] + (5000 if k == 0 else 0)) for k, image in enumerate(doc["images"])]
    annotations.write_text(json.dumps(doc))  # the first image now last, without its objects
    with pytest.raises(CheckpointError, match=r"listing.*instances\.json.*changed"):
        pipe(original.checkpoint()).build()


def test_errors_name_the_argument_or_file(coco, tmp_path):
    root, path, _, _ = coco
    with pytest.raises(ValueError, match="mutually exclusive"):
        _run(jaxdali.pipeline_def, fn, root, 1, annotations_file=path, polygon_masks=True, pixelwise_masks=True)
    with pytest.raises(FileNotFoundError, match="annotations_file .*missing.json"):
        _run(jaxdali.pipeline_def, fn, root, 1, annotations_file=str(tmp_path / "missing.json"))
    bad = tmp_path / "bad.json"
    bad.write_text('{"images": [{"id": 1, "file_name": "a.jpg"}], "annotations": [{"image_id": 1, "bbox": [1, 2]}]}')
    with pytest.raises(ValueError, match="annotation 0 of .*bad.json.*exactly 4 values"):
        _run(jaxdali.pipeline_def, fn, root, 1, annotations_file=str(bad))
    with pytest.raises(ValueError, match="not supported: use polygon_masks"):
        _run(jaxdali.pipeline_def, fn, root, 1, annotations_file=path, masks=True)
    with pytest.raises(FileNotFoundError, match="reading sample 0"):
        _run(jaxdali.pipeline_def, fn, str(tmp_path), 1, annotations_file=path)


def test_rle_text_round_trip_and_polygon_area():
    runs = [0, 5, 3, 1000, 2, 70000, 1]
    assert rle_from_string(rle_text(runs)).tolist() == runs
    # The square from (1, 1) to (4, 4) covers the 3x3 pixels of rows and columns 1..3 (column-major runs).
    square = np.array([[1, 1], [4, 1], [4, 4], [1, 4]], np.float64)
    assert rle_from_polygon(square, 10, 10).tolist() == [11, 3, 7, 3, 7, 3, 66]
