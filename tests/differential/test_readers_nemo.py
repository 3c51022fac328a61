"""Differential test of ``fn.readers.nemo_asr`` against NVIDIA DALI 2.4 (CPU pipelines), on real audio.

The manifests list WAV and FLAC files written from the shared clip's soundtrack (``tests/audio_clips.py``),
whole and as ``offset``/``duration`` windows whose sample bounds are not whole numbers, with and without
transcripts (one non-ASCII). Values are exact (libsndfile's samples, cut and downmixed as DALI does),
except when resampling: within 1e-4 of full scale, as ``fn.decoders.audio`` (see its test).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("nvidia.dali")
pytest.importorskip("soundfile")

import jaxdali  # noqa: E402
from tests.audio_clips import write_clips  # noqa: E402

COVERED_OPERATORS = ("readers.nemo_asr",)

pytestmark = pytest.mark.filterwarnings("ignore:fn.readers.nemo_asr. skipping:UserWarning")

BATCH = 4


@pytest.fixture(scope="module")
def manifests(shared_data, tmp_path_factory) -> list[str]:
    """Two manifest files, 8 entries in all (a blank line, a line that is not JSON and one without an
    audio_filepath in between, which both libraries skip)."""
    folder = tmp_path_factory.mktemp("nemo")
    clips = {name: str(path) for name, path in
             write_clips(shared_data / "video" / "bigbuckbunny.mp4", folder).items() if not name.endswith(".ogg")}
    first = [
        {"audio_filepath": clips["stereo.wav"], "duration": 5.3, "text": "the whole file"},
        {"audio_filepath": clips["mono22k.wav"], "offset": 0.37, "duration": 1.2345, "text": "héllo Wörld"},
        {"audio_filepath": clips["surround.wav"], "offset": 2.0, "duration": 0.51},
        {"audio_filepath": clips["stereo.flac"], "offset": 1.1111, "text": "to the end"},
    ]
    second = [
        {"audio_filepath": clips["mono.flac"], "duration": 0.7, "text": "short"},
        {"audio_filepath": clips["stereo.wav"], "offset": 3.0, "duration": 2.0, "text": "past the end"},
        {"audio_filepath": clips["mono22k.wav"], "duration": 2.5, "text": "MiXeD case, punctuation!"},
        {"audio_filepath": clips["mono.flac"], "offset": 0.25, "duration": 3.333, "text": "x"},
    ]
    paths = []
    for k, entries in enumerate((first, second)):
        paths.append(str(folder / f"manifest{k}.json"))
        with open(paths[-1], "w") as f:
            skipped = "\n{not json\n" + json.dumps({"text": "no path"}) + "\n"
            f.write("\n".join(json.dumps(e) for e in entries[:2]) + "\n" + skipped
                    + "\n".join(json.dumps(e) for e in entries[2:]) + "\n")
    return paths


def _run(lib: str, manifests: list[str], batches: int, **args) -> list[list[np.ndarray]]:
    if lib == "dali":
        import nvidia.dali as dali
        from nvidia.dali import fn
        pipeline_def = dali.pipeline_def
    else:
        from jaxdali import fn
        pipeline_def = jaxdali.pipeline_def

    @pipeline_def(batch_size=BATCH, num_threads=2, device_id=None, seed=3)
    def graph():
        out = fn.readers.nemo_asr(manifest_filepaths=manifests, **args)
        return tuple(out) if isinstance(out, (list, tuple)) else out

    pipe = graph()
    pipe.build()
    outputs: list[list[np.ndarray]] = []
    for _ in range(batches):
        result = pipe.run()
        outputs = outputs or [[] for _ in result]
        for k, tl in enumerate(result):
            outputs[k] += [np.array(tl.at(i)) for i in range(len(tl))]
    return outputs


# (arguments, batches, atol of the audio relative to full scale): downmixing 6 channels sums in another
# order than DALI (1e-7); resampling as in fn.decoders.audio's test.
CASES = {
    "defaults": ({"read_idxs": True}, 2, 1e-7),
    "channels_int16": ({"downmix": False, "dtype": "INT16", "read_idxs": True}, 2, 0),
    "int32_no_text": ({"dtype": "INT32", "read_text": False}, 2, 1e-7),
    "no_rate_no_text": ({"downmix": False, "read_sample_rate": False, "read_text": False}, 2, 0),
    "resample": ({"sample_rate": 16000.0, "read_idxs": True}, 2, 1e-4),
    "resample_int16_low_quality": ({"sample_rate": 22050.0, "dtype": "INT16", "quality": 10.0}, 2, 4e-4),
    "durations": ({"min_duration": 0.6, "max_duration": 3.0, "read_idxs": True}, 2, 1e-7),
    "shard": ({"num_shards": 3, "shard_id": 1, "pad_last_batch": True, "read_idxs": True}, 3, 1e-7),
}


@pytest.mark.parametrize("case", CASES)
def test_nemo_asr_matches_dali(manifests, case):
    from nvidia.dali import types as dali_types

    args, batches, atol = CASES[case]
    theirs = _run("dali", manifests, batches,
                  **{k: getattr(dali_types, v) if k == "dtype" else v for k, v in args.items()})
    ours = _run("jax", manifests, batches,
                **{k: getattr(jaxdali.types, v) if k == "dtype" else v for k, v in args.items()})
    assert len(ours) == len(theirs)
    for k, (a_out, b_out) in enumerate(zip(ours, theirs)):
        for i, (a, b) in enumerate(zip(a_out, b_out)):
            assert a.shape == b.shape and a.dtype == b.dtype, (k, i, a.shape, b.shape, a.dtype, b.dtype)
            if k == 0 and atol:
                full_scale = 1.0 if b.dtype.kind == "f" else float(np.iinfo(b.dtype).max)
                np.testing.assert_allclose(a.astype(np.float64), b, rtol=0, atol=atol * full_scale,
                                           err_msg=f"output {k} sample {i}")
            else:
                np.testing.assert_array_equal(a, b, err_msg=f"output {k} sample {i}")
