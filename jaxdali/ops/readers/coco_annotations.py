"""COCO annotations as flat per-sample arrays: parsed from the JSON as DALI does, or loaded from (and
saved to) DALI's preprocessed-annotation files, which both libraries read.

The layout mirrors DALI's: every per-object array is concatenated over the samples and addressed
by a per-sample (offset, count); polygons are (object, first vertex, end vertex) rows into the
sample's vertices. Numbers are float32 as DALI stores them (so ``ltrb`` and ``ratio`` round alike).
"""

from __future__ import annotations

import dataclasses
import json
import os

import numpy as np

from jaxdali.ops.readers import storage
from jaxdali.ops.readers.coco_masks import rle_from_string

__all__ = ["CocoAnnotations", "parse_annotations", "load_preprocessed", "save_preprocessed"]


@dataclasses.dataclass
class CocoAnnotations:
    """Per-sample annotations. ``rles[i]`` is an RLE mask (uint32 counts) of object ``rle_objects[i]``."""

    filenames: list[str]
    offsets: np.ndarray  # int32, first object of each sample
    counts: np.ndarray  # int32, objects per sample
    boxes: np.ndarray  # float32 (objects, 4)
    labels: np.ndarray  # int32 (objects,)
    original_ids: np.ndarray | None = None  # int32 per sample
    polygon_offsets: np.ndarray | None = None  # int64 per sample
    polygon_counts: np.ndarray | None = None
    polygons: np.ndarray | None = None  # int32 (polygons, 3)
    vertex_offsets: np.ndarray | None = None  # int64 per sample
    vertex_counts: np.ndarray | None = None
    vertices: np.ndarray | None = None  # float32 (vertices, 2)
    mask_offsets: np.ndarray | None = None  # int64 per sample
    mask_counts: np.ndarray | None = None
    rle_objects: np.ndarray | None = None  # int32
    rles: list | None = None
    heights: np.ndarray | None = None  # int32 per sample
    widths: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.filenames)

    def freeze(self) -> None:
        """Makes every array read-only, for annotations shared by several readers."""
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if isinstance(value, np.ndarray):
                value.flags.writeable = False
        for counts, _, _ in self.rles or ():
            counts.flags.writeable = False


def _segmentation(ann: dict, want_polygons: bool, want_rle: bool, where: str):
    """("polygon", [coords...]) / ("rle", counts) / None for an annotation's segmentation."""
    seg = ann.get("segmentation")
    if not want_polygons or seg is None:
        return None
    if isinstance(seg, dict):
        if not want_rle:
            return None
        size = seg.get("size") or [-1, -1]
        h, w = int(size[0]), int(size[1])
        if h <= 0 or w <= 0:
            raise ValueError(f"{where}: RLE segmentation without a valid 'size'")
        counts = seg.get("counts")
        if isinstance(counts, str) and counts:
            return "rle", rle_from_string(counts), h, w
        if isinstance(counts, list) and counts:
            return "rle", np.asarray(counts, dtype=np.int64).astype(np.uint32), h, w
        raise ValueError(f"{where}: RLE segmentation with a missing or invalid 'counts'")
    if isinstance(seg, list):
        return "polygon", seg
    return None


