"""fn.readers.video_resize: the video reader's sequences, each frame resized as fn.resize resizes it.

DALI 2.4 runs this reader on the GPU only (no CPU oracle), so it is checked against jaxdali's own
fn.readers.video followed by fn.resize, which are checked against DALI elsewhere.
"""

from __future__ import annotations

import numpy as np
import pytest

from jaxdali import fn, pipeline_def, types
from jaxdali.ops.schema import OpArgumentError
from tests.ops.test_video import _encode

pytest.importorskip("av")


@pytest.fixture(scope="module")
def clip(shared_data, tmp_path_factory):
    source = shared_data / "video" / "bigbuckbunny.mp4"
    if not source.exists():
        pytest.skip(f"{source} not found")
    return str(_encode(source, tmp_path_factory.mktemp("video_resize") / "clip.mp4", "libx264"))


@pytest.mark.parametrize("resize", [{"size": [40, 50]}, {"resize_shorter": 32, "interp_type": types.INTERP_NN},
                                    {"resize_x": 30, "mode": "not_larger", "max_size": [20, 30]}])
def test_frames_equal_the_video_readers_resized_by_fn_resize(clip, resize):
    reader = dict(filenames=[clip], labels=[7], sequence_length=3, step=7, random_shuffle=True, seed=3,
                  dtype=types.FLOAT, normalized=True, enable_frame_num=True)

    @pipeline_def(batch_size=4, num_threads=2, device_id=None)
    def pipe():
        frames, label, first = fn.readers.video_resize(name="resized", **reader, **resize)
        plain, plain_label, plain_first = fn.readers.video(name="plain", **reader)
        return frames, label, first, fn.resize(plain, **resize), plain_label, plain_first

    p = pipe()
    for _ in range(2):
        frames, label, first, expected, plain_label, plain_first = (o.as_array() for o in p.run())
        assert frames.dtype == np.float32 and frames.shape[:2] == (4, 3) and frames.shape[1:] == expected.shape[1:]
        np.testing.assert_array_equal(frames, expected)
        np.testing.assert_array_equal(label, plain_label)
        np.testing.assert_array_equal(first, plain_first)
    meta = p.reader_meta()
    assert meta["resized"] == meta["plain"] and meta["resized"]["epoch_size"] == 9  # (60 - 3) // 7 + 1


def test_a_missing_or_doubled_size_names_the_reader(clip):
    for resize in ({}, {"size": [40, 50], "resize_x": 30}):
        @pipeline_def(batch_size=2, num_threads=1, device_id=None)
        def pipe():
            return fn.readers.video_resize(filenames=[clip], sequence_length=2, **resize)

        with pytest.raises(OpArgumentError, match=r"^fn\.readers\.video_resize: exactly one way"):
            pipe().build()
