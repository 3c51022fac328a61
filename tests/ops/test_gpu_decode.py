"""``device="mixed"`` GPU decoding (``jaxdali.ops.gpu_decode``): the decision, the hand-over to JAX and
the decoders' device path.

This machine has no CUDA device. The decision is tested as it is here (host path, reason reported,
option respected); the hand-over is tested with host buffers on JAX's CPU device (same values, same
memory); the decoders' device path runs with nvImageCodec's CPU backend in place of the GPU decoder,
against the host path. Tests that need a CUDA device skip with a reason.
"""

from __future__ import annotations

import pathlib

import jax
import numpy as np
import pytest

from jaxdali import config, fn, pipeline_def, types
from jaxdali.ops import decoders, gpu_decode
from jaxdali.ops.error_policy import SkippedSampleWarning
from jaxdali.tensors import TensorListGPU

DATA = pathlib.Path(__file__).resolve().parents[2].parent / "shared" / "data"

#: Largest and mean per-pixel difference allowed between GPU and host JPEG decodes (assumed, not yet
#: measured on a GPU: DALI's own GPU-vs-CPU decodes differ by a few levels, more at sharp chroma edges).
GPU_VS_HOST_MAX_ERROR, GPU_VS_HOST_MEAN_ERROR = 32, 1.0

needs_cuda = pytest.mark.skipif(not gpu_decode.has_cuda_device(), reason="needs a CUDA JAX device (jax[cuda12])")


def _photos(count: int) -> list[np.ndarray]:
    paths = sorted((DATA / "flowers").glob("*/*.jpg"))[:count] + sorted((DATA / "png").glob("*.png"))[:2]
    if len(paths) < count:
        pytest.skip(f"shared test images not found at {DATA}")
    return [np.fromfile(p, np.uint8) for p in paths]


@pytest.fixture
def gpu_decode_option():
    saved = config.get("gpu_decode")
    yield
    config.update("gpu_decode", saved)


# -- the decision ----------------------------------------------------------------------------------

def test_cpu_device_keeps_the_host_path_and_says_why(gpu_decode_option):
    place, why = gpu_decode.decode_status(None)
    assert place == "host" and "not a CUDA device" in why and "cpu" in why
    beyond = len(jax.local_devices())
    assert gpu_decode.decode_status(beyond) == ("host", f"device_id={beyond} names no local JAX device")
    info = config.runtime_info()
    assert (info["mixed_decode"], info["mixed_decode_reason"]) == (place, why)


def test_option_off_is_respected_before_anything_else(gpu_decode_option):
    config.update("gpu_decode", "off")
    place, why = gpu_decode.decode_status(0)
    assert place == "host" and "JAXDALI_GPU_DECODE=off" in why
    assert config.runtime_info()["mixed_decode_reason"] == why


def test_option_env_var_is_validated():
    option = config.OPTIONS["gpu_decode"]
    assert option.env == "JAXDALI_GPU_DECODE" and option.default == "auto"
    assert option.parse(" OFF ") == "off"
    with pytest.raises(ValueError, match="not one of"):
        option.parse("on")


def test_mixed_decoder_on_a_cpu_device_runs_the_host_path():
    datas = _photos(3)

    @pipeline_def(batch_size=len(datas), num_threads=2, device_id=0, seed=3)
    def pipe():
        return fn.decoders.image(fn.external_source(source=lambda: datas, batch=True), device="mixed")

    p = pipe()
    p.build()
    try:
        (out,) = p.run()
    finally:
        p.close()
    assert isinstance(out, TensorListGPU)
    for got, data in zip(_samples(out), datas):
        np.testing.assert_array_equal(got, decoders.decode_image(data))


# -- the hand-over to JAX --------------------------------------------------------------------------

def _at_offset(values: np.ndarray, offset: int) -> np.ndarray:
    """A copy of ``values`` whose data starts ``offset`` bytes after a 64-byte boundary."""
    raw = np.empty(values.nbytes + 128, np.uint8)
    start = (-raw.ctypes.data) % 64 + offset
    out = raw[start:start + values.nbytes].view(values.dtype).reshape(values.shape)
    out[...] = values
    return out


