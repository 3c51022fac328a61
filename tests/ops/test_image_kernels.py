"""The crop, flip and normalise building blocks (``jaxdali.ops.image_kernels``) and the shared helpers
(``jaxdali.ops.layouts``): host and device blocks give the same bits, and the helpers' contracts."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from jaxdali import config
from jaxdali.ops import image_kernels
from jaxdali.ops.image_kernels import (copy_window, device_flip, device_window, flipped, normalize,
                                       normalize_batch_into, normalize_into)
from jaxdali.ops.layouts import allocate_batch, per_channel, resampled_dtype, sample_name
from jaxdali.types import DALIDataType

BATCH = np.random.default_rng(0).integers(0, 256, (3, 7, 9, 3), dtype=np.uint8)


def test_flip_blocks_agree_on_host_and_device():
    flags = np.array([1, 0, 1], np.int32)
    device = np.asarray(device_flip(jnp.asarray(BATCH), 2, jnp.asarray(flags)))
    for i, flag in enumerate(flags):
        np.testing.assert_array_equal(device[i], flipped(BATCH[i], [1] if flag else []))
    np.testing.assert_array_equal(np.asarray(device_flip(jnp.asarray(BATCH), 1, 1)), BATCH[:, ::-1])
    assert device_flip(BATCH, 1, 0) is BATCH


def test_normalize_blocks_give_the_same_bits_on_host_and_device_and_in_place():
    offset = np.array([120.5, 110.25, 99.0], np.float32)
    factor = np.array([1 / 57.1, 1 / 61.3, 1 / 63.7], np.float32)
    host = normalize(BATCH, offset, factor)
    device = np.asarray(normalize(jnp.asarray(BATCH), jnp.asarray(offset), jnp.asarray(factor)))
    assert host.dtype == np.float32 and host.tobytes() == device.tobytes()
    for planar in (False, True):  # HWC destination, and a CHW one seen in HWC order
        dst = np.empty((3, 7, 9), np.float32).transpose(1, 2, 0) if planar else np.empty((7, 9, 3), np.float32)
        normalize_into(BATCH[0], dst, offset, factor, c_axis=2)
        assert np.ascontiguousarray(dst).tobytes() == host[0].tobytes()


@pytest.mark.parametrize("channels", [1, 3, 4])
def test_compiled_normalize_gives_numpys_bits_for_every_destination_view(channels):
    """``normalize_into`` on uint8 images (the compiled kernel where built) against NumPy's
    ``normalize``: HWC and CHW destinations, mirrored or not, from whole images and crop views."""
    if image_kernels.normalize_kernel_status()[0] != "compiled kernel":
        pytest.skip(f"compiled normalisation kernel not in use: {image_kernels.normalize_kernel_status()[1]}")
    rng = np.random.default_rng(channels)
    image = rng.integers(0, 256, (37, 53, channels), dtype=np.uint8)
    offset = rng.uniform(0, 255, channels).astype(np.float32)
    factor = (1 / rng.uniform(1, 80, channels)).astype(np.float32)
    for src in (image, image[3:30, 5:49]):  # a crop: rows and pixels not contiguous with each other
        want = normalize(src, offset, factor)
        h, w, c = src.shape
        for planar in (False, True):
            for mirror in (False, True):
                out = np.full((c, h, w) if planar else (h, w, c), np.nan, np.float32)
                dst = out.transpose(1, 2, 0) if planar else out
                normalize_into(src, dst[:, ::-1] if mirror else dst, offset, factor, c_axis=2)
                got = dst[:, ::-1] if mirror else dst
                np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32), err_msg=f"{planar=} {mirror=}")
    saved = config.get("disable_kernel")
    try:  # the NumPy path gives the same bits
        config.update("disable_kernel", True)
        dst = np.empty((channels, 37, 53), np.float32).transpose(1, 2, 0)[:, ::-1]
        normalize_into(image, dst, offset, factor, c_axis=2)
        np.testing.assert_array_equal(dst.view(np.uint32), normalize(image, offset, factor).view(np.uint32))
    finally:
        config.update("disable_kernel", saved)


@pytest.mark.parametrize("kernel", ["compiled kernel", "numpy fallback"])
@pytest.mark.parametrize("channels", [1, 3, 4])
def test_batch_normalize_gives_numpys_bits_mirroring_the_flagged_samples(channels, kernel):
    """``normalize_batch_into``: every sample as ``normalize`` computes it, its W axis reversed where its
    flag is set, into HWC and CHW batches; from whole images (the kernel's vectorised rows) and from
    crops (rows that are not contiguous), with widths that are not a multiple of a vector."""
    if kernel == "compiled kernel" and image_kernels.normalize_kernel_status()[0] != "compiled kernel":
        pytest.skip(f"compiled normalisation kernel not in use: {image_kernels.normalize_kernel_status()[1]}")
    rng = np.random.default_rng(channels)
    images = rng.integers(0, 256, (5, 21, 37, channels), dtype=np.uint8)
    offset = rng.uniform(0, 255, channels).astype(np.float32)
    factor = (1 / rng.uniform(1, 80, channels)).astype(np.float32)
    flags = np.array([1, 0, 1, 1, 0], np.int32)
    saved = config.get("disable_kernel")
    try:
        config.update("disable_kernel", kernel == "numpy fallback")
        for samples in (list(images), [image[2:19, 3:34] for image in images]):
            h, w, c = samples[0].shape
            want = np.stack([normalize(x, offset, factor)[:, ::-1] if f else normalize(x, offset, factor)
                             for x, f in zip(samples, flags)])
            for planar in (False, True):
                out = np.full((5, c, h, w) if planar else (5, h, w, c), np.nan, np.float32)
                dst = out.transpose(0, 2, 3, 1) if planar else out
                normalize_batch_into(samples, dst, offset, factor, flags)
                np.testing.assert_array_equal(dst.view(np.uint32), want.view(np.uint32), err_msg=f"{planar=}")
            normalize_batch_into(samples, dst, offset, factor, None)  # no flags: nothing mirrored
            np.testing.assert_array_equal(dst, np.stack([normalize(x, offset, factor) for x in samples]))
    finally:
        config.update("disable_kernel", saved)


def test_batch_normalize_refuses_mismatched_samples():
    if image_kernels.normalize_kernel_status()[0] != "compiled kernel":
        pytest.skip(f"compiled normalisation kernel not in use: {image_kernels.normalize_kernel_status()[1]}")
    one = np.zeros((4, 6, 3), np.uint8)
    offset = factor = np.ones(3, np.float32)
    with pytest.raises(ValueError, match="normalize_batch"):
        normalize_batch_into([one, one[:3]], np.empty((2, 4, 6, 3), np.float32), offset, factor, None)
    with pytest.raises(ValueError, match="normalize_batch"):  # one flag for two samples
        normalize_batch_into([one, one], np.empty((2, 4, 6, 3), np.float32), offset, factor, np.zeros(1, np.int32))


def test_crop_blocks_agree_and_fill_only_outside():
    anchor, size = (-2, 5, 0), (4, 6, 3)  # two rows above the sample, two columns past its right edge
    window, mask = device_window(jnp.asarray(BATCH), list(anchor), size)
    fill = np.array([1, 2, 3], np.uint8)
    device = np.where(np.asarray(mask), np.asarray(window), fill)
    for i in range(len(BATCH)):
        host = np.empty(size, np.uint8)
        copy_window(BATCH[i], host, anchor, fill, "HWC")
        np.testing.assert_array_equal(host, device[i])
        assert (host[:2] == fill).all() and (host[:, 4:] == fill).all()
        np.testing.assert_array_equal(host[2:, :4], BATCH[i, :2, 5:9])

    calls = []

    def lazy_fill():
        calls.append(1)
        return fill

    inside = np.empty((5, 5, 3), np.uint8)
    copy_window(BATCH[0], inside, (1, 2, 0), lazy_fill, "HWC")
    assert not calls  # a window inside the sample never asks for its fill values
    np.testing.assert_array_equal(inside, BATCH[0, 1:6, 2:7])
    padded = np.empty((5, 5, 4), np.uint8)  # one padding channel: filled
    copy_window(BATCH[0], padded, (1, 2, 0), lambda: np.array([9, 9, 9, 7], np.uint8), "HWC")
    assert (padded[..., 3] == 7).all() and np.array_equal(padded[..., :3], BATCH[0, 1:6, 2:7])


def test_layout_helpers():
    assert per_channel("op", "mean", [2.0], 3, "sample 0").tolist() == [2.0, 2.0, 2.0]
    with pytest.raises(ValueError, match="fn.op: 'mean' has 2 values but sample 1 has 3 channels"):
        per_channel("op", "mean", [1.0, 2.0], 3, "sample 1")
    dense = allocate_batch([(2, 3), (2, 3)], np.uint8)
    assert isinstance(dense, np.ndarray) and dense.shape == (2, 2, 3)
    ragged = allocate_batch([(2, 3), (3, 2)], np.float32)
    assert [a.shape for a in ragged] == [(2, 3), (3, 2)]
    assert sample_name(["a.jpg", ""], 0) == "sample 0 (a.jpg)" and sample_name(["a.jpg", ""], 1) == "sample 1"
    assert sample_name(None, 4) == "sample 4"
    assert resampled_dtype("resize", np.dtype(np.uint8), DALIDataType.FLOAT) == np.float32
    assert resampled_dtype("warp_affine", np.dtype(np.float32), DALIDataType.UINT8, float_to_any=True) == np.uint8
    with pytest.raises(TypeError, match="unsupported input/output types float32 -> uint8"):
        resampled_dtype("resize", np.dtype(np.float32), DALIDataType.UINT8)
