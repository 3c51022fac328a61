"""The audio operators on their own (no DALI needed): argument and input errors that name the operator and
the argument or sample, the FFmpeg fallback of the decoder, and results checked against signals whose
answer is known (a sine's frequency, a tone between silences)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from jaxdali import fn, types
from jaxdali.ops.audio import codec
from jaxdali.ops.schema import OpArgumentError
from tests.audio_clips import chirp, wav_bytes
from tests.run_once import run_once

RATE = 16000


def sine(hz: float, seconds: float = 0.25, rate: int = RATE) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return (0.5 * np.sin(2 * np.pi * hz * t)).astype(np.float32)


def run(make, batch_size: int = 2, **kwargs):
    outs, _ = run_once(make, batch_size=batch_size, **kwargs)
    return outs


def feed(samples: list, layout: str = ""):
    return fn.external_source(source=lambda: samples, layout=layout)


SIGNAL = [chirp(2000), chirp(1500)]
SPECTRUM = [np.ones((257, 4), np.float32)] * 2

ARGUMENT_ERRORS = [
    (lambda: fn.audio_resample(feed(SIGNAL), in_rate=2.0), "'in_rate' and 'out_rate' must be given together"),
    (lambda: fn.audio_resample(feed(SIGNAL)), "give exactly one of 'in_rate' with 'out_rate', 'scale' or 'out_length'"),
    (lambda: fn.audio_resample(feed(SIGNAL), scale=2.0, out_length=10), r"got \['scale', 'out_length'\]"),
    (lambda: fn.audio_resample(feed(SIGNAL), scale=0.0), "argument 'scale' must be > 0"),
    (lambda: fn.audio_resample(feed(SIGNAL), scale=1.0, quality=101), "argument 'quality' must be <= 100"),
    (lambda: fn.decoders.audio(feed([wav_bytes(s, RATE) for s in SIGNAL]), dtype=types.UINT8),
     "fn.decoders.audio: argument 'dtype' must be one of"),
    (lambda: fn.spectrogram(feed(SIGNAL), window_length=512, nfft=256), "'window_length' \\(512\\) can't be bigger"),
    (lambda: fn.spectrogram(feed(SIGNAL), window_length=4, window_fn=[1.0, 1.0]), "'window_fn' has 2 values"),
    (lambda: fn.spectrogram(feed(SIGNAL), layout="xy"), "argument 'layout' must be 'ft' or 'tf'"),
    (lambda: fn.spectrogram(feed(SIGNAL), power=3), "fn.spectrogram: argument 'power' must be one of"),
    (lambda: fn.power_spectrum(feed(SIGNAL), axis=1), "fn.power_spectrum: argument 'axis' is 1"),
    (lambda: fn.mel_filter_bank(feed(SPECTRUM, "ft"), sample_rate=16000.0, freq_high=9000.0),
     "fn.mel_filter_bank: arguments 'freq_low' \\(0.0\\) and 'freq_high' \\(9000.0\\)"),
    (lambda: fn.mfcc(feed(SPECTRUM, "ft"), dct_type=1, normalize=True), "fn.mfcc: argument 'normalize'"),
    (lambda: fn.mfcc(feed(SPECTRUM, "ft"), dct_type=5), "fn.mfcc: argument 'dct_type' must be one of"),
    (lambda: fn.mfcc(feed(SPECTRUM, "ft"), axis=2), "fn.mfcc: argument 'axis' is 2"),
    (lambda: fn.nonsilent_region(feed(SIGNAL), window_length=64, reset_interval=100),
     "fn.nonsilent_region: argument 'reset_interval' \\(100\\)"),
    (lambda: fn.preemphasis_filter(feed(SIGNAL), border="wrap"), "fn.preemphasis_filter: argument 'border'"),
]


@pytest.mark.parametrize("make,match", ARGUMENT_ERRORS, ids=[m[:40] for _, m in ARGUMENT_ERRORS])
def test_bad_arguments_name_the_operator_and_argument(make, match):
    with pytest.raises((OpArgumentError, ValueError, TypeError), match=match):
        run(make)


INPUT_ERRORS = [
    (lambda: fn.decoders.audio(feed([wav_bytes(SIGNAL[0], RATE), np.arange(300, dtype=np.uint8)])),
     codec.AudioDecodeError, r"fn.decoders.audio: sample 1: cannot decode the audio \(libsndfile: .*FFmpeg"),
    (lambda: fn.decoders.audio(feed(SIGNAL)), TypeError, "fn.decoders.audio: sample 0: the input must hold encoded "
                                                         "bytes"),
    (lambda: fn.decoders.audio(feed([wav_bytes(s, RATE) for s in SIGNAL]), sample_rate=feed(
        [np.float32(8000), np.float32(-1)])), ValueError, "sample 1: argument 'sample_rate' must be >= 0"),
    (lambda: fn.spectrogram(feed([(s * 1000).astype(np.int16) for s in SIGNAL])), TypeError,
     "fn.spectrogram: the input must be FLOAT"),
    (lambda: fn.spectrogram(feed([np.ones((8, 2), np.float32)] * 2)), ValueError,
     r"fn.spectrogram: sample 0: the input must be 1-D .* shape \(8, 2\)"),
    (lambda: fn.spectrogram(feed([SIGNAL[0][:100], SIGNAL[1]]), center_windows=False), ValueError,
     r"fn.spectrogram: sample 0: the signal \(100 samples\) is shorter than 'window_length' \(512\)"),
    (lambda: fn.audio_resample(feed([np.ones((2, 3, 4), np.float32)] * 2), scale=2.0), ValueError,
     "fn.audio_resample: the input must be 1-D .* got 3 dimensions"),
    (lambda: fn.nonsilent_region(feed([np.ones((8, 2), np.float32)] * 2)), ValueError,
     "fn.nonsilent_region: sample 0: the input must be 1-D"),
    (lambda: fn.nonsilent_region(feed([s.astype(np.float64) for s in SIGNAL])), TypeError,
     "fn.nonsilent_region: unsupported input type float64"),
    (lambda: fn.to_decibels(feed([np.ones(4, np.int32)] * 2)), TypeError, "fn.to_decibels: the input must be FLOAT"),
]


@pytest.mark.parametrize("make,error,match", INPUT_ERRORS, ids=[m[:40] for _, _, m in INPUT_ERRORS])
def test_bad_inputs_name_the_operator_and_sample(make, error, match):
    with pytest.raises(error, match=match):
        run(make)


# -- decoding -------------------------------------------------------------------------------------

def test_ffmpeg_decodes_what_libsndfile_cannot(shared_data):
    """The shared clip's AAC 5.1 track (an MP4, which libsndfile does not read) decodes through FFmpeg."""
    video = np.fromfile(shared_data / "video" / "bigbuckbunny.mp4", np.uint8)
    (audio, rates), = [run(lambda: fn.decoders.audio(feed([video])), batch_size=1)]
    assert audio[0].shape == (254976, 6) and audio[0].dtype == np.float32
    assert float(rates[0]) == 48000.0
    assert 0.05 < float(np.abs(audio[0]).max()) <= 1.0


