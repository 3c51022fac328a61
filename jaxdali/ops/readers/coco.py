"""``fn.readers.coco``: encoded images with their boxes, labels and (optionally) masks and image ids."""

from __future__ import annotations

import numpy as np

from jaxdali.ops.readers import storage
from jaxdali.ops.readers.base import LOADER_ARGS, Reader, listing_fingerprint
from jaxdali.ops.readers.coco_annotations import (CocoAnnotations, load_preprocessed, parse_annotations,
                                                  save_preprocessed)
from jaxdali.ops.readers.coco_masks import label_image, rle_from_polygon
from jaxdali.ops.readers.shared_listing import frozen, listing
from jaxdali.ops.schema import Arg, OpArgumentError, OpSchema, register
from jaxdali.tensors import TensorListCPU

__all__ = ["COCO_READER"]

# Arguments that describe how the JSON is parsed: meaningless with preprocessed annotations.
_JSON_ONLY = ("annotations_file", "skip_empty", "ratio", "ltrb", "images", "size_threshold")


#: The arguments the annotations (and so the samples) depend on.
_LISTING_ARGS = ("file_root", "annotations_file", "preprocessed_annotations", "images", "size_threshold", "ltrb",
                 "ratio", "skip_empty", "include_iscrowd", "avoid_class_remapping", "polygon_masks",
                 "pixelwise_masks", "image_ids")


def _list_samples(op: str, a) -> tuple[CocoAnnotations, list[str], str, str]:
    """(annotations, image paths, listing fingerprint, where) of the reader ``fn.<op>``'s arguments ``a``;
    the annotations' arrays are read-only (shared by the readers of one iterator's pipelines)."""
    polygons, pixelwise, image_ids = a["polygon_masks"], a["pixelwise_masks"], a["image_ids"]
    if a["preprocessed_annotations"]:
        ann = load_preprocessed(op, a["preprocessed_annotations"], polygons, pixelwise, image_ids)
    else:
        ann = parse_annotations(
            op, a["annotations_file"], images=list(a["images"]) if a["images"] is not None else None,
            size_threshold=a["size_threshold"], ltrb=a["ltrb"], ratio=a["ratio"], skip_empty=a["skip_empty"],
            include_iscrowd=a["include_iscrowd"], remap_classes=not a["avoid_class_remapping"],
            polygons=polygons, pixelwise=pixelwise, image_ids=image_ids)
    if not len(ann):
        raise RuntimeError(f"fn.{op}: No files found (no image of the annotations is left to read)")
    ann.freeze()
    paths = [storage.join(a["file_root"], n) for n in ann.filenames]
    where = f"the images of {a['annotations_file'] or a['preprocessed_annotations']!r}"
    return ann, paths, listing_fingerprint(ann.filenames, ann.counts), where


class CocoReader(Reader):
    def __init__(self, node, build):
        super().__init__(node, build)
        a = self.args
        op = node.schema.name
        self.polygon_masks, self.pixelwise, self.image_ids = a["polygon_masks"], a["pixelwise_masks"], a["image_ids"]
        if self.polygon_masks and self.pixelwise:
            raise OpArgumentError(f"fn.{op}: pixelwise_masks and polygon_masks are mutually exclusive")
        if a["file_root"] is None:
            raise OpArgumentError(f"fn.{op}: 'file_root' (the folder the images' file names are relative to) "
                                  "is required")
        if bool(a["save_preprocessed_annotations"]) != bool(a["save_preprocessed_annotations_dir"]):
            raise OpArgumentError(f"fn.{op}: save_preprocessed_annotations and save_preprocessed_annotations_dir "
                                  "must be given together")
        if a["preprocessed_annotations"]:
            defaults = node.schema.arg_map
            given = [k for k in _JSON_ONLY if a[k] != defaults[k].default]
            if given:
                raise OpArgumentError(f"fn.{op}: {', '.join(given)} cannot be used when reading "
                                      "preprocessed_annotations")
        elif not a["annotations_file"]:
            raise OpArgumentError(f"fn.{op}: give 'annotations_file' or 'preprocessed_annotations'")
        key = (op,) + tuple(frozen(a[name]) for name in _LISTING_ARGS)
        self.ann, self.paths, self.listing, self.listing_source = listing(key, lambda: _list_samples(op, a))
        if a["save_preprocessed_annotations"]:
            save_dir = a["save_preprocessed_annotations_dir"]
            listing(key + ("saved to", save_dir), lambda: save_preprocessed(
                self.ann, save_dir, self.polygon_masks, self.pixelwise, self.image_ids))
        self.num_samples = len(self.ann)
        self._init_sampling(a["shuffle_after_epoch"], a["shuffle_after_epoch_seed"])
        self._init_read_ahead(self.paths)

    def fetch(self, index: int) -> np.ndarray:
        """The encoded image of dataset sample ``index``."""
        path = self.paths[index]
        try:
            return np.frombuffer(storage.read_file(path), dtype=np.uint8)
        except OSError as e:
            e.add_note(f"fn.{self.node.schema.name}: reading sample {index} ({path!r})")
            raise

    def load(self, ctx, indices):
        ann = self.ann
        images = self.fetch_all(ctx, indices)
        index_list = indices.tolist()
        spans = [slice(ann.offsets[i], ann.offsets[i] + ann.counts[i]) for i in index_list]
        outputs = [TensorListCPU(images, source_info=[ann.filenames[i] for i in index_list]),
                   TensorListCPU([ann.boxes[s] for s in spans]),
                   TensorListCPU([ann.labels[s] for s in spans])]
        if self.polygon_masks:
            outputs += [TensorListCPU([self._polygons(i) for i in index_list]),
                        TensorListCPU([self._vertices(i) for i in index_list])]
        if self.pixelwise:
            outputs.append(TensorListCPU([self._label_image(i) for i in index_list], layout="HWC"))
        if self.image_ids:
            outputs.append(TensorListCPU(ann.original_ids[indices].reshape(-1, 1)))
        return outputs

    def _polygons(self, i: int) -> np.ndarray:
        ann = self.ann
        if not len(ann.polygons):
            return np.zeros((0, 3), np.int32)
        return ann.polygons[ann.polygon_offsets[i]:ann.polygon_offsets[i] + ann.polygon_counts[i]]

    def _vertices(self, i: int) -> np.ndarray:
        ann = self.ann
        if not len(ann.vertices):
            return np.zeros((0, 2), np.float32)
        return ann.vertices[ann.vertex_offsets[i]:ann.vertex_offsets[i] + ann.vertex_counts[i]]

    def _label_image(self, i: int) -> np.ndarray:
        ann = self.ann
        h, w = int(ann.heights[i]), int(ann.widths[i])
        labels = ann.labels[ann.offsets[i]:ann.offsets[i] + ann.counts[i]]
        vertices = self._vertices(i)
        if self.args["ratio"]:  # back to pixels, in float32 as DALI does
            vertices = vertices * np.array([w, h], np.float32)
        vertices = vertices.astype(np.float64)
        polygon_masks: dict[int, list] = {}
        for obj, start, end in self._polygons(i).tolist():
            polygon_masks.setdefault(int(labels[obj]), []).append(rle_from_polygon(vertices[start:end], h, w))
        rle_masks = {}
        first = ann.mask_offsets[i]
        for k in range(first, first + ann.mask_counts[i]):
            rle_masks[int(labels[ann.rle_objects[k]])] = ann.rles[k][0]
        return label_image(h, w, labels, polygon_masks, rle_masks)


