"""Video on the CPU: sequence counting, frame selection, keyframe seeking, readers, decoder, resume.

Test videos are encoded here from the shared Big Buck Bunny clip: H.264 with B-frames and VP9, both
with a keyframe every 10 frames, so seeking is exercised. Real DALI (the oracle extra) checks the
VP9 outputs bit for bit; its CPU operators do not decode H.264, which is checked against PyAV.
"""

from __future__ import annotations

import fractions
import pathlib

import numpy as np
import pytest

from jaxdali import fn, pipeline_def, types
from jaxdali.ops.readers.video import sequence_starts, uniform_frames
from jaxdali.ops.video_codec import VideoDecodeError, decode_frames, index_video, padded_indices
from jaxdali.ops.video_decoder import select_frames

av = pytest.importorskip("av")

#: Operators these tests check against real DALI (collected by tests/test_operator_coverage.py).
COVERED_OPERATORS = ("experimental.readers.video", "decoders.video")

FRAMES, WIDTH, HEIGHT, GOP = 60, 96, 64, 10


def _encode(source: pathlib.Path, path: pathlib.Path, codec: str) -> pathlib.Path:
    with av.open(str(source)) as inp, av.open(str(path), "w") as out:
        stream = out.add_stream(codec, rate=25)
        pix_fmt = "yuvj420p" if codec == "mjpeg" else "yuv420p"
        stream.width, stream.height, stream.pix_fmt = WIDTH, HEIGHT, pix_fmt
        stream.codec_context.gop_size = GOP
        if codec == "libx264":
            stream.codec_context.options = {"bf": "2"}
        for i, frame in enumerate(inp.decode(video=0)):
            if i == FRAMES:
                break
            small = frame.reformat(width=WIDTH, height=HEIGHT, format=pix_fmt)
            small.pts, small.time_base = i, fractions.Fraction(1, 25)
            for packet in stream.encode(small):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path


@pytest.fixture(scope="module")
def bunny(shared_data) -> pathlib.Path:
    path = shared_data / "video" / "bigbuckbunny.mp4"
    if not path.exists():
        pytest.skip(f"{path} not found")
    return path


@pytest.fixture(scope="module")
def videos(bunny, tmp_path_factory) -> dict[str, pathlib.Path]:
    root = tmp_path_factory.mktemp("videos")
    return {"h264": _encode(bunny, root / "h264.mp4", "libx264"), "vp9": _encode(bunny, root / "vp9.webm", "libvpx-vp9")}


def _reference(path) -> np.ndarray:
    """Every frame decoded one after the other with PyAV, converted as DALI converts."""
    interp = av.video.reformatter.Interpolation
    flags = interp.BILINEAR | interp.ACCURATE_RND | interp.FULL_CHR_H_INT
    with av.open(str(path)) as c:
        return np.stack([f.to_ndarray(format="rgb24", interpolation=flags) for f in c.decode(video=0)])


# -- pure arithmetic ------------------------------------------------------------------------------------

# (sequence_length, step, stride, padded, sequences in 60 frames) measured on DALI 2.4's CPU
# fn.experimental.readers.video: full sequences need length * stride frames; padding adds one start.
DALI_COUNTS = [
    (1, 1, 1, False, 60), (1, 1, 2, False, 59), (1, 1, 2, True, 60), (1, 1, 3, True, 59), (1, 7, 3, True, 9),
    (5, 1, 1, False, 56), (5, 1, 1, True, 57), (5, 7, 3, False, 7), (5, 7, 3, True, 8), (5, 10, 1, True, 6),
    (5, 10, 3, False, 5), (5, 10, 3, True, 6), (10, 7, 2, False, 6), (10, 7, 2, True, 7), (10, 10, 1, True, 6),
    (16, 1, 3, False, 13), (16, 7, 3, False, 2), (16, 7, 3, True, 3), (16, 10, 2, True, 4),
]


@pytest.mark.parametrize("length,step,stride,pad,count", DALI_COUNTS)
def test_sequence_count_matches_dali(length, step, stride, pad, count):
    starts = sequence_starts(0, 60, length, step, stride, pad, legacy=False)
    assert len(starts) == count
    assert np.array_equal(starts, step * np.arange(count))


def test_legacy_counting_takes_every_sequence_whose_last_frame_fits():
    assert sequence_starts(0, 60, 8, 5, 2, pad=False, legacy=True).tolist() == list(range(0, 46, 5))
    assert sequence_starts(10, 20, 3, 3, 1, pad=True, legacy=True).tolist() == [10, 13, 16, 19]