def test_without_soundfile_wav_decodes_through_ffmpeg_to_the_same_samples(monkeypatch):
    encoded = [wav_bytes(s, RATE) for s in SIGNAL]
    expected = run(lambda: fn.decoders.audio(feed(encoded), dtype=types.INT16))
    monkeypatch.setattr(codec, "soundfile", None)
    monkeypatch.setattr(codec, "_pcm16_wav", lambda data: None)  # not read directly either
    fallback = run(lambda: fn.decoders.audio(feed(encoded), dtype=types.INT16))
    for a, b in zip(expected[0], fallback[0]):
        np.testing.assert_array_equal(a, b)
    assert [float(r) for r in fallback[1]] == [RATE, RATE]


def test_decoding_with_a_target_rate_and_downmix():
    stereo = np.stack([sine(440.0), sine(440.0) * 0.5], axis=1)
    import io

    import soundfile

    buffer = io.BytesIO()
    soundfile.write(buffer, stereo, RATE, format="WAV", subtype="FLOAT")
    encoded = np.frombuffer(buffer.getvalue(), np.uint8)
    audio, rates = run(lambda: fn.decoders.audio(feed([encoded]), sample_rate=48000.0, downmix=True), batch_size=1)
    assert audio[0].shape == (3 * len(stereo),) and float(rates[0]) == 48000.0
    t = np.arange(len(audio[0])) / 48000.0
    interior = slice(200, -200)  # away from the ends, where the filter runs out of signal
    np.testing.assert_allclose(audio[0][interior], (0.375 * np.sin(2 * np.pi * 440.0 * t))[interior], atol=2e-3)


