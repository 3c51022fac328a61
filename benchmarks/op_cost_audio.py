"""Per-operator cost cases of the audio operators (run by ``benchmarks/op_cost.py``).

The builders ignore the photos: their input is real audio, the soundtrack of the shared Big Buck Bunny
clip (AAC 5.1, 48 kHz, 5.3 s), decoded once with PyAV into a batch of 32 one-second excerpts (mono
float32 signals, 48000 samples), their 16-bit WAV and FLAC encodings (the decoder's input), and their mel
spectrograms (the input of ``to_decibels`` and ``mfcc``). Each case feeds them with a per-sample
``external_source`` of its own.
"""

import functools
import io
import pathlib
import wave

import numpy as np
from op_cost import BATCH, DATA

VIDEO = DATA.parent / "video" / "bigbuckbunny.mp4"
RATE = 48000


@functools.lru_cache(maxsize=1)
def excerpts() -> list[np.ndarray]:
    """``BATCH`` one-second mono excerpts of the soundtrack, evenly spaced and overlapping."""
    import av

    with av.open(str(pathlib.Path(VIDEO))) as container:
        stream = container.streams.audio[0]
        audio = np.concatenate([f.to_ndarray() for f in container.decode(stream)], axis=1)[0].astype(np.float32)
    starts = np.linspace(0, len(audio) - RATE, BATCH).astype(int)
    return [audio[s:s + RATE].copy() for s in starts]


@functools.lru_cache(maxsize=1)
def wav_files() -> list[np.ndarray]:
    """The excerpts as 16-bit mono WAV files (uint8 bytes)."""
    out = []
    for signal in excerpts():
        buffer = io.BytesIO()
        with wave.open(buffer, "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(RATE)
            w.writeframes(np.clip(np.round(signal * 32767), -32768, 32767).astype("<i2").tobytes())
        out.append(np.frombuffer(buffer.getvalue(), np.uint8))
    return out


@functools.lru_cache(maxsize=1)
def flac_files() -> list[np.ndarray]:
    """The excerpts as 16-bit mono FLAC files (uint8 bytes), encoded by libsndfile."""
    import soundfile

    out = []
    for signal in excerpts():
        buffer = io.BytesIO()
        soundfile.write(buffer, np.clip(signal, -1.0, 1.0), RATE, subtype="PCM_16", format="FLAC")
        out.append(np.frombuffer(buffer.getvalue(), np.uint8))
    return out


@functools.lru_cache(maxsize=1)
def mel_spectra() -> list[np.ndarray]:
    """(64, 188) float32 "ft" mel power spectrograms of the excerpts (a plain NumPy reference chain)."""
    frames = [np.lib.stride_tricks.sliding_window_view(s, 512)[::256] for s in excerpts()]
    power = [np.abs(np.fft.rfft(f * np.hanning(512), axis=1)).T.astype(np.float32) ** 2 for f in frames]
    bank = np.random.default_rng(0).uniform(0, 1, (64, 257)).astype(np.float32) / 257
    return [np.ascontiguousarray(bank @ p) for p in power]


def _feed(fn, samples, layout=""):
    """One sample per call (the pipeline's batch size, whatever it is), cycling through ``samples``."""
    return fn.external_source(source=lambda info: samples[info.idx_in_batch % len(samples)], batch=False,
                              layout=layout)


def _signals(fn):
    return _feed(fn, excerpts())


CASES = {
    "decoders.audio": lambda fn, images: fn.decoders.audio(_feed(fn, wav_files()))[0],
    "decoders.audio_flac": lambda fn, images: fn.decoders.audio(_feed(fn, flac_files()))[0],
    "decoders.audio_resample": lambda fn, images: fn.decoders.audio(_feed(fn, wav_files()), sample_rate=16000.0)[0],
    "audio_resample": lambda fn, images: fn.audio_resample(_signals(fn), in_rate=48000.0, out_rate=16000.0),
    "preemphasis_filter": lambda fn, images: fn.preemphasis_filter(_signals(fn)),
    "power_spectrum": lambda fn, images: fn.power_spectrum(_feed(fn, [s[:16384].copy() for s in excerpts()])),
    "spectrogram": lambda fn, images: fn.spectrogram(_signals(fn), window_length=512, window_step=256, nfft=512),
    "mel_filter_bank": lambda fn, images: fn.mel_filter_bank(
        fn.spectrogram(_signals(fn), window_length=512, window_step=256), sample_rate=48000.0, nfilter=64),
    "to_decibels": lambda fn, images: fn.to_decibels(_feed(fn, mel_spectra(), "ft")),
    "mfcc": lambda fn, images: fn.mfcc(_feed(fn, mel_spectra(), "ft"), n_mfcc=20),
    "nonsilent_region": lambda fn, images: fn.nonsilent_region(_signals(fn), window_length=1024)[0],
    "audio_chain": lambda fn, images: fn.mfcc(fn.to_decibels(fn.mel_filter_bank(
        fn.spectrogram(fn.decoders.audio(_feed(fn, wav_files()), sample_rate=16000.0, downmix=True)[0],
                       window_length=400, window_step=160, nfft=512), sample_rate=16000.0, nfilter=64))),
}
