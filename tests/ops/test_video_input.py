"""``fn.experimental.inputs.video``: bit for bit against DALI 2.4's CPU operator on VP9 (the codecs DALI's CPU
backend decodes), against PyAV's frames on H.264 (which DALI's CPU backend refuses), and its feeding rules."""

from __future__ import annotations

import numpy as np
import pytest

import jaxdali
from jaxdali import fn
from tests.ops.test_video import FRAMES, _reference, bunny, videos  # noqa: F401  (fixtures)

av = pytest.importorskip("av")

COVERED_OPERATORS = ("experimental.inputs.video",)


def _batches(lib, ns, encoded: list[np.ndarray], runs: int, **args) -> list:
    """Each run's sequences (or the error's first line) after feeding ``encoded`` videos."""

    @lib.pipeline_def(batch_size=3, num_threads=2, device_id=None, prefetch_queue_depth=1)
    def pipe():
        return ns.experimental.inputs.video(name="vid", device="cpu", **args)

    p = pipe()
    p.build()
    for video in encoded:
        p.feed_input("vid", [video])
    out = []
    for _ in range(runs):
        (batch,) = p.run()
        out.append([np.array(batch[i]) for i in range(len(batch))])
    return out


@pytest.mark.parametrize("args", [dict(sequence_length=8), dict(sequence_length=8, last_sequence_policy="pad"),
                                  dict(sequence_length=5), dict(sequence_length=25, last_sequence_policy="pad")])
def test_matches_dali_bit_for_bit_across_two_fed_videos(videos, args):
    dali = pytest.importorskip("nvidia.dali")
    import nvidia.dali.fn as dali_fn

    data = np.fromfile(videos["vp9"], np.uint8)
    sequences = -(-FRAMES // args["sequence_length"])
    runs = 2 * -(-sequences // 3)
    want = _batches(dali, dali_fn, [data, data], runs, **args)
    got = _batches(jaxdali, fn, [data, data], runs, **args)
    assert [len(b) for b in got] == [len(b) for b in want]
    for want_batch, got_batch in zip(want, got):
        for w, g in zip(want_batch, got_batch):
            assert g.dtype == w.dtype and g.shape == w.shape
            np.testing.assert_array_equal(g, w)


def test_h264_streams_every_frame_in_order_with_a_padded_tail(videos):
    reference = _reference(videos["h264"])
    data = np.fromfile(videos["h264"], np.uint8)
    batches = _batches(jaxdali, fn, [data], 3, sequence_length=7, last_sequence_policy="pad")
    frames = np.concatenate([s for batch in batches for s in batch])
    assert [len(b) for b in batches] == [3, 3, 3] and len(frames) == 63
    np.testing.assert_array_equal(frames[:FRAMES], reference)
    assert not frames[FRAMES:].any()


def test_default_prefetching_runs_ahead_within_a_video_and_blocking_waits_for_the_next(videos):
    data = np.fromfile(videos["vp9"], np.uint8)

    @jaxdali.pipeline_def(batch_size=4, num_threads=2, device_id=None)
    def pipe():
        return fn.experimental.inputs.video(name="vid", sequence_length=10, blocking=True)

    p = pipe()
    p.build()
    assert p.external_source_names() == ["vid"]
    p.feed_input("vid", data[None])    # a (1, n) batch
    p.feed_input("vid", [data.tobytes()])
    lengths = [[len(s) for s in p.run()[0].samples()] for _ in range(4)]
    assert lengths == [[10] * 4, [10, 10], [10] * 4, [10, 10]]
    p.close()   # a producer blocked waiting for a third video is released


def test_running_out_of_videos_and_bad_feeds_are_errors_naming_the_operator(videos):
    data = np.fromfile(videos["vp9"], np.uint8)

    @jaxdali.pipeline_def(batch_size=8, num_threads=1, device_id=None, prefetch_queue_depth=1)
    def pipe():
        return fn.experimental.inputs.video(name="vid", sequence_length=30)

    p = pipe()
    p.build()
    with pytest.raises(ValueError, match="inputs.video: feed one video per feed_input call .* got 2"):
        p.feed_input("vid", [data, data])
    with pytest.raises(TypeError, match="inputs.video: a fed video must be its encoded bytes as a 1-D uint8 array"):
        p.feed_input("vid", [data.astype(np.float32)])
    p.feed_input("vid", [data[:100]])
    with pytest.raises(Exception, match="inputs.video: fed video 1: cannot"):
        p.run()
    q = pipe()
    q.build()
    q.feed_input("vid", [data])
    assert [len(s) for s in q.run()[0].samples()] == [30, 30]
    with pytest.raises(RuntimeError, match=r"no video left to decode: feed the next one with pipe.feed_input\('vid'"):
        q.run()
