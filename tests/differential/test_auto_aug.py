"""Each standard augmentation of ``jaxdali.auto_aug.augmentations`` against the same augmentation of
``nvidia.dali.auto_aug.augmentations`` (DALI 2.4, CPU), on real photos, with a fixed magnitude bin
and a fixed sign per sample. Equal bit for bit unless a tolerance is stated with its reason."""

from __future__ import annotations

import numpy as np
import pytest

dali = pytest.importorskip("nvidia.dali")
dali_fn = pytest.importorskip("nvidia.dali.fn")
dali_types = pytest.importorskip("nvidia.dali.types")
dali_aug = pytest.importorskip("nvidia.dali.auto_aug.augmentations")
dali_core = pytest.importorskip("nvidia.dali.auto_aug.core")

import jaxdali  # noqa: E402
from jaxdali import fn, types  # noqa: E402
from jaxdali.auto_aug import augmentations as jax_aug  # noqa: E402
from jaxdali.auto_aug import core as jax_core  # noqa: E402

# The augmentations are compositions of operators checked elsewhere; no DALI operator of their own.
COVERED_OPERATORS = ()

# DALI deprecates fn.shapes and the experimental aliases the augmentations use.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

NUM_BINS = 11
SIGNS = np.array([0, 1, 0, 1], dtype=np.int32)  # per photo: keep, negate, keep, negate


@pytest.fixture(scope="module")
def photos(shared_data) -> list[np.ndarray]:
    """Four real RGB photos of different sizes (uint8 HWC)."""
    import cv2

    paths = sorted((shared_data / "flowers").rglob("*.jpg"))[7::50][:4]
    return [cv2.cvtColor(cv2.imread(str(p)), cv2.COLOR_BGR2RGB) for p in paths]


def _run(lib: str, photos: list[np.ndarray], cases: list) -> list[list[np.ndarray]]:
    """Every case's augmentation in one pipeline of ``lib``; per case, its output samples."""
    aug_module, core, lib_fn, lib_types, pipeline_def = (
        (dali_aug, dali_core, dali_fn, dali_types, dali.pipeline_def) if lib == "dali"
        else (jax_aug, jax_core, fn, types, jaxdali.pipeline_def))

    @pipeline_def(batch_size=len(photos), num_threads=2, device_id=None, seed=5, enable_conditionals=True)
    def pipe():
        data = lib_fn.external_source(source=lambda: photos, layout="HWC")
        signs = lib_fn.external_source(source=lambda: list(SIGNS[:len(photos)]))
        shape = lib_fn.shapes(data)
        outputs = []
        for name, magnitude_bin, kwargs, _ in cases:
            extra = {k: shape if v == "<shape>" else v for k, v in kwargs.items()}
            aug = getattr(aug_module, name)
            outputs.append(aug(data, magnitude_bin=core.signed_bin(magnitude_bin, random_sign=signs),
                               num_magnitude_bins=NUM_BINS, **extra))
        return tuple(outputs)

    p = pipe()
    p.build()
    outs = p.run()
    if lib == "jaxdali":
        p.close()
    return [[np.asarray(s) for s in (out.as_cpu() if hasattr(out, "as_cpu") else out)] for out in outs]


# warp_affine and rotate round a few interpolated pixels the other way (within 1, see
# jaxdali/ops/warp.py); saturation rounds a few HSV pixels the other way (within 1).
_WARP, _HSV = 1, 1
CASES = [
    # name, magnitude bin, extra kwargs, tolerance (max abs difference)
    ("shear_x", 7, {}, _WARP), ("shear_y", 4, {}, _WARP),
    ("translate_x", 6, {"shape": "<shape>"}, _WARP), ("translate_y", 9, {"shape": "<shape>"}, _WARP),
    ("translate_x_no_shape", 3, {}, _WARP), ("translate_y_no_shape", 10, {}, _WARP),
    ("rotate", 8, {}, _WARP), ("rotate", 5, {"fill_value": 0, "rotate_keep_size": False}, _WARP),
    ("brightness", 6, {}, 0), ("contrast", 9, {}, 0), ("color", 7, {}, _HSV), ("sharpness", 10, {}, 0),
    ("posterize", 2, {}, 0), ("solarize", 4, {}, 0), ("solarize_add", 5, {}, 0),
    ("invert", 0, {}, 0), ("equalize", 0, {}, 0), ("auto_contrast", 0, {}, 0), ("identity", 0, {}, 0),
]


@pytest.fixture(scope="module")
def both(photos) -> tuple[list, list]:
    """Every case through DALI and through jaxdali (one pipeline each)."""
    return _run("dali", photos, CASES), _run("jaxdali", photos, CASES)


@pytest.mark.parametrize("case", range(len(CASES)), ids=[f"{c[0]}-{c[1]}-{'-'.join(c[2])}" for c in CASES])
def test_augmentation_equals_dali(photos, both, case):
    name, _, _, tolerance = CASES[case]
    expected, got = both[0][case], both[1][case]
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.dtype == e.dtype and g.shape == e.shape
        diff = np.abs(g.astype(np.int32) - e.astype(np.int32))
        assert diff.max() <= tolerance, f"{name}: max difference {diff.max()} at {np.argwhere(diff == diff.max())[0]}"
        assert (diff > 0).mean() < 0.05, f"{name}: {(diff > 0).mean():.1%} of the values differ"
    if name != "identity":
        assert any(not np.array_equal(g, p) for g, p in zip(got, photos)), f"{name} left every photo unchanged"
