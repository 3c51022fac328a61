"""``jaxdali preview DIR -o grid.png``: a PNG grid of one augmented batch of the standard training
pipeline, each image beside its unaugmented original and labelled with its class, to see what the
augmentations do."""

from __future__ import annotations

import argparse
import math

import numpy as np

from jaxdali import fn, pipeline_def, types
from jaxdali.cli.common import UsageError, class_folder, standard_train

__all__ = ["add_parser", "run", "render"]

_STRIP = 18  # pixels of label text under each pair


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("preview", help="PNG grid of an augmented batch with labels", description=__doc__)
    p.add_argument("folder", metavar="DIR", help="ImageNet-style folder: one sub-folder of images per class")
    p.add_argument("-o", "--output", required=True, help="PNG file to write")
    p.add_argument("-n", "--count", type=int, default=16, help="images in the grid")
    p.add_argument("--crop", type=int, default=160, help="side of each augmented image")
    p.add_argument("--seed", type=int, default=0, help="which files and augmentations")
    p.set_defaults(run=run)


@pipeline_def
def _originals(files, labels, crop: int):
    jpegs, _ = fn.readers.file(files=files, labels=labels)
    return fn.resize(fn.decoders.image(jpegs, output_type=types.RGB), size=[crop, crop], mode="not_larger")


def render(folder: str, count: int, crop: int, seed: int) -> np.ndarray:
    """The grid as an RGB uint8 array: ``count`` (original, augmented) pairs over a label strip."""
    import cv2

    files, labels, classes = class_folder(folder)
    rng = np.random.default_rng(seed)
    chosen = sorted(rng.choice(len(files), size=min(count, len(files)), replace=False).tolist())
    files, labels = [files[i] for i in chosen], [labels[i] for i in chosen]
    common = dict(batch_size=len(files), num_threads=2, device_id=None, seed=seed)
    augmented_pipe = standard_train(files, labels, crop=crop, normalize=False, shuffle=False, **common)
    originals_pipe = _originals(files, labels, crop, **common)
    try:
        augmented, out_labels = augmented_pipe.run()
        (originals,) = originals_pipe.run()
    finally:
        augmented_pipe.close()
        originals_pipe.close()
    columns = math.ceil(math.sqrt(len(files)))
    rows = math.ceil(len(files) / columns)
    cell_h, cell_w = crop + _STRIP + 6, 2 * crop + 12  # pairs 2 px apart, cells 10 px apart
    grid = np.full((rows * cell_h, columns * cell_w, 3), 255, np.uint8)
    for i, (original, image, label) in enumerate(zip(originals.samples(), augmented.samples(),
                                                     out_labels.as_array().reshape(-1))):
        y, x = (i // columns) * cell_h, (i % columns) * cell_w
        grid[y:y + original.shape[0], x:x + original.shape[1]] = original
        grid[y:y + crop, x + crop + 2:x + 2 * crop + 2] = image
        cv2.putText(grid, classes[label][:2 * crop // 8], (x + 2, y + crop + _STRIP - 5), cv2.FONT_HERSHEY_SIMPLEX,
                    0.45, (0, 0, 0), 1, cv2.LINE_AA)
    return grid


def run(args: argparse.Namespace) -> int:
    import cv2

    if args.count < 1 or args.crop < 8:
        raise UsageError("--count must be >= 1 and --crop >= 8")
    grid = render(args.folder, args.count, args.crop, args.seed)
    if not cv2.imwrite(args.output, grid[:, :, ::-1]):
        raise UsageError(f"could not write {args.output!r} (a .png path in an existing folder?)")
    print(f"wrote {args.output}: {grid.shape[1]} x {grid.shape[0]} pixels; each pair: the original (left) "
          "and the training augmentation (right)")
    return 0
