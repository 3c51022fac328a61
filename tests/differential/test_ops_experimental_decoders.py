"""``fn.experimental.decoders.image*`` (DALI 2.x's aliases of ``fn.decoders.image*``) against real NVIDIA
DALI (CPU): bit-exact, as their ``fn.decoders`` names."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("nvidia.dali")

from tests.differential.twin import PHOTOS, assert_same, run_both  # noqa: E402

COVERED_OPERATORS = ("experimental.decoders.image", "experimental.decoders.image_crop",
                     "experimental.decoders.image_random_crop", "experimental.decoders.image_slice")


def _encoded(n: int) -> list[np.ndarray]:
    return [np.fromfile(p, np.uint8) for p in sorted(PHOTOS.rglob("*.jpg"))[:n]]


CASES = [
    ("image", lambda f, t, x: f.experimental.decoders.image(x, output_type=t.RGB)),
    ("image_crop", lambda f, t, x: f.experimental.decoders.image_crop(x, crop=(50, 60), crop_pos_x=0.2)),
    ("image_slice", lambda f, t, x: f.experimental.decoders.image_slice(x, rel_start=[0.25, 0.1],
                                                                         rel_shape=[0.5, 0.5])),
]


@pytest.mark.parametrize("body", [c[1] for c in CASES], ids=[c[0] for c in CASES])
def test_experimental_decoders_match_dali(body):
    ours, theirs = run_both(body, [_encoded(4)])
    assert_same(ours, theirs)


def test_experimental_random_crop_decoder_with_the_whole_image_matches_dali():
    """Area 1 and the image's own aspect ratio leave one window: the whole image."""
    import cv2

    encoded = _encoded(1)
    h, w = cv2.imdecode(encoded[0], cv2.IMREAD_COLOR).shape[:2]
    ours, theirs = run_both(lambda f, t, x: f.experimental.decoders.image_random_crop(
        x, output_type=t.RGB, random_area=[1.0, 1.0], random_aspect_ratio=[w / h, w / h]), [encoded])
    assert_same(ours, theirs)
    assert ours[0][0].shape == (h, w, 3)
