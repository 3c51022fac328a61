"""fn.readers.nemo_asr: exact mid-epoch resume from a checkpoint, manifest details (windows, relative paths,
transcripts) and errors that name the operator, the manifest line or file and the argument (values are
compared with DALI in tests/differential/test_readers_nemo.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import jaxdali
from jaxdali import fn
from tests.audio_clips import chirp, wav_bytes

RATE = 16000


def _manifest(folder, entries: list[dict], name: str = "manifest.json") -> str:
    path = folder / name
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))
    return str(path)


@pytest.fixture
def clips(tmp_path) -> list[str]:
    """Seven mono 16 kHz WAV files of different lengths (0.05 s to 0.35 s)."""
    paths = []
    for i in range(7):
        paths.append(str(tmp_path / f"clip{i}.wav"))
        (tmp_path / f"clip{i}.wav").write_bytes(wav_bytes(chirp(800 * (i + 1), RATE), RATE).tobytes())
    return paths


def _pipe(manifests, batch_size=3, checkpoint=None, **args):
    @jaxdali.pipeline_def(batch_size=batch_size, num_threads=2, device_id=None, seed=5,
                          enable_checkpointing=checkpoint is not None, checkpoint=checkpoint or None)
    def p():
        return tuple(fn.readers.nemo_asr(name="Reader", manifest_filepaths=manifests, **args))

    pipe = p()
    pipe.build()
    return pipe


def _texts(pipe, batches) -> list[list[str]]:
    return [[np.array(s).tobytes().decode() for s in pipe.run()[2].samples()] for _ in range(batches)]


@pytest.mark.parametrize("args", [{"random_shuffle": True}, {"shuffle_after_epoch": True},
                                  {"num_shards": 2, "shard_id": 1, "pad_last_batch": True}])
def test_nemo_asr_resumes_mid_epoch_exactly(tmp_path, clips, args):
    manifest = _manifest(tmp_path, [{"audio_filepath": p, "text": f"clip {i}"} for i, p in enumerate(clips)])
    original = _pipe([manifest], checkpoint="", **args)
    first = _texts(original, 2)
    assert len({t for batch in first for t in batch}) >= 4
    checkpoint = original.checkpoint()
    expected = _texts(original, 5)
    assert _texts(_pipe([manifest], checkpoint=checkpoint, **args), 5) == expected


def test_nemo_asr_windows_relative_paths_and_transcripts(tmp_path, clips, monkeypatch):
    monkeypatch.chdir(tmp_path)  # relative audio paths are read from the working directory, as in DALI
    manifest = _manifest(tmp_path / "..", [
        {"audio_filepath": "clip6.wav", "offset": 0.1, "duration": 0.05, "text": "Ünïcode, Case!"},
        {"audio_filepath": "clip2.wav", "offset": 0.1},
        {"audio_filepath": "clip0.wav"},
    ], name=f"{tmp_path.name}.json")
    audio, rate, text, idx = _pipe([manifest], read_idxs=True, dtype=jaxdali.types.INT16).run()
    whole = np.frombuffer(wav_bytes(chirp(800 * 7, RATE), RATE).tobytes()[44:], "<i2")
    np.testing.assert_array_equal(np.array(audio.at(0)), whole[1600:2400])
    assert np.array(audio.at(1)).shape == (800 * 3 - 1600,) and np.array(audio.at(2)).shape == (800,)
    assert [float(np.array(rate.at(i))) for i in range(3)] == [RATE] * 3
    assert [np.array(text.at(i)).tobytes().decode() for i in range(3)] == ["Ünïcode, Case!", "", ""]
    assert [int(np.array(idx.at(i))[0]) for i in range(3)] == [0, 1, 2]


@pytest.mark.parametrize("case, message", [
    ("missing_manifest", "manifest file .*nowhere.json.* does not exist"),
    ("missing_audio", "manifest entry 1 .*gone.wav"),
    ("bad_duration", "line 1 of manifest .*'duration' must be a number >= 0"),
    ("all_filtered", "no samples in manifests .*min_duration=1.0"),
    ("bad_sample_rate", "argument 'sample_rate' must be > 0"),
    ("bad_dtype", "argument 'dtype' must be one of"),
])
def test_nemo_asr_errors_name_the_manifest_entry_and_argument(tmp_path, clips, case, message):
    entries = [{"audio_filepath": clips[0], "duration": 0.05}, {"audio_filepath": str(tmp_path / "gone.wav")}]
    args = {}
    if case == "missing_manifest":
        manifests = [str(tmp_path / "nowhere.json")]
    else:
        broken = {"bad_duration": [{"audio_filepath": clips[0], "duration": "1"}]}
        manifests = [_manifest(tmp_path, broken.get(case, entries))]
        args = {"all_filtered": {"min_duration": 1.0}, "bad_sample_rate": {"sample_rate": -5.0},
                "bad_dtype": {"dtype": jaxdali.types.UINT8}}.get(case, {})
    with pytest.raises((ValueError, OSError, RuntimeError), match=f"nemo_asr(.|\n)*{message}|{message}"):
        pipe = _pipe(manifests, batch_size=2, **args)
        pipe.run()


def test_nemo_asr_skips_lines_without_an_audio_filepath_with_a_warning(tmp_path, clips):
    manifest = tmp_path / "m.json"
    manifest.write_text(json.dumps({"audio_filepath": clips[0], "text": "kept"}) + "\n{'not': json}\n"
                        + json.dumps({"path": clips[1]}) + "\n\n" + json.dumps({"audio_filepath": clips[2]}) + "\n")
    with pytest.warns(UserWarning) as caught:
        pipe = _pipe([str(manifest)], batch_size=2, read_idxs=True)
    messages = [str(w.message) for w in caught]
    assert any("line 2 of manifest" in m and "is not JSON" in m for m in messages)
    assert any("line 3 of manifest" in m and "has no 'audio_filepath'" in m for m in messages)
    audio, _, text, idx = pipe.run()
    assert [np.array(t).tobytes() for t in text.samples()] == [b"kept", b""]
    assert [int(np.array(i)[0]) for i in idx.samples()] == [0, 1]
    assert np.array(audio.at(1)).shape == (800 * 3,)


@pytest.mark.parametrize("where", ["mapped", "read", "memory_url"])
def test_nemo_asr_reads_mapped_read_and_remote_files_alike(tmp_path, clips, where):
    """Local files are memory-mapped (read whole with dont_use_mmap); fsspec URLs (manifest and audio) are read."""
    entries = [{"audio_filepath": p, "offset": 0.01 * i, "text": str(i)} for i, p in enumerate(clips[:4])]
    expected = _pipe([_manifest(tmp_path, entries)], batch_size=4, dtype=jaxdali.types.INT16).run()
    args = {"dont_use_mmap": where == "read"}
    manifest = _manifest(tmp_path, entries, "again.json")
    if where == "memory_url":
        fsspec = pytest.importorskip("fsspec")
        memory = fsspec.filesystem("memory")
        for i, p in enumerate(clips[:4]):
            memory.pipe(f"/nemo-test/{i}.wav", open(p, "rb").read())
            entries[i]["audio_filepath"] = f"memory://nemo-test/{i}.wav"
        memory.pipe("/nemo-test/m.json", "".join(json.dumps(e) + "\n" for e in entries).encode())
        manifest = "memory://nemo-test/m.json"
    got = _pipe([manifest], batch_size=4, dtype=jaxdali.types.INT16, **args).run()
    for ours, theirs in zip(got, expected):
        for i in range(4):
            np.testing.assert_array_equal(np.array(ours.at(i)), np.array(theirs.at(i)))
    assert np.array(got[0].at(3)).shape == (800 * 4 - 480,)