def test_aligned_numpy_buffer_becomes_a_jax_array_without_a_copy():
    cpu = jax.local_devices()[0]
    values = np.random.default_rng(0).integers(0, 256, (37, 53, 3), np.uint8)
    host = _at_offset(values, 0)
    array = gpu_decode.to_jax(host, cpu)
    assert array.devices() == {cpu} and array.dtype == np.uint8
    np.testing.assert_array_equal(np.asarray(array), values)
    assert array.unsafe_buffer_pointer() == host.ctypes.data
    # XLA:CPU addresses only 64-byte aligned memory: JAX copies anything else, with the same values.
    misaligned = _at_offset(values, 8)
    np.testing.assert_array_equal(np.asarray(gpu_decode.to_jax(misaligned, cpu)), values)


def test_strided_host_view_is_made_contiguous_once_with_the_same_values():
    cpu = jax.local_devices()[0]
    host = np.random.default_rng(1).integers(0, 256, (20, 30, 3), np.uint8)
    flipped = host[::-1, :, ::-1]
    np.testing.assert_array_equal(np.asarray(gpu_decode.to_jax(flipped, cpu)), flipped)


def _needs_nvimagecodec_backend() -> None:
    """The device path decodes with nvImageCodec; CI's second pass runs with config decoder="opencv"."""
    backend, why = decoders.backend_status()
    if backend != "nvimgcodec":
        pytest.skip(f"the device path decodes with nvImageCodec; the decoding backend here is {backend} ({why})")


def test_nvimagecodec_host_image_is_handed_over_without_a_copy():
    _needs_nvimagecodec_backend()
    cpu = jax.local_devices()[0]
    data = _photos(1)[0]
    nvi = decoders._nvimgcodec_module()
    image = decoders._decoder("").decode(nvi.CodeStream(data), params=decoders._device_params(
        decoders._DecodeSpec(types.RGB, np.dtype(np.uint8), False)))
    assert not gpu_decode._is_device_image(image)  # a host image: viewed through __array_interface__
    array = gpu_decode.to_jax(image, cpu)
    assert array.unsafe_buffer_pointer() == image.__array_interface__["data"][0]
    np.testing.assert_array_equal(np.asarray(array), decoders.decode_image(data))


# -- the decoders' device path, with nvImageCodec's CPU backend standing in for the GPU decoder -----

@pytest.fixture
def device_path_on_cpu(monkeypatch, gpu_ops_as_jax):
    """Makes the decision say "gpu" and ``gpu_decoder`` return the CPU backend's decoder, so that the
    operators build and run their device path on this machine."""
    _needs_nvimagecodec_backend()
    monkeypatch.setattr(gpu_decode, "decode_status", lambda device_id: ("gpu", "test: CPU backend as GPU"))
    monkeypatch.setattr(gpu_decode, "gpu_decoder", lambda device, codec_options: decoders._decoder(codec_options))


def _run(op, datas, device, iterations=2, **kwargs):
    @pipeline_def(batch_size=len(datas), num_threads=2, device_id=0, seed=11)
    def pipe():
        images = fn.external_source(source=lambda: datas, batch=True)
        return op(images, device=device, **kwargs)

    p = pipe()
    p.build()
    try:
        return [p.run()[0] for _ in range(iterations)]
    finally:
        p.close()


def _samples(batch) -> list[np.ndarray]:
    batch = batch.as_cpu()
    return [np.asarray(batch.at(i)) for i in range(len(batch))]


@pytest.mark.parametrize("op", [fn.decoders.image, fn.decoders.image_random_crop])
def test_device_path_gives_the_host_paths_values(device_path_on_cpu, op):
    datas = _photos(6)
    device_out = _run(op, datas, "mixed")
    host_out = _run(op, datas, "cpu")
    for device_batch, host_batch in zip(device_out, host_out):
        assert isinstance(device_batch, TensorListGPU)
        assert all(isinstance(s, jax.Array) for s in device_batch.samples())
        for got, want in zip(_samples(device_batch), _samples(host_batch)):
            np.testing.assert_array_equal(got, want)


