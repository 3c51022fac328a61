"""Decoding of encoded audio files held in memory: libsndfile (through ``soundfile``) first, FFmpeg
(through PyAV) for what libsndfile cannot read or when ``soundfile`` is not installed. 16-bit PCM WAV
files are read directly (their samples are stored as they are), with libsndfile's conversions.

libsndfile reads WAV, FLAC, Ogg Vorbis/Opus, AIFF, MP3 and more; its decoding runs with the GIL
released (cffi), so samples decode in parallel on the worker pool.
"""

from __future__ import annotations

import io

import numpy as np

from jaxdali.ops.audio.normalize import from_unit_range

__all__ = ["AudioDecodeError", "decode", "window_slice"]

try:
    import soundfile
except (ImportError, OSError):  # no wheel, or no libsndfile on this platform: PyAV only
    soundfile = None


class AudioDecodeError(ValueError):
    """Encoded audio that neither libsndfile nor FFmpeg can decode."""


#: soundfile's names of the integer types it reads natively.
_NATIVE = {np.dtype(np.int16): "int16", np.dtype(np.int32): "int32", np.dtype(np.float32): "float32"}


def decode(data: np.ndarray, dtype: np.dtype, window: tuple[float, float] = (0.0, 0.0),
           path: str | None = None) -> tuple[np.ndarray, float]:
    """(samples (length, channels) of ``dtype``, sample rate) of one encoded file.

    ``dtype`` is float32 (-1..1), int16 or int32 (full range, as libsndfile scales them). ``window`` =
    (offset, duration) in seconds decodes only that part (duration 0: to the end; see ``window_slice``).
    ``path``: the local file that ``data`` maps, which libsndfile then reads itself, without the Python
    read callbacks of in-memory data that hold the GIL (decodes on several threads scale better).
    """
    data = np.ascontiguousarray(data)
    pcm = _pcm16_wav(data)
    if pcm is not None:
        samples, rate = pcm
        return _from_pcm16(samples[window_slice(window, rate, len(samples))], dtype), rate
    reasons = []
    if soundfile is not None:
        try:
            with soundfile.SoundFile(io.BytesIO(data) if path is None else path) as f:
                frames = window_slice(window, f.samplerate, f.frames)
                if frames.start:
                    f.seek(frames.start)
                samples = f.read(frames.stop - frames.start, dtype=_NATIVE[np.dtype(dtype)], always_2d=True)
                return samples, float(f.samplerate)
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
    return from_unit_range(samples[window_slice(window, rate, len(samples))], dtype), rate


def window_slice(window: tuple[float, float], rate: float, length: int) -> slice:
    """The frames of (offset, duration) seconds at ``rate``, clipped to the file's ``length`` frames; the
    bounds are truncated to whole frames, as DALI's ``fn.readers.nemo_asr`` does."""
    offset, duration = window
    start = min(int(offset * rate), length)
    stop = length if duration <= 0 else min(start + int(duration * rate), length)
    return slice(start, stop)


#: WAVE format tags of integer PCM: plain, and WAVE_FORMAT_EXTENSIBLE (whose sub-format is checked).
_PCM, _EXTENSIBLE = 1, 0xFFFE
#: The first two bytes of the KSDATAFORMAT_SUBTYPE_PCM GUID, the sub-format of extensible integer PCM.
_PCM_SUBFORMAT = b"\x01\x00"


def _pcm16_wav(data: np.ndarray) -> tuple[np.ndarray, float] | None:
    """A RIFF/WAVE file of 16-bit integer PCM as an int16 (length, channels) view of ``data`` and its rate;
    None for anything else (other formats, sizes or damaged headers: libsndfile reads or rejects those).

    The most common file of speech data sets needs no decoding, only its header read: this skips
    libsndfile's per-file setup, which costs about as much as decoding a second of audio."""
    raw = bytes(data[:12])
    if raw[:4] != b"RIFF" or raw[8:12] != b"WAVE":
        return None
    offset, fmt = 12, None
    while offset + 8 <= data.size:
        header = bytes(data[offset:offset + 8])
        chunk, size = header[:4], int.from_bytes(header[4:], "little")
        body = offset + 8
        if chunk == b"fmt " and size >= 16:
            fmt = bytes(data[body:body + min(size, 40)])
        elif chunk == b"data":
            if fmt is None or body + size > data.size:
                return None
            tag, channels, rate = (int.from_bytes(fmt[0:2], "little"), int.from_bytes(fmt[2:4], "little"),
                                   int.from_bytes(fmt[4:8], "little"))
            bits, align = int.from_bytes(fmt[14:16], "little"), int.from_bytes(fmt[12:14], "little")
            pcm = tag == _PCM or (tag == _EXTENSIBLE and len(fmt) >= 26 and fmt[24:26] == _PCM_SUBFORMAT)
            if not pcm or bits != 16 or channels < 1 or align != 2 * channels or rate < 1:
                return None
            frames = size // align
            samples = data[body:body + frames * align].view("<i2").reshape(frames, channels)
            return samples, float(rate)
        offset = body + size + (size & 1)  # chunks are padded to even sizes
    return None


def _from_pcm16(samples: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """16-bit PCM as ``dtype`` the way libsndfile converts it: / 32768 to float, << 16 to int32."""
    dtype = np.dtype(dtype)
    if dtype == np.int16:
        return samples.astype(np.int16)
    if dtype == np.int32:
        return np.left_shift(samples.astype(np.int32), 16)
    return samples.astype(np.float32) * np.float32(1.0 / 32768)


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
