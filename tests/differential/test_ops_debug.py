"""``fn.dump_image`` against NVIDIA DALI 2.4 (CPU): the same pass-through output, the same files (names and
bytes) in the working directory, and those files decode (OpenCV) to the input pixels."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("nvidia.dali")

from jaxdali import fn  # noqa: E402
from tests.differential.twin import photos, run  # noqa: E402

COVERED_OPERATORS = ("dump_image",)


def _dumped(lib: str, folder, monkeypatch, batch: list, device: bool = False, **kwargs) -> tuple[list, dict]:
    """The output of one ``dump_image`` batch (per-sample arrays) and the files it wrote, run in ``folder``.

    The source holds that one batch only, so no prefetched iteration rewrites the files while they are read."""
    import nvidia.dali

    import jaxdali

    library = nvidia.dali if lib == "dali" else jaxdali
    folder.mkdir()
    monkeypatch.chdir(folder)

    @library.pipeline_def(batch_size=len(batch), num_threads=2, device_id=0 if device else None)
    def pipe():
        images = library.fn.external_source(source=iter([batch]), batch=True, layout="HWC")
        return library.fn.dump_image(images.gpu() if device else images, **kwargs)

    p = pipe()
    p.build()
    (out,) = p.run()
    out = out.as_cpu() if device else out
    outputs = [np.array(out.at(i)) for i in range(len(batch))]
    if lib == "jaxdali":
        p.close()
    return outputs, {q.name: q.read_bytes() for q in sorted(folder.iterdir())}


@pytest.mark.parametrize("suffix", ["", "flowers"])
def test_dump_image_writes_dalis_files_and_passes_the_input_through(tmp_path, monkeypatch, suffix):
    import cv2

    rgb = photos(3, (37, 53))
    gray = cv2.cvtColor(rgb[0], cv2.COLOR_RGB2GRAY)[:, :, None]
    batch = rgb + [np.ascontiguousarray(gray)]
    ours, our_files = _dumped("jaxdali", tmp_path / "jaxdali", monkeypatch, batch, suffix=suffix)
    theirs, their_files = _dumped("dali", tmp_path / "dali", monkeypatch, batch, suffix=suffix)
    for i, image in enumerate(batch):
        np.testing.assert_array_equal(ours[i], image)
        np.testing.assert_array_equal(theirs[i], image)
    assert sorted(our_files) == sorted(their_files) == [f"{i}-{suffix}-0.ppm" for i in range(len(batch))]
    for name, data in our_files.items():
        assert data == their_files[name], name
        i = int(name.split("-")[0])
        decoded = cv2.imread(str(tmp_path / "jaxdali" / name), cv2.IMREAD_UNCHANGED)
        expected = batch[i][:, :, 0] if batch[i].shape[2] == 1 else cv2.cvtColor(batch[i], cv2.COLOR_RGB2BGR)
        np.testing.assert_array_equal(decoded, expected, err_msg=name)


@pytest.mark.parametrize("sample, message", [
    (np.zeros((4, 5, 3), np.float32), "must be uint8, got float32"),
    (np.zeros((4, 5, 4), np.uint8), r"sample 0 must be a non-empty HWC image with 1 or 3 channels, got shape \(4, 5, 4\)"),
    (np.zeros((4, 5), np.uint8), r"got shape \(4, 5\)"),
    (np.zeros((0, 5, 3), np.uint8), r"got shape \(0, 5, 3\)"),
])
def test_dump_image_refuses_what_dali_refuses(tmp_path, monkeypatch, sample, message):
    monkeypatch.chdir(tmp_path)
    with pytest.raises((TypeError, ValueError), match=f"fn.dump_image: .*{message}"):
        run("jaxdali", lambda fn, types, x: fn.dump_image(x), [[sample]])
    assert not list(tmp_path.iterdir())


def test_dump_image_input_layout_must_be_hwc(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="fn.dump_image: argument 'input_layout' must be 'HWC'.*'CHW'"):
        run("jaxdali", lambda fn, types, x: fn.dump_image(x, input_layout="CHW"), [[np.zeros((3, 4, 5), np.uint8)]])


def test_dump_image_schema_matches_dali():
    import inspect

    from nvidia.dali import fn as dali_fn

    from jaxdali.ops.image.dump_image import DUMP_IMAGE

    theirs = inspect.signature(dali_fn.dump_image).parameters
    ours = {a.name: a.default for a in DUMP_IMAGE.args}
    assert ours == {name: theirs[name].default for name in ours} == {"input_layout": "HWC", "suffix": ""}
    assert set(DUMP_IMAGE.devices) == {"cpu", "gpu"}


def test_ascii_pnm_of_extreme_values():
    from jaxdali.ops.image.dump_image import ascii_pnm

    image = np.array([[[0], [255]], [[9], [100]]], np.uint8)
    assert ascii_pnm(image) == b"P2\n2 2\n255\n0 255 \n9 100 \n"


def test_dump_image_on_the_device_writes_the_same_files(tmp_path, monkeypatch):
    batch = photos(2, (20, 30))
    _, on_host = _dumped("jaxdali", tmp_path / "host", monkeypatch, batch)
    outputs, on_device = _dumped("jaxdali", tmp_path / "device", monkeypatch, batch, device=True)
    assert on_device == on_host and len(on_host) == 2
    np.testing.assert_array_equal(outputs[1], batch[1])
