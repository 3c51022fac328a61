"""Differential tests of the audio operators against NVIDIA DALI 2.4 (CPU pipelines), on real audio.

The audio is the soundtrack of the shared Big Buck Bunny clip (AAC 5.1, 48 kHz), written by PyAV into
WAV, FLAC and Ogg Vorbis files of several rates and channel counts (``tests/audio_clips.py``). Each
case states its tolerance next to it: exact where DALI's arithmetic is reproduced step for step,
else relative to the sample's largest value (float32 FFT and summation order).
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("nvidia.dali")
pytest.importorskip("soundfile")

from tests.audio_clips import CLIPS, write_clips  # noqa: E402
from tests.differential.twin import Output, run_both  # noqa: E402

COVERED_OPERATORS = ("decoders.audio", "audio_decoder", "audio_resample", "preemphasis_filter", "power_spectrum",
                     "spectrogram", "mel_filter_bank", "to_decibels", "mfcc", "nonsilent_region")


@pytest.fixture(scope="module")
def clips(shared_data, tmp_path_factory) -> dict[str, np.ndarray]:
    """Every clip of ``CLIPS`` as encoded bytes (uint8), by name."""
    paths = write_clips(shared_data / "video" / "bigbuckbunny.mp4", tmp_path_factory.mktemp("audio"))
    return {name: np.fromfile(path, np.uint8) for name, path in paths.items()}


@pytest.fixture(scope="module")
def signals(clips) -> list[np.ndarray]:
    """Three mono float32 excerpts of the decoded soundtrack (different lengths, one with a quiet start)."""
    import soundfile

    import io

    audio, _ = soundfile.read(io.BytesIO(clips["stereo.wav"].tobytes()), dtype="float32")
    return [audio[60000:76000, 0].copy(), audio[120000:129001, 1].copy(), audio[:5000, 0].copy()]


def assert_near(ours: list[Output], theirs: list[Output], rel: float = 0.0) -> None:
    """Same outputs, layouts, shapes and dtypes; values equal, or within ``rel`` times each sample's
    largest magnitude."""
    assert len(ours) == len(theirs)
    for k, (a_out, b_out) in enumerate(zip(ours, theirs)):
        assert a_out.layout == b_out.layout, (k, a_out.layout, b_out.layout)
        assert len(a_out) == len(b_out)
        for i, (a, b) in enumerate(zip(a_out, b_out)):
            assert a.shape == b.shape and a.dtype == b.dtype, (k, i, a.shape, b.shape, a.dtype, b.dtype)
            if rel == 0:
                np.testing.assert_array_equal(a, b, err_msg=f"output {k} sample {i}")
            elif b.size:
                scale = float(np.abs(b.astype(np.float64)).max()) or 1.0
                np.testing.assert_allclose(a.astype(np.float64), b, rtol=0, atol=rel * scale,
                                           err_msg=f"output {k} sample {i}")


# -- decoders.audio -------------------------------------------------------------------------------

LOSSLESS = [name for name in CLIPS if not name.endswith(".ogg")]

# (arguments, atol for FLOAT / INT16 / INT32 outputs of the lossless files). Without resampling or
# downmixing libsndfile's samples are returned as they are: exact. Resampling puts each output at its exact
# input position where DALI advances positions in float32 steps (``jaxdali.ops.audio.sinc``): 1e-4 of
# full scale (3e-4 of a sample's peak) for ratios not exact in float32 (48 kHz -> 16 kHz is exact: 1e-7), 1 LSB for INT16;
# downmixed INT32 is scaled from float32 (below one float32 step, 128).
DECODE_CASES = {
    "plain": ({}, 0),
    "int16": ({"dtype": "INT16"}, 0),
    "int32": ({"dtype": "INT32"}, 0),
    "downmix": ({"downmix": True}, 1e-7),
    "downmix_int16": ({"downmix": True, "dtype": "INT16"}, 0),
    "downmix_int32": ({"downmix": True, "dtype": "INT32"}, 128),
    "resample": ({"sample_rate": 16000.0}, 1e-4),
    "resample_downmix_int16": ({"sample_rate": 22050.0, "downmix": True, "dtype": "INT16"}, 1),
    "resample_low_quality": ({"sample_rate": 44100.0, "quality": 10.0}, 1e-4),
}


def _decode(args: dict, name: str = "decoders.audio"):
    def body(fn, types, encoded):
        kwargs = {k: getattr(types, v) if k == "dtype" else v for k, v in args.items()}
        op = fn.decoders.audio if name == "decoders.audio" else fn.audio_decoder
        return op(encoded, **kwargs)
    return body


@pytest.mark.parametrize("case", sorted(DECODE_CASES))
def test_decoding_lossless_files_matches_dali(clips, case):
    args, atol = DECODE_CASES[case]
    ours, theirs = run_both(_decode(args), [[clips[n] for n in LOSSLESS]])
    rates_ours, rates_theirs = ours[1], theirs[1]
    assert [r.dtype for r in rates_ours] == [np.float32] * len(LOSSLESS)
    assert [float(r) for r in rates_ours] == [float(r) for r in rates_theirs]
    for i, (a, b) in enumerate(zip(ours[0], theirs[0])):
        assert a.shape == b.shape and a.dtype == b.dtype, (LOSSLESS[i], a.shape, b.shape, a.dtype, b.dtype)
        np.testing.assert_allclose(a.astype(np.float64), b, rtol=0, atol=atol, err_msg=LOSSLESS[i])
    assert ours[0].layout == theirs[0].layout


def test_legacy_audio_decoder_and_ogg_vorbis_match_dali(clips):
    """Vorbis decoding is libsndfile's; its integer scaling may round 1 LSB (INT16) apart."""
    batch = [clips["stereo.ogg"], clips["mono.flac"]]
    ours, theirs = run_both(_decode({}, "audio_decoder"), [batch])
    assert_near(ours, theirs, 1e-6)
    ours, theirs = run_both(_decode({"dtype": "INT16", "downmix": True}), [batch])
    for a, b in zip(ours[0], theirs[0]):
        assert a.shape == b.shape and np.abs(a.astype(np.int32) - b).max() <= 1