# -- resampling and spectra against known answers -------------------------------------------------

@pytest.mark.parametrize("quality", [0.0, 50.0, 100.0])
def test_resampled_sine_is_the_sine_at_the_new_rate(quality):
    (out,), = [run(lambda: fn.audio_resample(feed([sine(440.0)]), in_rate=RATE, out_rate=44100.0,
                                             quality=quality), batch_size=1)]
    assert out[0].shape == (int(np.ceil(len(sine(440.0)) * 44100 / RATE)),)
    t = np.arange(len(out[0])) / 44100.0
    truth = 0.5 * np.sin(2 * np.pi * 440.0 * t)
    error = np.abs(out[0] - truth)[300:-300].max()
    assert error < (2e-2 if quality == 0 else 1e-3), error


def test_spectrogram_and_mel_peaks_sit_at_the_tone():
    def graph():
        spectrum = fn.spectrogram(feed([sine(1000.0), sine(3000.0)]), window_length=400, window_step=160, nfft=512)
        return spectrum, fn.mel_filter_bank(spectrum, sample_rate=RATE, nfilter=40)

    spectra, mels = run(graph)
    for spec, hz in zip(spectra, (1000.0, 3000.0)):
        assert spec.shape == (257, len(sine(hz)) // 160 + 1)
        assert abs(int(np.argmax(spec[:, 5])) - round(hz / (RATE / 512))) <= 1
    assert int(np.argmax(mels[1][:, 5])) > int(np.argmax(mels[0][:, 5]))


def test_nonsilent_region_finds_a_tone_between_silences():
    quiet = np.zeros(4000, np.float32)
    tone = np.roll(sine(440.0, 0.1), -9)  # starts and ends away from a zero crossing
    assert min(abs(tone[0]), abs(tone[-1])) > 0.05
    signal = np.concatenate([quiet, tone, quiet])
    begin, length = run(lambda: fn.nonsilent_region(feed([signal]), window_length=256), batch_size=1)
    # The region covers every 256-sample window that holds part of the tone.
    assert (int(begin[0]), int(begin[0] + length[0])) == (4000 - 255, 4000 + len(tone) + 255)



def test_nonsilent_region_finds_loud_bursts_anywhere_in_long_signals():
    """Bursts straddling the operator's search chunks (4096 samples), at either end or alone."""
    bursts = [[(8190, 8200), (12290, 12300)], [(0, 5)], [(19990, 20000)], [(4000, 4200)], []]
    signals = []
    for spans in bursts:
        signal = np.zeros(20000, np.float32)
        for start, stop in spans:
            signal[start:stop] = 0.5
        signals.append(signal)
    begin, length = run(lambda: fn.nonsilent_region(feed(signals), window_length=64), batch_size=len(signals))
    expected = [(max(spans[0][0] - 63, 0), spans[-1][1] - 1 + 64 - max(spans[0][0] - 63, 0)) if spans else (0, 20000)
                for spans in bursts]
    expected[2] = (19990 - 63, 20000 - (19990 - 63))  # the region ends with the signal
    assert [(int(b), int(n)) for b, n in zip(begin, length)] == expected

@pytest.mark.parametrize("size", [1, 7, 8, 9, 1000, 4103])
@pytest.mark.parametrize("window", [1, 5, 8, 300, 5000])
def test_nonsilent_window_sums_are_the_sums_of_squares_over_each_window(size, window):
    """The blocked running sum (rows of 8) at sizes and windows off and on the block boundaries, with a
    reused scratch larger than needed."""
    from jaxdali.ops.audio.nonsilent import scratch_size, window_sums

    signal = np.random.default_rng(size).uniform(-1, 1, size).astype(np.float32)
    squares = signal.astype(np.float64) ** 2
    expected = np.array([squares[max(i - window + 1, 0):i + 1].sum() for i in range(size)])
    scratch = np.full(scratch_size(size) + 5, np.nan)
    np.testing.assert_allclose(window_sums(signal, window, scratch), expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(window_sums(signal, window), expected, rtol=1e-12, atol=1e-12)


def test_to_decibels_and_mfcc_of_constant_spectra():
    spectrum = [np.full((40, 3), 100.0, np.float32), np.full((40, 3), 0.01, np.float32)]

    def graph():
        db = fn.to_decibels(feed(spectrum, "ft"), reference=1.0)
        return db, fn.mfcc(db, n_mfcc=5, normalize=True)

    db, coefficients = run(graph)
    np.testing.assert_allclose(db[0], 20.0, atol=1e-5)
    np.testing.assert_allclose(db[1], -20.0, atol=1e-5)
    # An orthonormal DCT of a constant: all energy in coefficient 0 (value * sqrt(N)).
    np.testing.assert_allclose(coefficients[0][0], 20.0 * np.sqrt(40), rtol=1e-5)
    np.testing.assert_allclose(coefficients[0][1:], 0.0, atol=1e-4)


def test_more_threads_give_the_same_features():
    def graph():
        audio, _ = fn.decoders.audio(feed([wav_bytes(s, RATE) for s in (chirp(5000), chirp(3000), chirp(4000))]),
                                     sample_rate=8000.0)
        return fn.mfcc(fn.to_decibels(fn.mel_filter_bank(fn.spectrogram(audio, window_length=256, window_step=128),
                                                         sample_rate=8000.0, nfilter=32)))

    one, = run(graph, batch_size=3, num_threads=1)
    two, = run(graph, batch_size=3, num_threads=2)
    for a, b in zip(one, two):
        np.testing.assert_array_equal(a, b)


def test_without_any_decoding_library_the_error_says_what_to_install(monkeypatch):
    import io

    import soundfile

    flac = []
    for s in SIGNAL:  # 16-bit WAV would be read without a library
        buffer = io.BytesIO()
        soundfile.write(buffer, s, RATE, format="FLAC")
        flac.append(np.frombuffer(buffer.getvalue(), np.uint8))
    monkeypatch.setattr(codec, "soundfile", None)
    monkeypatch.setitem(sys.modules, "av", None)  # ``import av`` fails
    with pytest.raises(ImportError, match=r"soundfile \(libsndfile\) or PyAV .*jaxdali\[audio\]"):
        run(lambda: fn.decoders.audio(feed(flac)))


@pytest.mark.parametrize("container", ["WAV", "WAVEX"])
@pytest.mark.parametrize("subtype", ["PCM_16", "PCM_24", "FLOAT"])
def test_wav_files_read_directly_equal_libsndfile(container, subtype):
    """16-bit PCM WAV (plain and extensible) skips libsndfile; every type must come out as libsndfile's."""
    import io

    import soundfile

    signal = np.stack([chirp(1001), -chirp(1001), chirp(1001, start_hz=50.0)], axis=1)
    buffer = io.BytesIO()
    soundfile.write(buffer, signal, 8000, format=container, subtype=subtype)
    encoded = np.frombuffer(buffer.getvalue(), np.uint8)
    assert (codec._pcm16_wav(encoded) is not None) == (subtype == "PCM_16")
    for dtype in ("float32", "int16", "int32"):
        expected, rate = soundfile.read(io.BytesIO(encoded.tobytes()), dtype=dtype, always_2d=True)
        got, got_rate = codec.decode(encoded, np.dtype(dtype))
        assert got.dtype == expected.dtype and got_rate == rate
        np.testing.assert_array_equal(got, expected)


def test_a_wav_whose_data_chunk_runs_past_the_file_goes_to_libsndfile():
    encoded = wav_bytes(SIGNAL[0], RATE)
    cut = encoded[:-100]  # the header still announces all the samples
    assert codec._pcm16_wav(cut) is None
    samples, rate = codec.decode(cut, np.dtype(np.int16))
    assert rate == RATE and samples.shape == ((len(cut) - 44) // 2, 1)
