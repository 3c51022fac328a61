"""ImageNet-size stand-ins for a folder of small photos: each photo resized so that its longer side
is 500 px (ImageNet's typical 500×375, about 0.19 MP) and re-encoded as JPEG (quality 90 unless
given), into a temporary folder with the same class sub-folders. Never committed: the runner makes it
per run.

    python benchmarks/upscaled.py SRC DST [QUALITY]     # or run.py --upscaled [--upscaled-quality Q]
"""

from __future__ import annotations

import os
import sys

from harness import list_images

LONGER_SIDE = 500
QUALITY = 90


def write_upscaled(src: str, dst: str, quality: int = QUALITY) -> int:
    """Writes the upscaled copies of ``src``'s images under ``dst`` (JPEG ``quality``); returns how many."""
    from PIL import Image

    samples = list_images(src)
    for path, _ in samples:
        out = os.path.join(dst, os.path.relpath(path, src))
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with Image.open(path) as image:
            image = image.convert("RGB")
            scale = LONGER_SIDE / max(image.size)
            size = (max(1, round(image.width * scale)), max(1, round(image.height * scale)))
            image.resize(size, Image.Resampling.LANCZOS).save(os.path.splitext(out)[0] + ".jpg", quality=quality)
    return len(samples)


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        raise SystemExit(__doc__)
    print(write_upscaled(sys.argv[1], sys.argv[2], *(int(q) for q in sys.argv[3:])), "images written")
