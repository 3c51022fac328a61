"""Shared fixtures: the real photo folders and small synthetic file sets."""

from __future__ import annotations

import os
import pathlib

# Multi-device behaviour is tested on 8 simulated CPU devices; this must precede the first jax import.
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import pytest

# Scripts that tests run as subprocesses; not test modules (nor doctest modules).
collect_ignore_glob = ["plugin/helpers/*"]

REPO = pathlib.Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
FLOWERS = DATA / "flowers"


@pytest.fixture(scope="session")
def flowers_root() -> str:
    """The 200-photo ImageNet-style folder (5 classes x 40); skips when the shared data is absent."""
    if not FLOWERS.is_dir():
        pytest.skip(f"shared test photos not found at {FLOWERS}")
    return str(FLOWERS)


@pytest.fixture(scope="session")
def shared_data() -> pathlib.Path:
    if not DATA.is_dir():
        pytest.skip(f"shared test data not found at {DATA}")
    return DATA


@pytest.fixture
def device_stage_on_cpu(monkeypatch):
    """crop_mirror_normalize moves into the device stage of CPU devices too, as it does for a GPU: CPU devices
    stand in for accelerators in the device-stage tests (by default it runs on the host for a CPU device,
    where the compiled kernel is the faster)."""
    from jaxdali.ops.color import CropMirrorNormalize

    monkeypatch.setattr(CropMirrorNormalize, "offload_to_cpu_devices", True)


@pytest.fixture
def gpu_ops_as_jax():
    """device="gpu" operators run their JAX implementations on the CPU device, as they would on a GPU (config
    ``gpu_ops_on_cpu_device="jax"``; by default they run on the host there): CPU devices stand in for GPUs in
    the device-path tests."""
    from jaxdali import config

    saved = config.get("gpu_ops_on_cpu_device")
    config.update("gpu_ops_on_cpu_device", "jax")
    yield
    config.update("gpu_ops_on_cpu_device", saved)


@pytest.fixture
def subprocess_env() -> dict[str, str]:
    """The environment for a test's child Python: this checkout importable (installed or not) and no
    inherited 8-device XLA flag (a child sets up its own devices)."""
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def make_index_files(folder: pathlib.Path, n: int) -> list[str]:
    """n one-byte files whose content is their index (the spec's "files N"), sorted by name."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        p = folder / f"{i:05d}.bin"
        p.write_bytes(bytes([i % 256]))
        paths.append(str(p))
    return paths


@pytest.fixture
def index_files(tmp_path):
    """Factory: ``index_files(n)`` -> list of n one-byte files whose content is their index."""
    return lambda n: make_index_files(tmp_path / f"files{n}", n)


@pytest.fixture(scope="session")
def digits_root() -> str:
    """scikit-learn's digits as PNG class folders (written once into the user's jaxdali cache)."""
    pytest.importorskip("sklearn")
    from jaxdali.datasets import digits

    return digits()


@pytest.fixture
def digits_subset(tmp_path, digits_root):
    """Factory: ``digits_subset(classes, per_class)`` -> a class-folder tree holding the first
    ``per_class`` real digit PNGs of each of ``classes`` (folder names ``class<digit>``)."""
    import shutil

    def make(classes, per_class: int) -> pathlib.Path:
        root = tmp_path / f"digits_{''.join(classes)}_{per_class}"
        for digit in classes:
            (root / f"class{digit}").mkdir(parents=True)
            for name in sorted(os.listdir(os.path.join(digits_root, digit)))[:per_class]:
                shutil.copy(os.path.join(digits_root, digit, name), root / f"class{digit}" / name)
        return root

    return make


@pytest.fixture(params=["nvimgcodec", "opencv"])
def decoder_backend(request) -> str:
    """Each image decoding backend in turn (config 'decoder'): nvImageCodec (skipped where it is not
    installed), then the OpenCV fallback."""
    from jaxdali import config
    from jaxdali.ops import decoders

    if request.param == "nvimgcodec" and decoders._nvimgcodec_missing() is not None:
        pytest.skip(f"nvImageCodec is not installed: {decoders._nvimgcodec_missing()}")
    previous = config.get("decoder")
    config.update("decoder", request.param)
    try:
        yield request.param
    finally:
        config.update("decoder", previous)