def test_per_sample_target_rates_match_dali(clips):
    batch = [clips["stereo.wav"], clips["mono22k.wav"], clips["stereo.flac"]]
    rates = [np.float32(r) for r in (16000, 8000, 24000)]

    def body(fn, types, encoded, rate):
        return fn.decoders.audio(encoded, sample_rate=rate, downmix=True)

    ours, theirs = run_both(body, [batch, rates])
    assert_near(ours, theirs, 3e-4)


# -- audio_resample -------------------------------------------------------------------------------

RESAMPLE_CASES = {
    "rates_down": {"in_rate": 48000.0, "out_rate": 16000.0},
    "rates_up": {"in_rate": 16000.0, "out_rate": 44100.0, "quality": 80.0},
    "scale": {"scale": 0.37},
    "out_length": {"out_length": 7777},
    "low_quality": {"scale": 1.7, "quality": 0.0},
}


@pytest.mark.parametrize("case", sorted(RESAMPLE_CASES))
def test_resampling_matches_dali(signals, case):
    """Exact input positions here, float32-stepped ones in DALI: within 3e-4 of the signal's peak (1e-6 where
    the ratio is exact in float32)."""
    args = RESAMPLE_CASES[case]
    ours, theirs = run_both(lambda fn, types, x: fn.audio_resample(x, **args), [signals])
    assert_near(ours, theirs, 1e-6 if case == "rates_down" else 3e-4)


def test_resampling_keeps_channels_and_integer_types_like_dali(clips):
    import io

    import soundfile

    stereo, _ = soundfile.read(io.BytesIO(clips["stereo.wav"].tobytes()), dtype="int16")
    batch = [stereo[50000:60000].copy(), stereo[90000:93001].copy()]

    def body(fn, types, x):
        return (fn.audio_resample(x, in_rate=48000, out_rate=22050),
                fn.audio_resample(x, scale=0.5, dtype=types.FLOAT))

    ours, theirs = run_both(body, [(batch, "tc")])
    for a, b in zip(ours[0], theirs[0]):             # INT16 in, INT16 out: within 1 LSB
        assert a.shape == b.shape and a.dtype == b.dtype and np.abs(a.astype(np.int32) - b).max() <= 1
    assert_near(ours[1:], theirs[1:], 1e-6)           # 48 kHz -> 24 kHz: exact positions in both


# -- preemphasis_filter ---------------------------------------------------------------------------

@pytest.mark.parametrize("border", ["clamp", "zero", "reflect"])
def test_preemphasis_matches_dali_exactly(signals, border):
    ints = [np.round(s * 30000).astype(np.int16) for s in signals]

    def body(fn, types, x, xi, coeff):
        return (fn.preemphasis_filter(x, border=border),
                fn.preemphasis_filter(xi, border=border, preemph_coeff=coeff),
                fn.preemphasis_filter(xi, border=border, preemph_coeff=-0.9, dtype=types.INT16))

    coeffs = [np.float32(c) for c in (0.5, 0.97, 0.1)]
    ours, theirs = run_both(body, [signals, ints, coeffs])
    assert_near(ours, theirs)


# -- power_spectrum, spectrogram -----------------------------------------------------------------------

def test_power_spectrum_matches_dali(signals):
    """float32 FFTs (pocketfft here, DALI's own there): within 1e-5 of the largest bin. (DALI 2.4 corrupts its
    process on some FFT sizes that are no power of two, so the cases use powers of two.)"""
    frames = [s[:4096].reshape(16, 256).copy() for s in signals]
    equal = [s[:3000].copy() for s in signals]  # one shape: the batch is transformed as one block

    def body(fn, types, x, f, e):
        return (fn.power_spectrum(x), fn.power_spectrum(x, nfft=1024, power=1), fn.power_spectrum(f),
                fn.power_spectrum(f, axis=0, nfft=32, power=1), fn.power_spectrum(e, nfft=4096),
                fn.power_spectrum(e, nfft=2048))

    ours, theirs = run_both(body, [signals, (frames, "tf"), equal])
    assert_near(ours, theirs, 1e-5)