def test_padding_rules():
    frames = np.arange(57, 64)
    assert padded_indices(frames, 60, "constant").tolist() == [57, 58, 59, -1, -1, -1, -1]
    assert padded_indices(frames, 60, "edge").tolist() == [57, 58, 59, 59, 59, 59, 59]
    assert padded_indices(frames, 60, "reflect").tolist() == [57, 58, 59, 58, 57, 56, 55]
    assert padded_indices(frames, 60, "symmetric").tolist() == [57, 58, 59, 59, 58, 57, 56]
    assert uniform_frames(0, 3, 5).tolist() == [0, 1, 1, 2, 2]  # half away from zero: 0.5 -> 1, 1.5 -> 2


def test_select_frames():
    assert select_frames(60, start=50, length=6, stride=2).tolist() == [50, 52, 54, 56, 58, -1]
    assert select_frames(60, start=50, length=6, stride=2, pad_mode="none").tolist() == [50, 52, 54, 56, 58]
    assert select_frames(60, start=55).tolist() == [55, 56, 57, 58, 59]
    assert select_frames(60, frames=[0, 65], pad_mode="edge").tolist() == [0, 59]
    with pytest.raises(ValueError, match="start frame 70 is out of bounds"):
        select_frames(60, start=70, length=2)


# -- decoding ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("codec", ["h264", "vp9"])
def test_random_frames_equal_sequential_decoding_and_seek_to_keyframes(videos, codec):
    path = videos[codec]
    reference = _reference(path)
    index = index_video(str(path), codec)
    assert index.num_frames == FRAMES and index.keyframes.tolist() == list(range(0, FRAMES, GOP))
    rng = np.random.default_rng(0)
    for _ in range(4):
        frames = rng.integers(0, FRAMES, 7)
        out = np.zeros((7, HEIGHT, WIDTH, 3), np.uint8)
        decode_frames(str(path), index, frames, out, codec)
        np.testing.assert_array_equal(out, reference[frames])
    out = np.zeros((4, HEIGHT, WIDTH, 3), np.uint8)
    decoded = decode_frames(str(path), index, np.arange(52, 56), out, codec)
    assert decoded < 2 * GOP  # from the keyframe at 50, not from frame 0
    np.testing.assert_array_equal(out, reference[52:56])


@pytest.mark.parametrize("codec,container", [("libx265", "mp4"), ("libsvtav1", "mp4"), ("libvpx", "webm"),
                                             ("mpeg4", "mp4"), ("mjpeg", "avi")])
def test_every_codec_people_have(bunny, tmp_path, codec, container):
    try:
        path = _encode(bunny, tmp_path / f"clip.{container}", codec)
    except (av.FFmpegError, ValueError) as e:
        pytest.skip(f"PyAV cannot encode {codec} here: {e}")
    reference = _reference(path)
    index = index_video(str(path), codec)
    out = np.zeros((3, HEIGHT, WIDTH, 3), np.uint8)
    decode_frames(str(path), index, np.array([47, 3, 21]), out, codec)
    np.testing.assert_array_equal(out, reference[[47, 3, 21]])


def test_a_sequence_in_the_middle_of_the_shared_clip(bunny):
    reference = _reference(bunny)
    pipe = _reader_pipe(batch_size=1, file_list=None, filenames=[str(bunny)], sequence_length=4, step=60)
    pipe.build()
    pipe.run()
    (video,) = pipe.run()
    np.testing.assert_array_equal(video.as_array()[0], reference[60:64])


def test_not_a_video_names_the_file(tmp_path):
    bad = tmp_path / "clip.mp4"
    bad.write_bytes(b"\x00\x00\x00\x18ftypmp42" + bytes(200))
    with pytest.raises(VideoDecodeError, match="clip.mp4"):
        index_video(str(bad), str(bad))


# -- readers -------------------------------------------------------------------------------------------

def _reader_pipe(batch_size=2, reader="experimental.readers.video", device="cpu", seed=3, checkpoint=None,
                 **reader_args):
    @pipeline_def(batch_size=batch_size, num_threads=2, device_id=None, seed=seed, prefetch_queue_depth=1,
                  enable_checkpointing=True, checkpoint=checkpoint)
    def p():
        op = fn.experimental.readers.video if reader == "experimental.readers.video" else fn.readers.video
        outs = op(device=device, name="Reader", **reader_args)
        return tuple(outs) if isinstance(outs, (list, tuple)) else outs

    return p()


