"""Random operators against real NVIDIA DALI (CPU). The generators differ, so values cannot be
compared; the distributions can: moments and supports of many draws agree within sampling error,
and random crops whose range admits one window only give DALI's pixels."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("nvidia.dali")

from tests.differential.twin import PHOTOS, assert_same, run_both  # noqa: E402

COVERED_OPERATORS = ("random.coin_flip", "random.uniform", "random.normal", "random.choice",
                     "decoders.image_random_crop", "image_decoder_random_crop", "random_resized_crop", "random.beta")

DRAWS = 4000  # per sample, 4 samples: moments within ~0.03 standard deviations
DUMMY = [np.zeros(1, np.uint8)] * 4

# (id, body, expected support or None)
CASES = [
    ("coin_flip", lambda f, t, x: f.random.coin_flip(probability=0.3, shape=[DRAWS]), {0, 1}),
    ("uniform", lambda f, t, x: f.random.uniform(range=[-2.0, 5.0], shape=[DRAWS]), None),
    ("uniform_values", lambda f, t, x: f.random.uniform(values=[1.0, 2.5, 7.0], shape=[DRAWS]), {1.0, 2.5, 7.0}),
    ("uniform_int", lambda f, t, x: f.random.uniform(range=[0, 4], dtype=t.INT32, shape=[DRAWS]), {0, 1, 2, 3, 4}),
    ("normal", lambda f, t, x: f.random.normal(mean=3.0, stddev=2.0, shape=[DRAWS]), None),
    ("choice", lambda f, t, x: f.random.choice(5, p=[0.1, 0.2, 0.3, 0.3, 0.1], shape=[DRAWS]), {0, 1, 2, 3, 4}),
    ("beta", lambda f, t, x: f.random.beta(alpha=2.0, beta=5.0, shape=[DRAWS]), None),
    ("beta_small_shapes", lambda f, t, x: f.random.beta(alpha=0.3, beta=0.5, shape=[DRAWS]), None),
    ("beta_float64", lambda f, t, x: f.random.beta(alpha=4.0, beta=1.5, shape=[DRAWS], dtype=t.FLOAT64), None),
]


@pytest.mark.parametrize("body,support", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_distribution_matches_dali(body, support):
    ours, theirs = run_both(body, [DUMMY])
    a, b = np.stack(ours[0]), np.stack(theirs[0])
    assert a.shape == b.shape and a.dtype == b.dtype
    scale = max(float(b.std()), 1e-6)
    assert abs(a.mean() - b.mean()) < 0.05 * scale, (a.mean(), b.mean())
    assert abs(a.std() - b.std()) < 0.05 * scale, (a.std(), b.std())
    if support is None:  # continuous: the quantiles agree
        q = [0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99]
        assert np.abs(np.quantile(a, q) - np.quantile(b, q)).max() < 0.12 * scale, (np.quantile(a, q), np.quantile(b, q))
    else:
        assert set(np.unique(a).tolist()) == set(np.unique(b).tolist()) == support
        counts_a = np.array([(a == v).mean() for v in sorted(support)])
        counts_b = np.array([(b == v).mean() for v in sorted(support)])
        assert np.abs(counts_a - counts_b).max() < 0.02, (counts_a, counts_b)


def _encoded(n: int = 4) -> list[np.ndarray]:
    return [np.fromfile(p, np.uint8) for p in sorted(PHOTOS.rglob("*.jpg"))[:n]]


@pytest.mark.parametrize("op", ["decoders.image_random_crop", "image_decoder_random_crop"])
def test_random_crop_decoder_with_the_whole_image_matches_dali(op):
    """Area 1 and the image's own aspect ratio leave one window: the whole image."""
    encoded = _encoded(1)

    def body(f, t, x):
        decoder = f.decoders.image_random_crop if op.startswith("decoders") else f.image_decoder_random_crop
        return decoder(x, output_type=t.RGB, random_area=[1.0, 1.0], random_aspect_ratio=[ratio, ratio])

    import cv2
    h, w = cv2.imdecode(encoded[0], cv2.IMREAD_COLOR).shape[:2]
    ratio = w / h
    ours, theirs = run_both(body, [encoded])
    assert_same(ours, theirs)
    assert ours[0][0].shape == (h, w, 3)


def test_random_resized_crop_with_the_whole_image_matches_dali():
    import cv2
    encoded = _encoded(1)
    h, w = cv2.imdecode(encoded[0], cv2.IMREAD_COLOR).shape[:2]
    ratio = w / h

    def body(f, t, x):
        image = f.decoders.image(x, output_type=t.RGB)
        return f.random_resized_crop(image, size=[64, 80], random_area=[1.0, 1.0], random_aspect_ratio=[ratio, ratio])

    ours, theirs = run_both(body, [encoded])
    a, b = ours[0][0], theirs[0][0]
    assert a.shape == b.shape == (64, 80, 3) and a.dtype == b.dtype
    assert np.abs(a.astype(int) - b.astype(int)).max() <= 1
