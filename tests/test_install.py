"""Packaging: ``python -m build`` gives an sdist and an (abi3) wheel; both install into fresh virtual
environments, with and without a C compiler, with only the core dependencies, and run a real pipeline
whose outputs equal this checkout's.

The environments hold only jax, numpy and OpenCV (and what they require): no nvImageCodec, torch or
Flax. To keep CI fast they reuse this interpreter's installed copies of those distributions (linked
into a directory named by a ``.pth`` file) instead of downloading them again; jaxdali itself is
installed by pip, from the built files.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import pathlib
import re
import subprocess
import sys
import sysconfig

import numpy as np
import pytest
from packaging.requirements import Requirement

from jaxdali.ops import jpeg_direct

REPO = pathlib.Path(__file__).resolve().parents[1]
FLOWERS = REPO.parent / "shared" / "data" / "flowers"

pytestmark = pytest.mark.slow

#: A real pipeline: 4 photos, random-crop decode, antialiased linear and cubic resizes (the kernel's
#: path); writes the outputs and ``config.runtime_info()`` to the folder in argv[1].
PIPELINE = """
import json, pathlib, sys
import numpy as np
from jaxdali import config, fn, pipeline_def, types

out_dir = pathlib.Path(sys.argv[1])
files = sys.argv[2:]

@pipeline_def(batch_size=len(files), num_threads=2, device_id=None, seed=3)
def pipe():
    jpegs, _ = fn.readers.file(files=files)
    images = fn.decoders.image_random_crop(jpegs, output_type=types.RGB)
    return fn.resize(images, resize_x=96, resize_y=80), fn.resize(images, size=[57, 61], interp_type=types.INTERP_CUBIC)

p = pipe()
p.build()
linear, cubic = p.run()
np.savez(out_dir / "out.npz", *[np.asarray(b.at(i)) for b in (linear, cubic) for i in range(len(files))])
(out_dir / "info.json").write_text(json.dumps(config.runtime_info()))
"""

CORE = ("jax", "numpy", "opencv-python-headless")


def _closure(names) -> list[importlib.metadata.Distribution]:
    """The installed distributions ``names`` and everything they require (no extras)."""
    seen: dict[str, importlib.metadata.Distribution] = {}
    todo = list(names)
    while todo:
        name = re.sub(r"[-_.]+", "-", todo.pop()).lower()
        if name in seen:
            continue
        seen[name] = dist = importlib.metadata.distribution(name)
        for spec in dist.requires or []:
            req = Requirement(spec)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return list(seen.values())


def _fresh_venv(root: pathlib.Path, with_setuptools: bool = False) -> pathlib.Path:
    """A venv (no system site-packages) that sees only the core dependencies; returns its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=120)
    linked = root / "core"
    linked.mkdir()
    names = CORE + (("setuptools",) if with_setuptools else ())
    for dist in _closure(names):
        for top in {pathlib.PurePath(f).parts[0] for f in dist.files or [] if not str(f).startswith("..")}:
            source = pathlib.Path(dist.locate_file(top))
            if source.exists() and not (linked / top).exists():
                (linked / top).symlink_to(source)
    site = pathlib.Path(sysconfig.get_path("purelib", vars={"base": str(root), "platbase": str(root)}))
    (site / "core_dependencies.pth").write_text(str(linked) + "\n")
    return root / "bin" / "python"


def _pip_install(python: pathlib.Path, target: pathlib.Path, env=None, build=False) -> subprocess.CompletedProcess:
    """Installs ``target`` (a wheel or an sdist) into the venv of ``python`` with this interpreter's pip,
    without its dependencies (the venv has the core ones; the others are what it must do without)."""
    args = [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index"]
    if build:
        args += ["--no-build-isolation", "--verbose"]  # the venv's setuptools builds it, offline; show its log
    result = subprocess.run(args + [str(target)], capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def _run_pipeline(python, out_dir: pathlib.Path, env=None):
    out_dir.mkdir(parents=True, exist_ok=True)
    files = [str(p) for p in sorted(FLOWERS.glob("*/*.jpg"))[::50]]
    base = env or {k: v for k, v in os.environ.items() if not k.startswith(("JAXDALI_", "PYTHON", "XLA_"))}
    result = subprocess.run([str(python), "-c", PIPELINE, str(out_dir), *files], capture_output=True, text=True,
                            timeout=300, cwd=out_dir, env={**base, "JAX_PLATFORMS": "cpu"})
    assert result.returncode == 0, result.stderr
    with np.load(out_dir / "out.npz") as z:
        arrays = [z[k] for k in sorted(z.files, key=lambda k: int(k.split("_")[1]))]
    return arrays, json.loads((out_dir / "info.json").read_text())


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, pathlib.Path]:
    """``python -m build`` of this checkout: {"sdist": ..., "wheel": ...}."""
    if not FLOWERS.is_dir():
        pytest.skip(f"shared test photos not found at {FLOWERS}")
    out = tmp_path_factory.mktemp("dist")
    result = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(REPO)],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return {"sdist": next(out.glob("*.tar.gz")), "wheel": next(out.glob("*.whl"))}


