"""Smallest useful jaxdali program: read, decode, augment real photos and time the batches.

Run: python examples/quickstart.py [IMAGE_FOLDER]   (default: scikit-learn's digits, see jaxdali.datasets)
"""

from __future__ import annotations

import os
import sys
import time

from jaxdali import fn, pipeline_def, types
from jaxdali.datasets import digits


@pipeline_def(batch_size=32, num_threads=os.cpu_count(), device_id=None, seed=0)
def train_pipeline(root: str):
    jpegs, labels = fn.readers.file(file_root=root, random_shuffle=True, name="Reader")
    images = fn.decoders.image_random_crop(jpegs, output_type=types.RGB)
    images = fn.resize(images, resize_x=224, resize_y=224)
    images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW",
                                      mean=[0.485 * 255, 0.456 * 255, 0.406 * 255],
                                      std=[0.229 * 255, 0.224 * 255, 0.225 * 255],
                                      mirror=fn.random.coin_flip())
    return images, labels


def main() -> None:
    root = sys.argv[1] if len(sys.argv) > 1 else digits()
    pipe = train_pipeline(root)
    epoch = pipe.epoch_size("Reader")
    batches = -(-epoch // pipe.max_batch_size)
    start = time.perf_counter()
    for i in range(batches):
        images, labels = pipe.run()
        if i < 2:
            arr = images.as_array()
            print(f"batch {i}: images {arr.shape} {arr.dtype} mean={arr.mean():.3f}, "
                  f"labels {labels.as_array().ravel()[:8].tolist()}...")
    seconds = time.perf_counter() - start
    print(f"{batches} batches ({batches * pipe.max_batch_size} images) in {seconds:.2f} s: "
          f"{batches * pipe.max_batch_size / seconds:.0f} images/s")
    pipe.close()


if __name__ == "__main__":
    main()
