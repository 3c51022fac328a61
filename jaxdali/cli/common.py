"""What the subcommands share: the folder check, the standard pipelines and a progress line."""

from __future__ import annotations

import os
import sys
import time

from jaxdali import fn, pipeline_def, types
from jaxdali.ops.readers.file import list_class_folders

__all__ = ["UsageError", "class_folder", "standard_train", "standard_val", "Progress", "MEAN", "STD"]

#: ImageNet's channel means and standard deviations on the 0-255 scale.
MEAN = [0.485 * 255, 0.456 * 255, 0.406 * 255]
STD = [0.229 * 255, 0.224 * 255, 0.225 * 255]


class UsageError(Exception):
    """A bad command line or input folder: reported in one line, without a traceback."""


def class_folder(path: str) -> tuple[list[str], list[int], list[str]]:
    """Files (joined with ``path``), labels and class names of an ImageNet-style folder, as
    ``fn.readers.file(file_root=path)`` lists them; UsageError when there is nothing to read."""
    if not os.path.isdir(path):
        raise UsageError(f"{path!r} is not a folder; give a folder with one sub-folder of images per class")
    names, labels = list_class_folders(path)
    if not names:
        raise UsageError(f"{path!r} has no class sub-folders with image files (*.jpg, *.png, ...)")
    classes = sorted({n.split(os.sep)[0] for n in names})
    return [os.path.join(path, n) for n in names], labels, classes


@pipeline_def
def standard_train(files, labels, crop: int = 224, normalize: bool = True, shuffle: bool = True):
    """ResNet-50 training: random-area crop decode, resize to ``crop``, random flip, normalise (CHW
    float); ``normalize=False`` keeps uint8 HWC pixels (for looking at them)."""
    jpegs, labels = fn.readers.file(files=files, labels=labels, random_shuffle=shuffle, name="Reader")
    images = fn.decoders.image_random_crop(jpegs, output_type=types.RGB, random_area=[0.08, 1.0],
                                           random_aspect_ratio=[3 / 4, 4 / 3], num_attempts=100,
                                           name="decoders.image_random_crop")
    images = fn.resize(images, resize_x=crop, resize_y=crop, name="resize")
    return _finish(images, normalize, mirror=fn.random.coin_flip(probability=0.5, name="random.coin_flip")), labels


@pipeline_def
def standard_val(files, labels, crop: int = 224, normalize: bool = True):
    """ResNet-50 validation: decode, resize the shorter side to ``crop * 8 / 7``, centre crop, normalise."""
    jpegs, labels = fn.readers.file(files=files, labels=labels, name="Reader")
    images = fn.decoders.image(jpegs, output_type=types.RGB, name="decoders.image")
    images = fn.resize(images, resize_shorter=round(crop * 8 / 7), name="resize")
    return _finish(images, normalize, crop=(crop, crop)), labels


def _finish(images, normalize: bool, **crop_mirror):
    if normalize:
        return fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW", mean=MEAN, std=STD,
                                        name="crop_mirror_normalize", **crop_mirror)
    return fn.crop_mirror_normalize(images, dtype=types.UINT8, output_layout="HWC", name="crop_mirror_normalize",
                                    **crop_mirror)


class Progress:
    """A one-line progress display on stderr (redrawn in place on a terminal, silent otherwise)."""

    def __init__(self, label: str, total: int, stream=None):
        self.label, self.total, self.done = label, total, 0
        self.stream = stream or sys.stderr
        self.live = self.stream.isatty()
        self.start = self._last = time.perf_counter()

    def update(self, n: int = 1, note: str = "") -> None:
        self.done += n
        now = time.perf_counter()
        if self.live and (now - self._last > 0.1 or self.done >= self.total):
            self._last = now
            width = 30
            filled = width * self.done // max(self.total, 1)
            self.stream.write(f"\r{self.label} [{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} "
                              f"{note}\x1b[K")
            self.stream.flush()

    def close(self) -> None:
        if self.live:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