@pytest.fixture(scope="module")
def reference(built, tmp_path_factory):
    """The pipeline's outputs in this interpreter, from this checkout (kernel and nvImageCodec if present)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAXDALI_", "XLA_"))}
    env["PYTHONPATH"] = str(REPO)
    return _run_pipeline(sys.executable, tmp_path_factory.mktemp("reference"), env)


def test_the_wheel_is_abi3_installs_and_runs_with_its_kernel(built, reference, tmp_path):
    wheel = built["wheel"].name
    if sys.version_info >= (3, 11):
        assert "-cp311-abi3-" in wheel, wheel
    python = _fresh_venv(tmp_path / "venv")
    _pip_install(python, built["wheel"])
    arrays, info = _run_pipeline(python, tmp_path / "run")
    assert info["resize"] == "compiled kernel", info
    # The installed module, not this checkout's, checked against the source the wheel ships.
    assert "venv" in info["resize_reason"] and info["resize_reason"].endswith("built from this source"), info
    assert info["protobuf_parser"] == "compiled kernel", info
    assert "venv" in info["protobuf_parser_reason"] and info["protobuf_parser_reason"].endswith("this source"), info
    assert info["rice_decoder"] == "compiled kernel" and "venv" in info["rice_decoder_reason"], info
    assert info["normalize"] == "compiled kernel" and "venv" in info["normalize_reason"], info
    if info["decoder"] == "nvimgcodec" and jpeg_direct.kernel_status()[0] == "compiled kernel":
        # built here, so libjpeg-turbo's headers are on this machine: the wheel's build has the kernel too
        assert info["jpeg_decoder"] == "direct libjpeg-turbo" and "venv" in info["jpeg_decoder_reason"], info
    for a, b in zip(arrays, reference[0]):
        np.testing.assert_array_equal(a, b)


def test_the_sdist_installs_without_a_c_compiler_and_resizes_with_numpy(built, reference, tmp_path):
    python = _fresh_venv(tmp_path / "venv", with_setuptools=True)
    no_compiler = tmp_path / "bin"
    no_compiler.mkdir()  # a PATH with no gcc, cc or clang
    env = {"PATH": f"{python.parent}{os.pathsep}{no_compiler}", "CC": "false", "HOME": str(tmp_path),
           "PIP_NO_CACHE_DIR": "1"}
    result = _pip_install(python, built["sdist"], env=env, build=True)
    assert "compiled resize kernel (jaxdali/ops/_resample_kernel.c) was not built" in result.stdout + result.stderr
    site = pathlib.Path(sysconfig.get_path("purelib", vars={"base": str(tmp_path / "venv"),
                                                             "platbase": str(tmp_path / "venv")}))
    assert not list((site / "jaxdali" / "ops").glob("_resample_kernel*.so"))
    arrays, info = _run_pipeline(python, tmp_path / "run")
    assert info["resize"] == "numpy fallback" and "not built" in info["resize_reason"], info
    assert info["protobuf_parser"] == "numpy fallback" and "not built" in info["protobuf_parser_reason"], info
    assert info["rice_decoder"] == "numpy fallback" and "not built" in info["rice_decoder_reason"], info
    assert info["normalize"] == "numpy fallback" and "not built" in info["normalize_reason"], info
    assert info["jpeg_decoder"] != "direct libjpeg-turbo", info
    for a, b in zip(arrays, reference[0]):  # the NumPy path's values are the kernel's, bit for bit
        np.testing.assert_array_equal(a, b)


def test_only_the_core_dependencies_decode_with_opencv(built, reference, tmp_path):
    python = _fresh_venv(tmp_path / "venv")
    _pip_install(python, built["wheel"])
    probe = subprocess.run([str(python), "-c", "import importlib.util as u; print([m for m in ('torch', 'flax', "
                            "'nvidia.nvimgcodec', 'PIL') if u.find_spec(m.split('.')[0]) and u.find_spec(m)])"],
                           capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert probe.stdout.strip() == "[]", probe.stdout + probe.stderr
    arrays, info = _run_pipeline(python, tmp_path / "run")
    assert info["decoder"] == "opencv" and "not installed" in info["decoder_reason"], info
    assert info["nvimgcodec"] == "absent"
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in info.items())
    for a, b in zip(arrays, reference[0]):  # OpenCV decodes the shared photos as nvImageCodec does
        np.testing.assert_array_equal(a, b)
