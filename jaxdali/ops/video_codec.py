"""Video decoding on the CPU through FFmpeg (PyAV): frame indexing, keyframe seeking, padding.

A video is indexed once by demuxing its packets (no decoding): the presentation timestamps of its
frames in display order and which of them are keyframes. Decoding a set of frames then seeks to the
last keyframe at or before each needed run of frames and decodes forward, so a sequence in the middle
of a long file does not decode from the start.

Frames are converted to RGB as DALI's CPU video decoder does (FFmpeg's swscale, bilinear, accurate
rounding, chroma interpolated at full resolution), so the pixels match DALI's bit for bit.
"""

from __future__ import annotations

import dataclasses
import io
import threading
from typing import Any

import numpy as np

from jaxdali.ops.readers import storage

__all__ = ["PAD_MODES", "VideoDecodeError", "VideoIndex", "decode_frames", "index_video", "padded_indices",
           "pyav"]


class VideoDecodeError(RuntimeError):
    """A video that cannot be opened, indexed or decoded; the message names the file (or sample)."""


def pyav():
    """The ``av`` module (PyAV), or an error that says how to install it."""
    try:
        import av
    except ImportError:
        raise ImportError("jaxdali's video operators decode with FFmpeg through PyAV: "
                          "pip install 'jaxdali[video]' (or pip install av)") from None
    return av


#: pad_mode names (DALI's, aliases included) -> the rule used here.
PAD_MODES = {"none": "none", "constant": "constant", "edge": "edge", "repeat": "edge",
             "reflect_1001": "symmetric", "symmetric": "symmetric", "reflect_101": "reflect", "reflect": "reflect"}


@dataclasses.dataclass(frozen=True)
class VideoIndex:
    """What a video holds, read from its packets: frames in display order and where decoding may start.

    Attributes:
      pts: presentation timestamp of each frame (stream time base), ascending.
      keyframes: display indices of the keyframes, ascending.
      time_base: seconds per timestamp tick, as (numerator, denominator).
      fps: average frame rate.
      height, width: frame size.
    """

    pts: np.ndarray
    keyframes: np.ndarray
    time_base: tuple[int, int]
    fps: float
    height: int
    width: int

    @property
    def num_frames(self) -> int:
        return len(self.pts)

    def timestamps(self, frames: np.ndarray) -> np.ndarray:
        """Seconds of each display index (-1 for the -1 of padded frames)."""
        frames = np.asarray(frames)
        num, den = self.time_base  # pts * num / den, as DALI computes it (pts * (num / den) can differ by 1 ulp)
        out = self.pts[np.maximum(frames, 0)] * num / den
        return np.where(frames < 0, -1.0, out)


def _open(source: Any, what: str):
    av = pyav()
    try:
        if isinstance(source, (bytes, bytearray, memoryview)):
            source = io.BytesIO(source)
        elif storage.is_remote(source):  # fsspec URLs: a seekable file, read as FFmpeg asks
            source = storage.open_file(source)
        container = av.open(source)
    except (av.FFmpegError, OSError) as e:
        raise VideoDecodeError(f"{what}: cannot open the video ({e})") from None
    if not container.streams.video:
        container.close()
        raise VideoDecodeError(f"{what}: the file has no video stream")
    return container


def index_video(source: Any, what: str) -> VideoIndex:
    """Indexes the first video stream of ``source`` (a path or the encoded bytes); ``what`` names it in errors."""
    av = pyav()
    with _open(source, what) as container:
        stream = container.streams.video[0]
        pts, keys = [], []
        try:
            for packet in container.demux(stream):
                if packet.pts is None:  # the demuxer's end-of-stream marker, or a packet without a frame
                    continue
                pts.append(packet.pts)
                keys.append(packet.is_keyframe)
        except av.FFmpegError as e:
            raise VideoDecodeError(f"{what}: cannot read the video's packets ({e})") from None
        if not pts:
            raise VideoDecodeError(f"{what}: the video stream has no frames")
        order = np.argsort(np.asarray(pts, np.int64), kind="stable")
        pts_sorted = np.asarray(pts, np.int64)[order]
        if (np.diff(pts_sorted) == 0).any():
            raise VideoDecodeError(f"{what}: frames share presentation timestamps, so they cannot be told apart")
        keyframes = np.flatnonzero(np.asarray(keys, bool)[order])
        if len(keyframes) == 0 or keyframes[0] != 0:
            keyframes = np.concatenate([[0], keyframes]).astype(np.int64)
        rate = stream.average_rate or stream.guessed_rate
        return VideoIndex(pts=pts_sorted, keyframes=keyframes, time_base=(stream.time_base.numerator, stream.time_base.denominator),
                          fps=float(rate) if rate else 0.0, height=stream.codec_context.height,
                          width=stream.codec_context.width)


def padded_indices(frames: np.ndarray, end: int, pad_mode: str) -> np.ndarray:
    """``frames`` with every index at or past ``end`` replaced as ``pad_mode`` says (-1: a constant frame)."""
    frames = np.asarray(frames, np.int64)
    past = frames >= end
    if not past.any():
        return frames
    rule = PAD_MODES[pad_mode]
    last = end - 1
    if rule == "constant" or end <= 0:
        replaced = np.full_like(frames, -1)
    elif rule == "edge":
        replaced = np.full_like(frames, last)
    elif rule == "reflect":  # ABC -> ABCBA: mirrored about the last frame
        replaced = _reflect_101(frames, last) if last > 0 else np.zeros_like(frames)
    else:  # symmetric: ABC -> ABCCBA: mirrored after the last frame
        period = 2 * end
        m = frames % period
        replaced = np.where(m < end, m, period - 1 - m)
    return np.where(past, replaced, frames)