def parse_annotations(op: str, path: str, *, images: list[str] | None, size_threshold: float, ltrb: bool,
                      ratio: bool, skip_empty: bool, include_iscrowd: bool, remap_classes: bool, polygons: bool,
                      pixelwise: bool, image_ids: bool) -> CocoAnnotations:
    """The samples of a COCO annotations JSON file, as ``fn.readers.coco`` reads them."""
    try:
        doc = json.loads(storage.read_file(path))
    except FileNotFoundError:
        raise FileNotFoundError(f"fn.{op}: annotations_file {path!r} does not exist") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"fn.{op}: annotations_file {path!r} is not valid JSON: {e}") from None
    if not isinstance(doc, dict):
        raise ValueError(f"fn.{op}: annotations_file {path!r} does not hold a JSON object")
    segmentation = polygons or pixelwise
    image_infos = [i for i in doc.get("images", []) if isinstance(i, dict)]
    categories: dict[int, int] = {}
    for n, cat in enumerate(c for c in doc.get("categories", []) if isinstance(c, dict)):
        if "id" not in cat:
            raise ValueError(f"fn.{op}: a category in {path!r} has no 'id'")
        categories.setdefault(int(cat["id"]), n + 1)
    threshold = np.float32(size_threshold)

    # Objects kept, in file order, grouped by image id.
    by_image: dict[int, list] = {}
    for n, ann in enumerate(doc.get("annotations", [])):
        if not isinstance(ann, dict):
            continue
        where = f"fn.{op}: annotation {n} of {path!r}"
        box = ann.get("bbox", [0, 0, 0, 0])
        if not isinstance(box, list) or len(box) != 4:
            raise ValueError(f"{where}: 'bbox' must contain exactly 4 values, got {box!r}")
        box = np.asarray(box, dtype=np.float64).astype(np.float32)
        if not (box[2] >= threshold and box[3] >= threshold):
            continue
        if ann.get("iscrowd", 0) != 0 and not include_iscrowd:
            continue
        if ltrb:
            box[2:] += box[:2]
        by_image.setdefault(int(ann.get("image_id", 0)), []).append(
            (box, int(ann.get("category_id", 0)), _segmentation(ann, segmentation, pixelwise, where)))

    if images is None:
        order = [info.get("file_name", "") for info in sorted(image_infos, key=lambda i: int(i.get("id", 0)))]
    else:
        order = list(images)
    info_of: dict[str, dict] = {}
    wanted = set(order)
    for info in image_infos:
        if info.get("file_name") in wanted:
            info_of[info["file_name"]] = info

    out = _Builder(segmentation, pixelwise, image_ids)
    for name in order:
        info = info_of.get(name)
        if info is None:
            continue
        objects = by_image.get(int(info.get("id", 0)), [])
        if skip_empty and not objects:
            continue
        out.add(name, info, objects, categories if remap_classes else None, ratio)
    return out.finish()


class _Builder:
    def __init__(self, segmentation: bool, pixelwise: bool, image_ids: bool):
        self.segmentation, self.pixelwise, self.image_ids = segmentation, pixelwise, image_ids
        self.filenames: list[str] = []
        self.counts: list[int] = []
        self.boxes: list[np.ndarray] = []
        self.labels: list[int] = []
        self.ids: list[int] = []
        self.poly_rows: list[tuple[int, int, int]] = []
        self.poly_counts: list[int] = []
        self.coords: list[np.ndarray] = []
        self.vertex_counts: list[int] = []
        self.rle_objects: list[int] = []
        self.rles: list = []
        self.mask_counts: list[int] = []
        self.heights: list[int] = []
        self.widths: list[int] = []

    def add(self, name: str, info: dict, objects: list, categories: dict[int, int] | None, ratio: bool) -> None:
        width, height = np.float32(info.get("width", 0)), np.float32(info.get("height", 0))
        scale = np.array([width, height, width, height], np.float32)
        vertices = polygons = masks = 0
        for k, (box, category, seg) in enumerate(objects):
            self.labels.append(categories.get(category, 0) if categories is not None else category)
            self.boxes.append(box / scale if ratio else box)
            if seg is None:
                continue
            if seg[0] == "polygon":
                for ring in seg[1]:
                    xy = np.asarray(ring, dtype=np.float64).astype(np.float32)
                    if xy.ndim != 1 or xy.size % 2:
                        raise ValueError(f"COCO image {name!r}: a polygon must be a flat list of x, y pairs, "
                                         f"got {len(ring)} values")
                    xy = xy.reshape(-1, 2)
                    self.poly_rows.append((k, vertices, vertices + len(xy)))
                    vertices += len(xy)
                    polygons += 1
                    self.coords.append(xy / scale[:2] if ratio else xy)
            else:
                self.rle_objects.append(k)
                self.rles.append(seg[1:])
                masks += 1
        self.filenames.append(name)
        self.counts.append(len(objects))
        self.ids.append(int(info.get("id", 0)))
        self.poly_counts.append(polygons)
        self.vertex_counts.append(vertices)
        self.mask_counts.append(masks)
        self.heights.append(int(height))
        self.widths.append(int(width))

    def finish(self) -> CocoAnnotations:
        counts = np.asarray(self.counts, np.int32)
        out = CocoAnnotations(
            filenames=self.filenames, offsets=_offsets(counts).astype(np.int32), counts=counts,
            boxes=np.asarray(self.boxes, np.float32).reshape(-1, 4), labels=np.asarray(self.labels, np.int32))
        if self.image_ids:
            out.original_ids = np.asarray(self.ids, np.int32)
        if self.segmentation:
            out.polygon_counts = np.asarray(self.poly_counts, np.int64)
            out.polygon_offsets = _offsets(out.polygon_counts)
            out.polygons = np.asarray(self.poly_rows, np.int32).reshape(-1, 3)
            out.vertex_counts = np.asarray(self.vertex_counts, np.int64)
            out.vertex_offsets = _offsets(out.vertex_counts)
            out.vertices = (np.concatenate(self.coords) if self.coords else np.zeros((0, 2), np.float32))
        if self.pixelwise:
            out.mask_counts = np.asarray(self.mask_counts, np.int64)
            out.mask_offsets = _offsets(out.mask_counts)
            out.rle_objects = np.asarray(self.rle_objects, np.int32)
            out.rles = self.rles
            out.heights = np.asarray(self.heights, np.int32)
            out.widths = np.asarray(self.widths, np.int32)
        return out