def test_reader_outputs_follow_the_sequences(videos):
    reference = _reference(videos["h264"])
    pipe = _reader_pipe(batch_size=3, filenames=[str(videos["h264"])] * 2, labels=[4, 9], sequence_length=5,
                        step=8, stride=3, pad_mode="edge", enable_frame_num="sequence", enable_timestamps=True)
    pipe.build()
    assert pipe.epoch_size("Reader") == 2 * 7
    video, labels, frame_num, stamps = pipe.run()
    frames = frame_num.as_array()
    assert frames.tolist()[:2] == [[0, 3, 6, 9, 12], [8, 11, 14, 17, 20]]
    np.testing.assert_array_equal(video.as_array(), reference[frames])
    assert video.layout() == "FHWC" and labels.as_array().ravel().tolist() == [4, 4, 4]
    np.testing.assert_allclose(stamps.as_array(), frames / 25)
    assert [video[i].source_info() for i in range(3)] == [str(videos["h264"])] * 3


def test_file_root_labels_and_file_list_ranges(videos, tmp_path):
    for cls in ("a", "b"):
        (tmp_path / cls).mkdir()
        (tmp_path / cls / "clip.webm").write_bytes(videos["vp9"].read_bytes())
    pipe = _reader_pipe(batch_size=4, file_root=str(tmp_path), sequence_length=20)
    pipe.build()
    assert pipe.epoch_size("Reader") == 6
    _, labels = pipe.run()
    assert labels.as_array().ravel().tolist() == [0, 0, 0, 1]
    listing = tmp_path / "list.txt"
    for line, list_format, firsts in [(f"{videos['vp9']} 5 -20 -5", "frames", [40, 43, 46, 49, 52]),
                                      (f"{videos['h264']} 6 0.5 1.1", "timestamps", [12, 15, 18, 21, 24])]:
        listing.write_text(line + "\n")
        pipe = _reader_pipe(batch_size=1, file_list=str(listing), sequence_length=3, file_list_format=list_format,
                            enable_frame_num="scalar")
        pipe.build()
        assert pipe.epoch_size("Reader") == 5
        assert [int(pipe.run()[2].as_array()[0, 0]) for _ in range(5)] == firsts