def _reflect_101(frames: np.ndarray, last: int) -> np.ndarray:
    period = 2 * last
    m = frames % period
    return np.where(m <= last, m, period - m)


def decode_frames(source: Any, index: VideoIndex, frames: np.ndarray, out: np.ndarray, what: str,
                  image_type: str = "rgb", fill_value: np.ndarray | None = None) -> int:
    """Decodes display indices ``frames`` (any order, repeats allowed, -1 = a ``fill_value`` frame) into ``out``.

    ``out`` has shape ``(len(frames), height, width, channels)``; ``image_type`` is "rgb" or "ycbcr".
    Returns how many frames the codec decoded (seeking keeps this near the number wanted).
    """
    av = pyav()
    frames = np.asarray(frames, np.int64)
    if fill_value is not None and (frames < 0).any():
        out[frames < 0] = fill_value
    wanted = np.unique(frames[frames >= 0])
    if len(wanted) and wanted[-1] >= index.num_frames:
        raise VideoDecodeError(f"{what}: frame {int(wanted[-1])} requested, the video has {index.num_frames} frames")
    if not len(wanted):
        return 0
    slots = {int(f): np.flatnonzero(frames == f) for f in wanted}
    frame_of_pts = {int(p): i for i, p in enumerate(index.pts)}
    flags = _conversion_flags(av)
    fmt = "rgb24" if image_type == "rgb" else "yuv444p"
    with _open(source, what) as container:
        stream = container.streams.video[0]
        stream.codec_context.thread_count = 1  # the pipeline's pool decodes samples in parallel
        next_frame = None  # display index the decoder will produce next; None: not positioned
        decoded = None
        k = count = 0
        try:
            while k < len(wanted):
                target = int(wanted[k])
                key = int(index.keyframes[np.searchsorted(index.keyframes, target, side="right") - 1])
                if next_frame is None or target < next_frame or key > next_frame:
                    container.seek(int(index.pts[key]), stream=stream, backward=True, any_frame=False)
                    decoded = container.decode(stream)
                for frame in decoded:
                    count += 1
                    i = frame_of_pts.get(frame.pts)
                    if i is None or i < target:
                        continue
                    next_frame = i + 1
                    if i == target:
                        _store(frame, fmt, flags, out, slots[target])
                        k += 1
                        break
                    raise VideoDecodeError(f"{what}: frame {target} could not be decoded (the decoder went from "
                                           f"frame {i - 1} to {i})")
                else:
                    raise VideoDecodeError(f"{what}: the video ended before frame {target} of "
                                           f"{index.num_frames} could be decoded")
        except av.FFmpegError as e:
            raise VideoDecodeError(f"{what}: decoding failed ({e})") from None
    return count


class FrameStream:
    """A video's frames decoded one after the other from the first, the decoder kept open between calls
    (for streaming a long video a batch at a time: no seek, no frame decoded twice)."""

    def __init__(self, source: Any, index: VideoIndex, what: str):
        self.index, self.what, self.next_frame = index, what, 0
        self._container = _open(source, what)
        self._frames = self._container.decode(self._container.streams.video[0])
        self._frame_of_pts = {int(p): i for i, p in enumerate(index.pts)}

    def take(self, count: int) -> list:
        """The next ``count`` frames (PyAV frames, for ``store_rgb``)."""
        av = pyav()
        out = []
        try:
            while len(out) < count:
                frame = next(self._frames, None)
                if frame is None:
                    raise VideoDecodeError(f"{self.what}: the video ended before frame {self.next_frame} of "
                                           f"{self.index.num_frames} could be decoded")
                i = self._frame_of_pts.get(frame.pts)
                if i is None or i < self.next_frame:
                    continue
                if i != self.next_frame:
                    raise VideoDecodeError(f"{self.what}: frame {self.next_frame} could not be decoded (the decoder "
                                           f"went on to frame {i})")
                out.append(frame)
                self.next_frame += 1
        except av.FFmpegError as e:
            raise VideoDecodeError(f"{self.what}: decoding failed ({e})") from None
        return out

    def close(self) -> None:
        self._container.close()


def store_rgb(frames: list, out: np.ndarray) -> None:
    """``frames`` (PyAV frames) converted to RGB into ``out[k]``, as ``decode_frames`` converts them."""
    flags = _conversion_flags(pyav())
    for k, frame in enumerate(frames):
        _store(frame, "rgb24", flags, out, np.array([k]))


def _conversion_flags(av) -> Any:
    interp = av.video.reformatter.Interpolation
    return interp.BILINEAR | interp.ACCURATE_RND | interp.FULL_CHR_H_INT


#: Each thread's PyAV reformatter, kept between frames: a frame's own ``to_ndarray(format=...)`` sets up a
#: new swscale context every frame, which costs about a third of the conversion at 320x180.
_reformatters = threading.local()


def _store(frame, fmt: str, flags, out: np.ndarray, slots: np.ndarray) -> None:
    reformatter = getattr(_reformatters, "reformatter", None)
    if reformatter is None:
        reformatter = _reformatters.reformatter = pyav().video.reformatter.VideoReformatter()
    array = reformatter.reformat(frame, format=fmt, interpolation=flags, threads=1).to_ndarray()
    if fmt != "rgb24":  # planar (3, H, W) -> (H, W, 3)
        array = np.moveaxis(array, 0, -1)
    channels = out.shape[-1]
    if channels != array.shape[-1]:
        array = array[..., :channels]
    out[slots[0]] = array
    for s in slots[1:]:
        out[s] = out[slots[0]]