def _offsets(counts: np.ndarray) -> np.ndarray:
    return np.concatenate(([0], np.cumsum(counts)[:-1])).astype(np.int64) if len(counts) else np.zeros(0, np.int64)


# -- DALI's preprocessed-annotation files ------------------------------------------------------------------
# Each array file is a uint32 element count then the raw little-endian elements; files of empty
# arrays are not written (and read back as empty). filenames.dat is one name per line. The
# element types are DALI's: int32 offsets/counts/labels, float32 boxes and vertices, int64
# per-sample polygon/vertex/mask offsets and counts.

_ARRAYS = {  # attribute: (file, dtype, row shape)
    "offsets": ("offsets.dat", np.int32, ()),
    "boxes": ("boxes.dat", np.float32, ()),  # counted in floats: DALI stores a flat vector
    "labels": ("labels.dat", np.int32, ()),
    "counts": ("counts.dat", np.int32, ()),
}
_POLYGON_ARRAYS = {
    "polygons": ("polygon_data.dat", np.int32, (3,)),
    "polygon_offsets": ("polygon_offset.dat", np.int64, ()),
    "polygon_counts": ("polygons_count.dat", np.int64, ()),
    "vertices": ("vertices.dat", np.float32, (2,)),
    "vertex_offsets": ("vertices_offset.dat", np.int64, ()),
    "vertex_counts": ("vertices_count.dat", np.int64, ()),
}
_MASK_ARRAYS = {
    "rle_objects": ("masks_rles_idx.dat", np.int32, ()),
    "mask_offsets": ("masks_offset.dat", np.int64, ()),
    "mask_counts": ("mask_count.dat", np.int64, ()),
    "heights": ("heights.dat", np.int32, ()),
    "widths": ("widths.dat", np.int32, ()),
}
_IDS = {"original_ids": ("original_ids.dat", np.int32, ())}
_RLES = "masks_rles.dat"


