"""The train and val pipelines in DALI's API, written once for both jaxdali and NVIDIA DALI.

The same graph function runs under either library: the caller passes that library's ``fn`` and
``types`` modules, which is the whole of the port (``nvidia.dali`` -> ``jaxdali``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness import MEAN_255, OUTPUT_SIZE, RANDOM_AREA, RANDOM_ASPECT_RATIO, STD_255, VAL_RESIZE_SHORTER


def graph(pipeline: str, fn: Any, types: Any, layout: str = "CHW") -> Callable:
    """The graph function of ``pipeline`` ("train" or "val") for the library of ``fn``/``types``,
    delivering images in ``layout`` ("CHW", or "HWC": Flax's NHWC convention).

    Its signature, ``(root, shard_id=0, num_shards=1)``, suits both ``pipeline_def`` and the JAX
    ``data_iterator`` decorators (which pass ``shard_id`` and ``num_shards``). The file reader is
    named "Reader" for ``reader_name``; the other operators are named for the time breakdown.
    """

    def train(root: str, shard_id: int = 0, num_shards: int = 1):
        jpegs, labels = fn.readers.file(file_root=root, random_shuffle=True, shard_id=shard_id,
                                        num_shards=num_shards, name="Reader")
        images = fn.decoders.image_random_crop(jpegs, output_type=types.RGB, random_area=list(RANDOM_AREA),
                                               random_aspect_ratio=list(RANDOM_ASPECT_RATIO), name="decode")
        images = fn.resize(images, resize_x=OUTPUT_SIZE, resize_y=OUTPUT_SIZE, name="resize")
        images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout=layout, mean=list(MEAN_255),
                                          std=list(STD_255), mirror=fn.random.coin_flip(probability=0.5, name="flip"),
                                          name="normalize")
        return images, labels

    def val(root: str, shard_id: int = 0, num_shards: int = 1):
        jpegs, labels = fn.readers.file(file_root=root, shard_id=shard_id, num_shards=num_shards, name="Reader")
        images = fn.decoders.image(jpegs, output_type=types.RGB, name="decode")
        images = fn.resize(images, resize_shorter=VAL_RESIZE_SHORTER, name="resize")
        images = fn.crop_mirror_normalize(images, crop=(OUTPUT_SIZE, OUTPUT_SIZE), dtype=types.FLOAT,
                                          output_layout=layout, mean=list(MEAN_255), std=list(STD_255), name="normalize")
        return images, labels

    return {"train": train, "val": val}[pipeline]
