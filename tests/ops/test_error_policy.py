"""Bad data: error_policy="replace" (decoders and readers), strict_decoding, and silence on the terminal.

Every image of these tests is a flat colour 10 * index + 5, so a decoded row tells which file it came
from, and the reader's label (the file's index) must tell the same: a replaced row is a whole copy
of the good sample, image and label together.
"""

from __future__ import annotations

import io
import os
import warnings

import numpy as np
import pytest
from PIL import Image

from jaxdali import fn, pipeline_def
from jaxdali.ops.codec_output import CODEC_OUTPUT
from jaxdali.ops.decoders import CorruptImageWarning, ImageDecodeError
from jaxdali.ops.error_policy import SkippedSampleWarning, replacement_rows

jax = pytest.importorskip("jax")
from jaxdali.plugin.jax import DALIGenericIterator  # noqa: E402


def flat_jpeg(value: int) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(np.full((16, 24, 3), value, np.uint8)).save(buf, format="JPEG", quality=95)
    return buf.getvalue()


def noisy_jpeg() -> bytes:
    rng = np.random.default_rng(0)
    buf = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)).save(buf, format="JPEG", quality=90)
    return buf.getvalue()


def corrupt_jpeg(_value: int = 0) -> bytes:
    """A 64 x 64 JPEG with one damaged byte of entropy data: decoded, but libjpeg prints "Corrupt JPEG data: 924
    extraneous bytes before marker 0xd9"."""
    data = bytearray(noisy_jpeg())
    data[len(data) // 2] ^= 0x55
    return bytes(data)


BAD = {
    "garbage": lambda i: b"this is not an image" * 5,
    "empty": lambda i: b"",
    "truncated": lambda i: noisy_jpeg()[: len(noisy_jpeg()) * 7 // 10],
    "corrupt": corrupt_jpeg,
}


def make_files(tmp_path, kinds: list[str]) -> list[str]:
    """One file per kind: "good" (flat colour 10*i+5), a BAD kind, or "missing" (never written)."""
    paths = []
    for i, kind in enumerate(kinds):
        path = tmp_path / f"{i:03d}_{kind}.jpg"
        if kind == "good":
            path.write_bytes(flat_jpeg(10 * i + 5))
        elif kind != "missing":
            path.write_bytes(BAD[kind](10 * i + 5))
        paths.append(str(path))
    return paths


@pipeline_def(num_threads=2, seed=1)
def decode_pipe(files, policy="replace", reader_policy="raise", device="cpu", labels_on_device=False, strict=False,
                shard_id=0, num_shards=1, pad_last_batch=False, random_shuffle=False):
    jpegs, labels = fn.readers.file(files=files, name="Reader", error_policy=reader_policy, shard_id=shard_id,
                                    num_shards=num_shards, pad_last_batch=pad_last_batch, random_shuffle=random_shuffle)
    if labels_on_device:
        labels = labels.gpu()  # recorded in the device program before the decoder replaces rows
    images = fn.decoders.image(jpegs, device=device, error_policy=policy, strict_decoding=strict)
    return images, labels


def rows(outputs) -> tuple[list[int], list[int]]:
    """(file index each image row shows, label of each row)."""
    images, labels = (o.as_cpu() for o in outputs)
    shown = [int(round((float(np.asarray(images.at(k)).mean()) - 5) / 10)) for k in range(len(images))]
    return shown, [int(np.asarray(labels.at(k))[0]) for k in range(len(labels))]


def test_replacement_is_the_next_good_row_cyclically():
    assert replacement_rows({1, 3}, 4) == {1: 2, 3: 0}
    assert replacement_rows({0, 1, 2}, 4) == {0: 3, 1: 3, 2: 3}
    assert replacement_rows({3, 0}, 4) == {0: 1, 3: 1}


@pytest.mark.parametrize("device, labels_on_device", [("cpu", False), ("mixed", True)])
def test_decoder_replaces_bad_rows_with_whole_good_samples(tmp_path, device, labels_on_device):
    files = make_files(tmp_path, ["good", "garbage", "good", "truncated"])
    pipe = decode_pipe(files, device=device, labels_on_device=labels_on_device, batch_size=4,
                       device_id=0 if device == "mixed" else None)
    with pytest.warns(SkippedSampleWarning) as record:
        out = pipe.run()
    assert rows(out) == ([0, 2, 2, 0], [0, 2, 2, 0])
    assert out[0].replaced_rows == out[1].replaced_rows == (1, 3)
    assert [str(w.message).split(":")[0] for w in record] == ["fn.decoders.image"] * 2
    assert [s["source"] for s in pipe.skipped_samples()] == [files[1], files[3]]
    assert "not a decodable image" in pipe.skipped_samples()[0]["error"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the same files again: no second warning
        again = pipe.run()
    assert rows(again) == rows(out) and len(pipe.skipped_samples()) == 2
    pipe.close()


def test_raise_is_the_default_and_names_the_file(tmp_path):
    files = make_files(tmp_path, ["good", "garbage"])

    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def plain():
        jpegs, _ = fn.readers.file(files=files)
        return fn.decoders.image_random_crop(jpegs)

    with pytest.raises(ImageDecodeError, match=f"sample 1 \\('{files[1]}'\\)"):
        plain().run()


def test_a_batch_with_no_good_sample_raises(tmp_path):
    files = make_files(tmp_path, ["garbage", "empty"])
    with pytest.raises(ImageDecodeError) as info:
        decode_pipe(files, batch_size=2, device_id=None).run()
    assert "all 2 samples of the batch failed" in "".join(info.value.__notes__)


def test_reader_replaces_unreadable_files(tmp_path):
    files = make_files(tmp_path, ["good", "missing", "good"])
    with pytest.raises(FileNotFoundError, match=os.path.basename(files[1])):
        decode_pipe(files, batch_size=3, device_id=None).run()
    pipe = decode_pipe(files, reader_policy="replace", batch_size=3, device_id=None)
    with pytest.warns(SkippedSampleWarning, match="fn.readers.file: replaced .*No such file"):
        out = pipe.run()
    assert rows(out) == ([0, 2, 2], [0, 2, 2]) and out[0].replaced_rows == (1,)
    assert out[0].as_cpu()[1].source_info() == files[2]
    assert [(s["operator"], s["source"]) for s in pipe.skipped_samples()] == [("fn.readers.file", files[1])]


def test_strict_decoding_refuses_what_the_codec_calls_corrupt(tmp_path):
    files = make_files(tmp_path, ["good", "corrupt"])
    with pytest.warns(CorruptImageWarning, match=r"sample 1 .*Corrupt JPEG data: 924 extraneous bytes"):
        out = decode_pipe(files, policy="raise", batch_size=2, device_id=None).run()
    assert out[0].as_cpu().at(1).shape == (64, 64, 3) and out[0].replaced_rows == ()
    with pytest.raises(ImageDecodeError, match=r"sample 1 .*strict_decoding=True.*Corrupt JPEG data"):
        decode_pipe(files, policy="raise", strict=True, batch_size=2, device_id=None).run()
    with pytest.warns(SkippedSampleWarning):
        out = decode_pipe(files, strict=True, batch_size=2, device_id=None).run()
    assert rows(out) == ([0, 0], [0, 0])


def test_chunks_with_codec_messages_are_decoded_again_sample_by_sample(tmp_path):
    """Clean images are decoded a chunk at a time in one capture window; a chunk where the codec prints
    (a corrupt image among clean ones) is decoded again sample by sample: the warning names the corrupt
    sample only, and every image of the batch is the one decoded alone."""
    kinds = ["good"] * 12
    kinds[5] = "corrupt"
    files = make_files(tmp_path, kinds)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = decode_pipe(files, policy="raise", batch_size=12, num_threads=1, device_id=None).run()
    corrupt = [w for w in caught if issubclass(w.category, CorruptImageWarning)]
    # (the prefetched next batch, the same files again, may warn too: always about sample 5)
    assert corrupt and all("sample 5 " in str(w.message) for w in corrupt)
    images = out[0].as_cpu()
    for k, name in enumerate(files):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CorruptImageWarning)
            alone = decode_pipe([name], policy="raise", batch_size=1, num_threads=1, device_id=None).run()
        assert np.array_equal(np.asarray(images.at(k)), np.asarray(alone[0].as_cpu().at(0))), k
    assert rows(out)[1] == list(range(12))


def test_iterator_mask_counts_every_good_sample_once_and_resume_replaces_alike(tmp_path):
    kinds = ["good"] * 11
    for k, kind in ((2, "garbage"), (5, "truncated"), (7, "missing")):  # at most 2 of a shard's 3-sample batches
        kinds[k] = kind
    files = make_files(tmp_path, kinds)
    good = [i for i, k in enumerate(kinds) if k == "good"]

    def iterator(checkpoints=None):
        pipes = [decode_pipe(files, reader_policy="replace", shard_id=s, num_shards=2, pad_last_batch=True,
                             random_shuffle=True, batch_size=3, device_id=None, enable_checkpointing=True,
                             checkpoint=None if checkpoints is None else checkpoints[s]) for s in range(2)]
        return DALIGenericIterator(pipes, ["images", "labels"], reader_name="Reader")

    def batches(it, count):
        seen = []
        for _ in range(count):
            try:
                batch = next(it)
            except StopIteration:
                it.reset()
                seen.append(None)
                continue
            mask = np.asarray(it.is_nonpadding)
            labels = np.asarray(batch["labels"]).ravel()
            shown = np.rint((np.asarray(batch["images"]).reshape(len(labels), -1).mean(1) - 5) / 10).astype(int)
            assert (shown == labels).all()  # image and label of every row belong together
            seen.append((labels.tolist(), mask.tolist()))
        return seen

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SkippedSampleWarning)
        it = iterator()
        try:
            for _ in range(2):  # two epochs: every good file counted exactly once by the mask
                counted = sorted(label for b in batches(it, len(it)) for label, real in zip(*b) if real)
                assert counted == good
                assert batches(it, 1) == [None]
            batches(it, 1)
            checkpoints = it.checkpoints()
            expected = batches(it, 9)
        finally:
            it.close()  # its prefetching ends here, not while pytest's output capture changes hands
        resumed = iterator(checkpoints)
        try:
            assert batches(resumed, 9) == expected
        finally:
            resumed.close()


def test_decoding_corrupt_files_prints_nothing(tmp_path, capfd):
    files = make_files(tmp_path, ["good", "garbage", "truncated", "corrupt", "empty", "good"])
    capfd.readouterr()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in files[1:5]:  # DALI's API alone: each bad file raises or decodes, and nothing is printed
            @pipeline_def(batch_size=1, num_threads=1, device_id=None)
            def single():
                return fn.decoders.image(fn.readers.file(files=[name])[0])

            try:
                single().run()
            except RuntimeError as e:
                assert name in str(e)
        assert capfd.readouterr() == ("", "")
        for op in ("image", "image_random_crop"):
            @pipeline_def(batch_size=len(files), num_threads=2, device_id=None)
            def pipe():
                jpegs, _ = fn.readers.file(files=files)
                return getattr(fn.decoders, op)(jpegs, error_policy="replace")

            p = pipe()
            p.run()
            # garbage, empty, and truncated unless the crop window lies in the part that is there
            assert len(p.skipped_samples()) >= 2
            for k in range(1, 5):
                with pytest.raises(ImageDecodeError):
                    decode_pipe([files[k]], policy="raise", strict=True, batch_size=1, device_id=None).run()
    assert capfd.readouterr() == ("", "")


def test_capture_passes_other_output_through(capfd):
    with CODEC_OUTPUT.window() as seen:
        os.write(2, b"a line of the user's\n")
        os.write(2, b"Corrupt JPEG data: bad Huffman code\n")
        os.write(2, b"\x1b[0;31m[ERROR] \x1b[0m[libjpeg_turbo_decoder] Could not decode\n\n")
        os.write(2, b"partial")
        os.write(1, b"stdout is not captured\n")
    assert seen.lines == ["Corrupt JPEG data: bad Huffman code", "[ERROR] [libjpeg_turbo_decoder] Could not decode"]
    assert capfd.readouterr() == ("stdout is not captured\n", "a line of the user's\npartial")


def test_interleaved_codec_messages_of_a_batched_decode_stay_codec_messages():
    # nvImageCodec decodes a batch on several threads, whose messages interleave mid-line.
    from jaxdali.ops.codec_output import codec_lines

    text = ("\x1b[0;33m[WARNING] \x1b[0m[pynvimgcodec\x1b[0;33m[WARNING] \x1b[0m[pynvimgcodec] Something went wrong "
            "during decoding image #0 there will be None on corresponding output position\n"
            "stream - Premature end of JPEG data. Stopped at line 96/263\n"
            "] Something went wrong during decoding image #0 there will be None on corresponding output position\n"
            "a line of the user's own\n")
    codec, other = codec_lines(text)
    assert len(codec) == 3 and other == ["a line of the user's own\n"]


def test_a_write_that_lands_after_the_last_window_closed_is_passed_on(tmp_path):
    """A write that chose the capture file before the descriptor was pointed back, and landed after the last
    window read the file's size, reaches the terminal when the next capture starts, or at exit."""
    from jaxdali.ops import codec_output

    terminal = os.open(tmp_path / "terminal", os.O_RDWR | os.O_CREAT | os.O_APPEND)
    capture = codec_output.CodecOutput(fd=terminal)
    try:
        with capture.window():
            os.write(terminal, b"Corrupt JPEG data: 1 extraneous bytes before marker 0xd9\n")
        os.write(capture._file, b"Traceback (most recent call last):\n")  # lands late, in the capture file
        os.write(terminal, b'  File "train.py", line 3\n')
        with capture.window():
            pass
        assert (tmp_path / "terminal").read_text() == '  File "train.py", line 3\nTraceback (most recent call last):\n'
        os.write(capture._file, b"KeyboardInterrupt\n")
        capture.catch_up()  # what the exit hook does
        assert (tmp_path / "terminal").read_text().endswith("KeyboardInterrupt\n")
        capture.catch_up()
        assert (tmp_path / "terminal").read_text().count("KeyboardInterrupt") == 1
    finally:
        os.close(terminal)


def test_text_written_while_the_last_window_closes_reaches_the_terminal(tmp_path, monkeypatch):
    """Another thread's text (a traceback, say) written just before the last window points the
    descriptor back is passed on, not truncated away with the capture file (a KeyboardInterrupt's
    "Traceback (most recent call last):" was once lost this way)."""
    from jaxdali.ops import codec_output

    terminal = os.open(tmp_path / "terminal", os.O_RDWR | os.O_CREAT | os.O_APPEND)
    capture = codec_output.CodecOutput(fd=terminal)
    real_dup2 = os.dup2

    def dup2_after_a_late_write(source, target):
        if target == terminal and source != capture._file:  # pointing the descriptor back
            os.write(terminal, b"Traceback (most recent call last):\n")
        return real_dup2(source, target)

    monkeypatch.setattr(codec_output.os, "dup2", dup2_after_a_late_write)
    try:
        with capture.window() as seen:
            os.write(terminal, b"Corrupt JPEG data: 1 extraneous bytes before marker 0xd9\n")
        os.write(terminal, b"  File \"train.py\", line 3\n")
        assert seen.lines == ["Corrupt JPEG data: 1 extraneous bytes before marker 0xd9"]
        assert (tmp_path / "terminal").read_text() == 'Traceback (most recent call last):\n  File "train.py", line 3\n'
    finally:
        os.close(terminal)