def _num_outputs(a) -> int:
    return 3 + 2 * bool(a["polygon_masks"]) + bool(a["pixelwise_masks"]) + bool(a["image_ids"])


_DEPRECATED = {
    "masks": "use polygon_masks=True (its polygons give vertex indices, not coordinate indices)",
    "save_img_ids": "use image_ids",
    "dump_meta_files": "use save_preprocessed_annotations",
    "dump_meta_files_path": "use save_preprocessed_annotations_dir",
    "meta_files_path": "use preprocessed_annotations",
}

COCO_READER = register(OpSchema(
    name="readers.coco", impl=CocoReader, min_inputs=0, max_inputs=0, is_source=True, num_outputs=_num_outputs,
    rejected=_DEPRECATED,
    doc=("Reads a COCO dataset: images under ``file_root`` with the objects of an annotations JSON file "
         "(or of DALI's preprocessed-annotation files). Outputs: the encoded image (1-D uint8), its boxes "
         "(float32 (M, 4), [x, y, w, h] or ``ltrb``), labels (int32 (M,)), then polygons (int32 (P, 3) rows of "
         "object, first vertex, end vertex) and vertices (float32 (V, 2)) with ``polygon_masks``, or a label "
         "image (int32 (H, W, 1), layout HWC) with ``pixelwise_masks``, then the image id (int32 (1,)) with "
         "``image_ids``. Images are ordered by image id (or as listed in ``images``); objects in file order."),
    args=(
        Arg("file_root", "str", None, "Folder the images' file names are relative to (required)."),
        Arg("annotations_file", "str", "", "The COCO annotations JSON file."),
        Arg("images", "strs", None, "File names (as in the annotations) to read, in this order; duplicates repeat."),
        Arg("preprocessed_annotations", "str", "", "Folder of preprocessed annotations (DALI's format)."),
        Arg("save_preprocessed_annotations", "bool", False, "Save the parsed annotations in DALI's binary format."),
        Arg("save_preprocessed_annotations_dir", "str", "", "Where to save the preprocessed annotations."),
        Arg("ltrb", "bool", False, "Boxes as [left, top, right, bottom] instead of [x, y, width, height]."),
        Arg("ratio", "bool", False, "Box and polygon coordinates relative to the image size."),
        Arg("size_threshold", "float", 0.1, "Drop objects whose box width or height is below this (pixels)."),
        Arg("skip_empty", "bool", False, "Skip images with no objects (after filtering)."),
        Arg("include_iscrowd", "bool", True, "Keep objects marked iscrowd=1."),
        Arg("avoid_class_remapping", "bool", False,
            "Return category ids as written instead of 1..number of categories in the order listed."),
        Arg("polygon_masks", "bool", False, "Output the objects' polygons and vertices."),
        Arg("pixelwise_masks", "bool", False, "Output a label image rasterised from polygons and RLE masks."),
        Arg("image_ids", "bool", False, "Output each image's id from the annotations."),
        Arg("shuffle_after_epoch", "bool", False,
            "Reshuffle the whole list every epoch, identically on all shards (implies stick_to_shard)."),
        Arg("shuffle_after_epoch_seed", "int", None, "Base seed of the shuffle_after_epoch orders."),
    ) + LOADER_ARGS))
