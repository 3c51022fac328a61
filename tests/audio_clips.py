"""Real audio for the audio tests: the soundtrack of the shared Big Buck Bunny clip, written with PyAV.

``write_clips(video, folder)`` decodes the clip's AAC stream (5.1, 48 kHz, about 5.3 s) once and
encodes it as WAV (16-bit PCM), FLAC and Ogg Vorbis files, in several channel counts, so the
decoders read real encoded files of each format. Nothing is committed: the files go to a temporary
folder.
"""

from __future__ import annotations

import fractions
import pathlib

import numpy as np

#: file name -> (container format, codec, PyAV sample format, channel layout, sample rate)
CLIPS = {
    "stereo.wav": ("wav", "pcm_s16le", "s16", "stereo", 48000),
    "surround.wav": ("wav", "pcm_s16le", "s16", "5.1", 48000),
    "mono22k.wav": ("wav", "pcm_s16le", "s16", "mono", 22050),
    "stereo.flac": ("flac", "flac", "s16", "stereo", 44100),
    "mono.flac": ("flac", "flac", "s16", "mono", 16000),
    "stereo.ogg": ("ogg", "vorbis", "fltp", "stereo", 44100),
}


def soundtrack(video: pathlib.Path) -> tuple[np.ndarray, int, str]:
    """The video's audio as planar float32 (channels, samples), its rate and its channel layout name."""
    import av

    with av.open(str(video)) as container:
        stream = container.streams.audio[0]
        frames = [f.to_ndarray() for f in container.decode(stream)]
        return np.concatenate(frames, axis=1).astype(np.float32), stream.rate, stream.layout.name


def _encode(path: pathlib.Path, planar: np.ndarray, rate: int, layout: str, spec: tuple) -> None:
    import av

    fmt, codec, sample_fmt, out_layout, out_rate = spec
    with av.open(str(path), "w", format=fmt) as out:
        stream = out.add_stream(codec, rate=out_rate, layout=out_layout)
        stream.format = sample_fmt
        stream.codec_context.options = {"strict": "experimental"}  # FFmpeg's own Vorbis encoder
        stream.codec_context.open()
        # Encoders with a fixed frame size (Vorbis) take frames of exactly that many samples.
        resampler = av.AudioResampler(format=sample_fmt, layout=out_layout, rate=out_rate,
                                      frame_size=stream.codec_context.frame_size or None)
        for start in range(0, planar.shape[1], 4096):
            frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(planar[:, start:start + 4096]), format="fltp",
                                               layout=layout)
            frame.sample_rate = rate
            frame.pts, frame.time_base = start, fractions.Fraction(1, rate)  # Ogg's granule positions
            for converted in resampler.resample(frame):
                out.mux(stream.encode(converted))
        for converted in resampler.resample(None):
            out.mux(stream.encode(converted))
        out.mux(stream.encode(None))


def write_clips(video: pathlib.Path, folder: pathlib.Path) -> dict[str, pathlib.Path]:
    """Encodes every clip of ``CLIPS`` into ``folder``; returns name -> path."""
    planar, rate, layout = soundtrack(video)
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, spec in CLIPS.items():
        paths[name] = folder / name
        _encode(paths[name], planar, rate, layout, spec)
    return paths


def chirp(length: int, rate: int = 16000, start_hz: float = 300.0, sweep_hz: float = 4000.0) -> np.ndarray:
    """A float32 frequency sweep in -0.4..0.4 (small synthetic audio for argument and contract tests)."""
    t = np.arange(length) / rate
    return (0.4 * np.sin(2 * np.pi * (start_hz + sweep_hz * t) * t)).astype(np.float32)


def wav_bytes(signal: np.ndarray, rate: int) -> np.ndarray:
    """``signal`` (float, -1..1, mono) encoded as a 16-bit PCM WAV file, as uint8 bytes."""
    import io
    import wave

    pcm = np.clip(np.round(signal * 32767), -32768, 32767).astype("<i2")
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(pcm.tobytes())
    return np.frombuffer(buffer.getvalue(), np.uint8)
