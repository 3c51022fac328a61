"""Decoding of encoded audio files held in memory: libsndfile (through ``soundfile``) first, FFmpeg
(through PyAV) for what libsndfile cannot read or when ``soundfile`` is not installed.

libsndfile reads WAV, FLAC, Ogg Vorbis/Opus, AIFF, MP3 and more; its decoding runs with the GIL
released (cffi), so samples decode in parallel on the worker pool.
"""

from __future__ import annotations

import io

import numpy as np

from jaxdali.ops.audio.normalize import from_unit_range

__all__ = ["AudioDecodeError", "decode"]

try:
    import soundfile
except (ImportError, OSError):  # no wheel, or no libsndfile on this platform: PyAV only
    soundfile = None


class AudioDecodeError(ValueError):
    """Encoded audio that neither libsndfile nor FFmpeg can decode."""


#: soundfile's names of the integer types it reads natively.
_NATIVE = {np.dtype(np.int16): "int16", np.dtype(np.int32): "int32", np.dtype(np.float32): "float32"}


def decode(data: np.ndarray, dtype: np.dtype) -> tuple[np.ndarray, float]:
    """(samples (length, channels) of ``dtype``, sample rate) of one encoded file.

    ``dtype`` is float32 (-1..1), int16 or int32 (full range, as libsndfile scales them).
    """
    reasons = []
    if soundfile is not None:
        try:
            samples, rate = soundfile.read(io.BytesIO(data), dtype=_NATIVE[np.dtype(dtype)], always_2d=True)
            return samples, float(rate)
        except (soundfile.LibsndfileError, RuntimeError, TypeError) as e:
            reasons.append(f"libsndfile: {e}")
    try:
        samples, rate = _decode_av(data)
    except ImportError:
        if soundfile is None:
            raise ImportError("decoding audio needs soundfile (libsndfile) or PyAV (FFmpeg): "
                              "pip install 'jaxdali[audio]'") from None
        raise AudioDecodeError("; ".join(reasons + ["FFmpeg: PyAV is not installed"])) from None
    except Exception as e:  # noqa: BLE001 - every FFmpeg failure becomes one decode error
        reasons.append(f"FFmpeg: {e}")
        raise AudioDecodeError("; ".join(reasons)) from None
    return from_unit_range(samples, dtype), rate


def _decode_av(data: np.ndarray) -> tuple[np.ndarray, float]:
    """FFmpeg's decoding as interleaved float32 (length, channels) and the sample rate."""
    import av

    with av.open(io.BytesIO(data.tobytes()), "r") as container:
        if not container.streams.audio:
            raise AudioDecodeError("no audio stream")
        stream = container.streams.audio[0]
        channels = stream.codec_context.channels
        resampler = av.AudioResampler(format="flt", layout=stream.codec_context.layout, rate=stream.rate)
        chunks = [f.to_ndarray().reshape(-1, channels)
                  for frame in container.decode(stream) for f in resampler.resample(frame)]
        chunks += [f.to_ndarray().reshape(-1, channels) for f in resampler.resample(None)]
        samples = np.concatenate(chunks) if chunks else np.zeros((0, channels), np.float32)
        return samples, float(stream.rate)