SPECTROGRAM_CASES = {
    "default": {},
    "speech": {"window_length": 400, "window_step": 160, "nfft": 512},
    "magnitude_not_centred": {"window_length": 256, "window_step": 100, "power": 1, "center_windows": False},
    "zero_padding_tf": {"window_length": 300, "window_step": 128, "reflect_padding": False, "layout": "tf"},
    "own_window": {"window_length": 5, "window_step": 3, "nfft": 8, "window_fn": [0.1, 0.5, 1.0, 0.5, 0.25]},
}


@pytest.mark.parametrize("case", sorted(SPECTROGRAM_CASES))
def test_spectrogram_matches_dali(signals, case):
    args = SPECTROGRAM_CASES[case]
    ours, theirs = run_both(lambda fn, types, x: fn.spectrogram(x, **args), [signals])
    assert_near(ours, theirs, 1e-5)


# -- mel_filter_bank, to_decibels, mfcc: the feature chain ---------------------------------------------

def _features(mel_args: dict, db_args: dict, mfcc_args: dict, layout: str = "ft"):
    def body(fn, types, x):
        spectrum = fn.spectrogram(x, window_length=400, window_step=160, nfft=512, layout=layout)
        mel = fn.mel_filter_bank(spectrum, **mel_args)
        db = fn.to_decibels(mel, **db_args)
        return mel, db, fn.mfcc(db, axis=layout.index("f"), **mfcc_args)
    return body


FEATURE_CASES = {
    "defaults": ({"sample_rate": 48000.0}, {}, {}),
    "speech_htk": ({"sample_rate": 16000.0, "nfilter": 40, "freq_low": 60.0, "freq_high": 7600.0,
                    "mel_formula": "htk"}, {"multiplier": 10.0, "cutoff_db": -80.0},
                   {"n_mfcc": 13, "lifter": 22.0, "normalize": True}),
    "peak_filters_tf": ({"sample_rate": 22050.0, "nfilter": 64, "normalize": False},
                        {"multiplier": 20.0, "reference": 1.0}, {"dct_type": 3, "n_mfcc": 30}),
    "dct_types": ({"sample_rate": 44100.0, "nfilter": 32}, {}, {"dct_type": 4, "n_mfcc": 20}),
    "dct_type_1": ({"sample_rate": 44100.0, "nfilter": 32}, {}, {"dct_type": 1}),
}


@pytest.mark.parametrize("case", sorted(FEATURE_CASES))
def test_mel_decibels_and_mfcc_match_dali(signals, case):
    """The filter bank is built in float64 and rounded to float32 (DALI builds it in float32): within
    1e-5 of each sample's peak for mel and dB values, 1e-4 for the MFCCs (a DCT of dB values)."""
    mel_args, db_args, mfcc_args = FEATURE_CASES[case]
    layout = "tf" if case.endswith("_tf") else "ft"
    ours, theirs = run_both(_features(mel_args, db_args, mfcc_args, layout), [signals])
    assert_near(ours[:2], theirs[:2], 1e-5)
    assert_near(ours[2:], theirs[2:], 1e-4)


# -- nonsilent_region -----------------------------------------------------------------------------

@pytest.mark.parametrize("args", [{}, {"cutoff_db": -30.0, "window_length": 512},
                                  {"cutoff_db": -20.0, "window_length": 1024, "reference_power": 0.001},
                                  {"window_length": 300, "reset_interval": -1}])
def test_nonsilent_region_matches_dali_exactly(signals, args):
    ints = [np.round(s * 32767).astype(np.int16) for s in signals]
    silence = [np.zeros(100, np.float32), np.zeros(3, np.float32), np.concatenate([np.zeros(700, np.float32),
                                                                                      signals[0][:900]])]

    def body(fn, types, x, xi, quiet):
        return (*fn.nonsilent_region(x, **args), *fn.nonsilent_region(xi, **args),
                *fn.nonsilent_region(quiet, **args))

    ours, theirs = run_both(body, [signals, ints, silence])
    assert_near(ours, theirs)
    assert all(o.dtype == np.int32 and o.shape == () for out in ours for o in out)


def test_trimming_silence_with_slice_matches_dali(signals):
    """DALI's recipe ``fn.slice(audio, *fn.nonsilent_region(audio), axes=[0])``: the int32 begin and length
    are absolute coordinates although ``normalized_anchor``/``normalized_shape`` default to True."""
    quiet = np.zeros(3000, np.float32)
    batch = [np.concatenate([quiet, s, quiet]) for s in signals]

    def body(fn, types, x):
        begin, length = fn.nonsilent_region(x, cutoff_db=-30.0, window_length=256)
        return fn.slice(x, begin, length, axes=[0])

    ours, theirs = run_both(body, [batch])
    assert_near(ours, theirs)
    assert all(len(t) < len(b) for t, b in zip(ours[0], batch))