def save_preprocessed(ann: CocoAnnotations, folder: str, polygons: bool, pixelwise: bool, image_ids: bool) -> None:
    """Writes ``ann`` as DALI's preprocessed-annotation files into the local ``folder``."""
    os.makedirs(folder, exist_ok=True)
    groups = [_ARRAYS] + [_POLYGON_ARRAYS] * (polygons or pixelwise) + [_MASK_ARRAYS] * pixelwise + [_IDS] * image_ids
    for group in groups:
        for attr, (name, dtype, row) in group.items():
            data = np.ascontiguousarray(getattr(ann, attr), dtype=np.dtype(dtype).newbyteorder("<"))
            data = data.reshape((-1,) + row)
            rows = len(data)
            if rows:
                with open(os.path.join(folder, name), "wb") as f:
                    f.write(np.uint32(rows).tobytes() + data.tobytes())
    if ann.filenames:
        with open(os.path.join(folder, "filenames.dat"), "w", encoding="utf-8") as f:
            f.writelines(n + "\n" for n in ann.filenames)
    if pixelwise and ann.rles:
        with open(os.path.join(folder, _RLES), "wb") as f:
            f.write(np.uint32(len(ann.rles)).tobytes())
            for counts, h, w in ann.rles:
                f.write(np.asarray([h, w, len(counts)], "<u8").tobytes() + np.asarray(counts, "<u4").tobytes())


def load_preprocessed(op: str, folder: str, polygons: bool, pixelwise: bool, image_ids: bool) -> CocoAnnotations:
    """Reads DALI's preprocessed-annotation files from ``folder``."""
    if not storage.isdir(folder):
        raise FileNotFoundError(f"fn.{op}: preprocessed_annotations {folder!r} is not a directory")
    fields: dict = {}
    groups = [_ARRAYS] + [_POLYGON_ARRAYS] * (polygons or pixelwise) + [_MASK_ARRAYS] * pixelwise + [_IDS] * image_ids
    for group in groups:
        for attr, (name, dtype, row) in group.items():
            fields[attr] = _read_array(op, storage.join(folder, name), dtype, row)
    names_path = storage.join(folder, "filenames.dat")
    fields["filenames"] = (storage.read_file(names_path).decode("utf-8").split()
                           if storage.isfile(names_path) else [])
    if pixelwise:
        fields["rles"] = _read_rles(op, storage.join(folder, _RLES))
    fields["boxes"] = fields["boxes"].reshape(-1, 4)
    ann = CocoAnnotations(**fields)
    n = len(ann.filenames)
    for attr in ("offsets", "counts", "original_ids", "polygon_offsets", "polygon_counts", "vertex_offsets",
                 "vertex_counts", "mask_offsets", "mask_counts", "heights", "widths"):
        value = getattr(ann, attr)
        if value is not None and len(value) != n and not (attr.startswith(("polygon", "vertex")) and not len(value)):
            raise ValueError(f"fn.{op}: preprocessed annotations in {folder!r} are inconsistent: {len(value)} "
                             f"entries for {attr}, {n} file names")
    return ann


def _read_array(op: str, path: str, dtype, row: tuple) -> np.ndarray:
    dtype = np.dtype(dtype).newbyteorder("<")
    if not storage.isfile(path):
        return np.zeros((0,) + row, dtype.newbyteorder("="))
    data = storage.read_file(path)
    if len(data) < 4:
        raise ValueError(f"fn.{op}: preprocessed annotation file {path!r} is truncated")
    rows = int(np.frombuffer(data[:4], "<u4")[0])
    size = rows * int(np.prod(row, dtype=np.int64)) * dtype.itemsize
    if len(data) - 4 < size:
        raise ValueError(f"fn.{op}: preprocessed annotation file {path!r} is truncated: {rows} rows need "
                         f"{size} bytes, {len(data) - 4} present")
    return np.frombuffer(data, dtype, count=size // dtype.itemsize, offset=4).reshape((rows,) + row).astype(
        dtype.newbyteorder("="))


def _read_rles(op: str, path: str) -> list:
    if not storage.isfile(path):
        return []
    data = storage.read_file(path)
    n, pos, out = int(np.frombuffer(data[:4], "<u4")[0]), 4, []
    for _ in range(n):
        if pos + 24 > len(data):
            raise ValueError(f"fn.{op}: preprocessed annotation file {path!r} is truncated")
        h, w, m = (int(v) for v in np.frombuffer(data, "<u8", count=3, offset=pos))
        pos += 24
        if pos + 4 * m > len(data):
            raise ValueError(f"fn.{op}: preprocessed annotation file {path!r} is truncated")
        out.append((np.frombuffer(data, "<u4", count=m, offset=pos).astype(np.uint32), h, w))
        pos += 4 * m
    return out