def test_device_path_orients_on_the_device_and_falls_back_to_the_host(device_path_on_cpu, tmp_path, capfd):
    from PIL import Image

    good = _photos(2)  # skips without the shared photos
    photo = np.asarray(Image.open(sorted((DATA / "flowers").glob("*/*.jpg"))[0]))
    rotated = tmp_path / "rotated.jpg"
    exif = Image.Exif()
    exif[0x0112] = 6
    Image.fromarray(photo).save(rotated, exif=exif.tobytes(), quality=95)
    corrupt = good[0][: len(good[0]) // 3]  # truncated: refused on the host fallback
    datas = [np.fromfile(rotated, np.uint8), *good, corrupt]
    with pytest.warns(SkippedSampleWarning, match="sample 5"):
        (device_batch,) = _run(fn.decoders.image, datas, "mixed", iterations=1, error_policy="replace")
        (host_batch,) = _run(fn.decoders.image, datas, "cpu", iterations=1, error_policy="replace")
    assert "Premature end" not in capfd.readouterr().err  # the codecs' messages stay captured
    got, want = _samples(device_batch), _samples(host_batch)
    assert got[0].shape[:2] == photo.shape[1::-1]  # orientation 6: rotated a quarter turn
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    assert device_batch.replaced_rows == host_batch.replaced_rows == (5,)


def test_device_path_feeds_a_fused_device_program_without_leaving_the_device(device_path_on_cpu):
    datas = _photos(4)

    @pipeline_def(batch_size=len(datas), num_threads=2, device_id=0, seed=5)
    def pipe(device):
        images = fn.decoders.image(fn.external_source(source=lambda: datas, batch=True), device=device)
        images = fn.resize(images, resize_x=64, resize_y=48)
        return fn.crop_mirror_normalize(images, dtype=types.FLOAT, mean=[128.0] * 3, std=[64.0] * 3,
                                        output_layout="CHW")

    outs = []
    for device in ("mixed", "cpu"):
        p = pipe(device)
        p.build()
        try:
            outs.append(np.asarray(p.run()[0].as_cpu().as_array()))
        finally:
            p.close()
    np.testing.assert_array_equal(outs[0], outs[1])


def test_same_size_device_images_are_stacked_on_the_device_for_the_program(device_path_on_cpu, monkeypatch):
    datas = [_photos(1)[0]] * 4
    leaves = []
    from jaxdali.pipeline.device_stage import DeviceProgram

    leaf = DeviceProgram.leaf
    monkeypatch.setattr(DeviceProgram, "leaf", lambda self, array: leaves.append(type(array)) or leaf(self, array))

    @pipeline_def(batch_size=len(datas), num_threads=2, device_id=0, seed=5)
    def pipe(device):
        images = fn.decoders.image(fn.external_source(source=lambda: datas, batch=True), device=device)
        return fn.crop_mirror_normalize(images.gpu() if device == "cpu" else images, dtype=types.FLOAT,
                                        mean=[128.0] * 3, std=[64.0] * 3)

    outs = []
    for device in ("mixed", "cpu"):
        leaves.clear()
        p = pipe(device)
        p.build()
        try:
            outs.append(np.asarray(p.run()[0].as_cpu().as_array()))
        finally:
            p.close()
        if device == "mixed":
            assert leaves and all(issubclass(t, jax.Array) for t in leaves)  # no host round trip
    np.testing.assert_array_equal(outs[0], outs[1])


# -- on a CUDA device ------------------------------------------------------------------------------

@needs_cuda
@pytest.mark.parametrize("op", [fn.decoders.image, fn.decoders.image_random_crop])
def test_gpu_decode_matches_the_host_path_on_a_cuda_device(op):
    assert gpu_decode.decode_status(0)[0] == "gpu", gpu_decode.decode_status(0)[1]
    datas = _photos(8)
    device_out = _run(op, datas, "mixed", iterations=1)[0]
    host_out = _run(op, datas, "cpu", iterations=1)[0]
    gpu = jax.local_devices()[0]
    for sample in device_out.samples():
        assert sample.devices() == {gpu}
    for got, want in zip(_samples(device_out), _samples(host_out)):
        assert got.shape == want.shape
        err = np.abs(got.astype(np.int32) - want.astype(np.int32))
        # nvJPEG and libjpeg-turbo differ in IDCT and chroma upsampling (as DALI's GPU and CPU decoders do).
        assert err.max() <= GPU_VS_HOST_MAX_ERROR and err.mean() <= GPU_VS_HOST_MEAN_ERROR


def test_gpu_benchmark_refuses_to_run_without_a_cuda_device():
    if gpu_decode.has_cuda_device():
        pytest.skip("this host has a CUDA device: the benchmark would run")
    import importlib.util

    path = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_decode.py"
    spec = importlib.util.spec_from_file_location("gpu_decode_benchmark", path)
    benchmark = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(benchmark)
    with pytest.raises(SystemExit, match="needs a CUDA device"):
        benchmark.main(["--data", str(DATA / "flowers")])
