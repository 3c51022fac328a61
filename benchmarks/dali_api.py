"""The train and val pipelines in DALI's API, written once for both jaxdali and NVIDIA DALI.

The same graph function runs under either library: the caller passes that library's ``fn`` and
``types`` modules, which is the whole of the port (``nvidia.dali`` -> ``jaxdali``).
"""

from __future__ import annotations

import atexit
import functools
import os
import tempfile
from collections.abc import Callable
from typing import Any

from harness import (MEAN_255, OUTPUT_SIZE, RANDOM_AREA, RANDOM_ASPECT_RATIO, STD_255, VAL_RESIZE_SHORTER,
                     list_images)

#: How the file reader is told about the files: the three forms DALI's ``fn.readers.file`` accepts.
SOURCES = ("file_root", "files", "file_list")
#: How train takes its random-resized crop: the decoder decodes only the window and ``fn.resize`` scales it
#: (DALI's ResNet recipe), or ``fn.decoders.image`` decodes the image and ``fn.random_resized_crop`` cuts
#: and scales the window (the torchvision-style recipe).
CROPS = ("decoder", "random_resized_crop")


def reader_source(source: str, root: str) -> dict:
    """The ``fn.readers.file`` arguments naming the images of ``root`` in the ``source`` form: the
    folder itself, ``files=`` + ``labels=`` lists, or a ``file_list`` text file (written to a temp dir)."""
    if source == "file_root":
        return {"file_root": root}
    samples = list_images(root)
    if source == "files":
        return {"files": [p for p, _ in samples], "labels": [label for _, label in samples]}
    if source == "file_list":
        return {"file_root": root, "file_list": _file_list(root)}
    raise ValueError(f"source must be one of {SOURCES}, got {source!r}")


@functools.lru_cache(maxsize=None)
def _file_list(root: str) -> str:
    """A file_list of the images of ``root`` (paths relative to it), written once, removed at exit."""
    fd, path = tempfile.mkstemp(prefix="jaxdali-bench-", suffix=".txt")
    with os.fdopen(fd, "w") as f:
        f.writelines(f"{os.path.relpath(p, root)} {label}\n" for p, label in list_images(root))
    atexit.register(os.remove, path)
    return path


def graph(pipeline: str, fn: Any, types: Any, layout: str = "CHW", source: str = "file_root",
          explicit_interp: bool = False, crop: str = "decoder") -> Callable:
    """The graph function of ``pipeline`` ("train" or "val") for the library of ``fn``/``types``,
    delivering images in ``layout`` ("CHW", or "HWC": Flax's NHWC convention), its reader given the
    files in the ``source`` form (``SOURCES``), its resize given ``interp_type=INTERP_LINEAR`` (the
    default) explicitly when ``explicit_interp``, train's crop taken as ``crop`` says (``CROPS``; the two
    draw their windows from different random streams). Every other variant computes the same images.

    Its signature, ``(root, shard_id=0, num_shards=1)``, suits both ``pipeline_def`` and the JAX
    ``data_iterator`` decorators (which pass ``shard_id`` and ``num_shards``). The file reader is
    named "Reader" for ``reader_name``; the other operators are named for the time breakdown.
    """
    resize_args = {"interp_type": types.INTERP_LINEAR} if explicit_interp else {}

    def train(root: str, shard_id: int = 0, num_shards: int = 1):
        jpegs, labels = fn.readers.file(**reader_source(source, root), random_shuffle=True, shard_id=shard_id,
                                        num_shards=num_shards, name="Reader")
        window = dict(random_area=list(RANDOM_AREA), random_aspect_ratio=list(RANDOM_ASPECT_RATIO))
        if crop == "random_resized_crop":
            images = fn.decoders.image(jpegs, output_type=types.RGB, name="decode")
            images = fn.random_resized_crop(images, size=(OUTPUT_SIZE, OUTPUT_SIZE), name="resize", **window,
                                            **resize_args)
        else:
            images = fn.decoders.image_random_crop(jpegs, output_type=types.RGB, name="decode", **window)
            images = fn.resize(images, resize_x=OUTPUT_SIZE, resize_y=OUTPUT_SIZE, name="resize", **resize_args)
        images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout=layout, mean=list(MEAN_255),
                                          std=list(STD_255), mirror=fn.random.coin_flip(probability=0.5, name="flip"),
                                          name="normalize")
        return images, labels

    def val(root: str, shard_id: int = 0, num_shards: int = 1):
        jpegs, labels = fn.readers.file(**reader_source(source, root), shard_id=shard_id, num_shards=num_shards,
                                        name="Reader")
        images = fn.decoders.image(jpegs, output_type=types.RGB, name="decode")
        images = fn.resize(images, resize_shorter=VAL_RESIZE_SHORTER, name="resize", **resize_args)
        images = fn.crop_mirror_normalize(images, crop=(OUTPUT_SIZE, OUTPUT_SIZE), dtype=types.FLOAT,
                                          output_layout=layout, mean=list(MEAN_255), std=list(STD_255),
                                          name="normalize")
        return images, labels

    if crop not in CROPS:
        raise ValueError(f"crop must be one of {CROPS}, got {crop!r}")
    return {"train": train, "val": val}[pipeline]