def test_shards_cover_every_sequence_once_and_resume_exactly(videos):
    args = dict(filenames=[str(videos["vp9"]), str(videos["h264"])], labels=[0, 1], sequence_length=4, step=6,
                random_shuffle=True, enable_frame_num="scalar")
    seen = []
    for shard in (0, 1):
        pipe = _reader_pipe(batch_size=2, num_shards=2, shard_id=shard, pad_last_batch=True, **args)
        pipe.build()
        per_epoch = pipe.reader_meta("Reader")["epoch_size_padded"] // 2
        for _ in range(per_epoch // 2):
            _, labels, first = pipe.run()
            seen += list(zip(labels.as_array().ravel().tolist(), first.as_array().ravel().tolist()))
    assert sorted(set(seen)) == sorted((f, s) for f in (0, 1) for s in range(0, 60 - 4 + 1, 6) if s + 4 <= 60)

    pipe = _reader_pipe(batch_size=2, **args)
    pipe.build()
    for _ in range(3):
        pipe.run()
    checkpoint = pipe.checkpoint()
    expected = [[x.as_array() for x in pipe.run()] for _ in range(4)]
    resumed = _reader_pipe(batch_size=2, checkpoint=checkpoint, **args)
    resumed.build()
    for batch in expected:
        for want, got in zip(batch, resumed.run()):
            np.testing.assert_array_equal(got.as_array(), want)


def test_videos_on_an_fsspec_store_read_as_from_disk(videos):
    fsspec = pytest.importorskip("fsspec")
    fs = fsspec.filesystem("memory")
    for cls, key in (("a", "h264"), ("b", "vp9")):
        fs.pipe(f"/videos/{cls}/clip", videos[key].read_bytes())
    fs.pipe("/videos/list.txt", b"a/clip 4 0 30\nb/clip 5 10 40\n")
    args = dict(sequence_length=6, step=9, enable_frame_num="scalar")
    remote = _reader_pipe(batch_size=3, file_list="memory://videos/list.txt", file_list_format="frames", **args)
    local_list = videos["vp9"].parent / "list.txt"
    local_list.write_text(f"{videos['h264']} 4 0 30\n{videos['vp9']} 5 10 40\n")
    local = _reader_pipe(batch_size=3, file_list=str(local_list), file_list_format="frames", **args)
    for pipe in (remote, local):
        pipe.build()
    assert remote.epoch_size("Reader") == local.epoch_size("Reader") == 3 + 3
    for _ in range(2):
        for got, want in zip(remote.run(), local.run()):
            np.testing.assert_array_equal(got.as_array(), want.as_array())
    on_root = _reader_pipe(batch_size=2, file_root="memory://videos", sequence_length=30)
    on_root.build()
    assert on_root.epoch_size("Reader") == 4 and on_root.run()[1].as_array().ravel().tolist() == [0, 0]


@pytest.mark.parametrize("args,error,match", [
    (dict(filenames=["/no/such/clip.mp4"], sequence_length=2), FileNotFoundError, "clip.mp4"),
    (dict(sequence_length=2), ValueError, "exactly one of"),
    (dict(filenames=["x"], file_root="y", sequence_length=2), ValueError, "exactly one of"),
    (dict(file_root="/no/such/dir", labels=[1], sequence_length=2), ValueError, "'labels' can only"),
    (dict(filenames=["VIDEO"], sequence_length=100), RuntimeError, "no sequence of 100 frames"),
    (dict(filenames=["VIDEO"], sequence_length=2, pad_mode="mirror"), ValueError, "pad_mode"),
])
def test_reader_errors_name_the_argument_or_file(videos, args, error, match):
    args = {k: ([str(videos["vp9"])] if v == ["VIDEO"] else v) for k, v in args.items()}
    with pytest.raises(error, match=match):
        _reader_pipe(**args).build()


def test_super_resolution_loader_runs_with_the_import_changed(videos):
    """DALI's video super-resolution example loader, with ``nvidia.dali`` replaced by ``jaxdali``."""
    torch = pytest.importorskip("torch")
    from jaxdali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy

    crop_size = (32, 48)

    @pipeline_def(batch_size=2, num_threads=2, device_id=0, seed=12)
    def video_pipe(filenames, frames):
        images = fn.readers.video(device="gpu", filenames=filenames, sequence_length=frames, normalized=False,
                                  random_shuffle=True, image_type=types.RGB, dtype=types.UINT8, initial_fill=16,
                                  pad_last_batch=True, name="Reader")
        images = fn.crop(images, crop=crop_size, dtype=types.FLOAT,
                         crop_pos_x=fn.random.uniform(range=(0.0, 1.0)),
                         crop_pos_y=fn.random.uniform(range=(0.0, 1.0)))
        images = fn.transpose(images, perm=[3, 0, 1, 2], output_layout="CFHW")
        return images

    pipe = video_pipe(filenames=[str(videos["vp9"]), str(videos["h264"])], frames=5)
    pipe.build()
    loader = DALIGenericIterator(pipe, ["data"], reader_name="Reader", last_batch_policy=LastBatchPolicy.PARTIAL,
                                 auto_reset=True)
    batches = [b[0]["data"] for b in loader]
    assert sum(b.shape[0] for b in batches) == pipe.epoch_size("Reader") == 24
    assert batches[0].shape == (2, 3, 5, 32, 48) and batches[0].dtype == torch.float32
    assert 0 < float(batches[0].mean()) < 255


# -- decoder -------------------------------------------------------------------------------------------

def test_decoder_per_sample_selection_and_bytes_from_a_reader(videos):
    reference = {k: _reference(p) for k, p in videos.items()}

    @pipeline_def(batch_size=2, num_threads=2, device_id=None, seed=0)
    def p():
        encoded, _ = fn.readers.file(files=[str(videos["h264"]), str(videos["vp9"])])
        start = fn.external_source(source=lambda: [np.array(55, np.int32), np.array(3, np.int32)], batch=True)
        return fn.decoders.video(encoded, start_frame=start, sequence_length=8, stride=2, pad_mode="edge")

    pipe = p()
    pipe.build()
    (video,) = pipe.run()
    first, second = video.samples()
    np.testing.assert_array_equal(first, reference["h264"][[55, 57, 59, 59, 59, 59, 59, 59]])
    np.testing.assert_array_equal(second, reference["vp9"][3:19:2])
    assert [video[i].source_info() for i in range(2)] == [str(videos["h264"]), str(videos["vp9"])]


def test_decoder_errors(videos):
    @pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def p(kw):
        data = fn.external_source(source=lambda: [np.frombuffer(videos["vp9"].read_bytes(), np.uint8)], batch=True)
        return fn.experimental.decoders.video(data, **kw)

    with pytest.raises(ValueError, match="'frames' cannot be used together"):
        p(dict(frames=[1], start_frame=2)).build()
    pipe = p(dict(start_frame=70, sequence_length=2))
    pipe.build()
    with pytest.raises(ValueError, match="sample 0: start frame 70 is out of bounds"):
        pipe.run()


# -- DALI as the oracle ---------------------------------------------------------------------------------

READER_CASES = [
    dict(labels=[3, 7], sequence_length=8, step=5, stride=2, enable_frame_num="sequence", enable_timestamps=True),
    dict(labels=[1, 2], sequence_length=16, step=10, pad_mode="constant", fill_value=[7, 8, 9],
         enable_frame_num="sequence", enable_timestamps=True),
    dict(labels=[1, 2], sequence_length=8, step=7, stride=3, pad_mode="reflect", enable_frame_num="scalar"),
    dict(sequence_length=5, uniform_sample=True, enable_timestamps=True),
]


@pytest.mark.parametrize("case", range(len(READER_CASES)))
def test_reader_matches_dali_bit_for_bit(videos, case):
    dali = pytest.importorskip("nvidia.dali")
    import jaxdali

    kw = dict(READER_CASES[case], filenames=[str(videos["vp9"])] * 2)

    def run(lib, ns):
        @lib.pipeline_def(batch_size=3, num_threads=2, device_id=None, seed=1)
        def p():
            return tuple(ns.experimental.readers.video(device="cpu", name="R", **kw))

        pipe = p()
        pipe.build()
        return pipe.epoch_size("R"), [[np.stack([np.asarray(t.at(i)) for i in range(3)]) for t in pipe.run()]
                                      for _ in range(3)]

    import nvidia.dali.fn as dali_fn

    want_size, want = run(dali, dali_fn)
    got_size, got = run(jaxdali, fn)
    assert got_size == want_size
    for want_batch, got_batch in zip(want, got):
        assert len(got_batch) == len(want_batch)
        for w, g in zip(want_batch, got_batch):
            assert g.dtype == w.dtype
            np.testing.assert_array_equal(g, w)


DECODER_CASES = [{}, dict(frames=[0, 59, 3, 3]), dict(frames=[0, 65], pad_mode="edge"),
                 dict(start_frame=50, sequence_length=6, stride=2), dict(start_frame=50, end_frame=70, stride=3,
                                                                        pad_mode="reflect"),
                 dict(start_frame=50, sequence_length=6, stride=2, pad_mode="none"), dict(stride=7)]


@pytest.mark.parametrize("case", range(len(DECODER_CASES)))
def test_decoder_matches_dali_bit_for_bit(videos, case):
    dali = pytest.importorskip("nvidia.dali")
    import nvidia.dali.fn as dali_fn

    import jaxdali

    data = np.frombuffer(videos["vp9"].read_bytes(), np.uint8)

    def run(lib, ns):
        @lib.pipeline_def(batch_size=1, num_threads=1, device_id=None)
        def p():
            return ns.decoders.video(ns.external_source(source=lambda: [data], batch=True), device="cpu",
                                     **DECODER_CASES[case])

        pipe = p()
        pipe.build()
        return np.asarray(pipe.run()[0].at(0))

    np.testing.assert_array_equal(run(jaxdali, fn), run(dali, dali_fn))


def test_frames_of_other_sizes_and_formats_convert_as_pyav_alone_on_a_reused_reformatter():
    """``store_rgb`` keeps one swscale reformatter per thread: frames of other sizes and pixel formats
    in turn must still give what a fresh conversion of each gives."""
    from jaxdali.ops.video_codec import store_rgb

    interp = av.video.reformatter.Interpolation
    flags = interp.BILINEAR | interp.ACCURATE_RND | interp.FULL_CHR_H_INT
    rng = np.random.default_rng(0)
    frames = []
    for width, height, fmt in ((96, 64, "yuv420p"), (50, 30, "yuv444p"), (96, 64, "yuv420p"), (34, 18, "nv12")):
        rgb = rng.integers(0, 256, (height, width, 3), np.uint8)
        frames.append(av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(format=fmt))
    for frame in frames:
        out = np.zeros((1, frame.height, frame.width, 3), np.uint8)
        store_rgb([frame], out)
        np.testing.assert_array_equal(out[0], frame.to_ndarray(format="rgb24", interpolation=flags, threads=1))
