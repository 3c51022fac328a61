"""``fn.experimental.inputs.video``: a long encoded video fed with ``Pipeline.feed_input``, streamed out as
batches of consecutive frame sequences.

Each fed batch holds one video (its encoded bytes). Every run takes up to ``max_batch_size`` sequences of
``sequence_length`` frames from where the previous run stopped, so a video far too large to decode at once
is decoded a batch at a time; the last batch of a video may hold fewer sequences, and its last sequence is
shorter (``last_sequence_policy="partial"``) or padded with black frames (``"pad"``). The next run moves to
the next fed video. Frames are decoded with FFmpeg and converted to RGB as ``fn.decoders.video`` converts
them (``jaxdali.ops.video_codec``): one decoder per video, kept open from batch to batch (every frame is
decoded once, in order), and the batch's conversions spread over the worker threads.
"""

from __future__ import annotations

import collections
import threading
from typing import Any

import numpy as np

from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import REQUIRED, Arg, OpSchema, register
from jaxdali.ops.video_codec import FrameStream, index_video, pyav, store_rgb
from jaxdali.tensors import TensorListCPU

__all__ = ["VIDEO_INPUT"]

_OP = "fn.experimental.inputs.video"


class VideoInput(Operator):
    """Streams fed videos as batches of sequences (see the module docstring)."""

    takes_fed_data = True

    def __init__(self, node, build):
        super().__init__(node, build)
        pyav()
        self._cond = threading.Condition()
        self._queue: collections.deque[bytes] = collections.deque()
        self._closed = False
        self._fed = 0
        self._video: FrameStream | None = None

    def feed(self, data: Any, layout: str | None) -> None:
        if isinstance(data, (list, tuple)):
            samples = list(data)
        else:
            array = np.asarray(data)
            samples = list(array) if array.ndim == 2 else [array]  # a (1, n) batch, or the video alone
        if len(samples) != 1:
            raise ValueError(f"{_OP}: feed one video per feed_input call (a batch of one sample), got {len(samples)}")
        video = samples[0]
        encoded = np.frombuffer(video, np.uint8) if isinstance(video, (bytes, bytearray, memoryview)) else \
            np.asarray(video)
        if encoded.dtype not in (np.uint8, np.int8) or encoded.ndim != 1:
            raise TypeError(f"{_OP}: a fed video must be its encoded bytes as a 1-D uint8 array, got {encoded.dtype} "
                            f"of shape {encoded.shape}")
        encoded = encoded.tobytes()  # FFmpeg reads it through a BytesIO, which shares a bytes object
        with self._cond:
            self._queue.append(encoded)
            self._cond.notify_all()

    def _current(self) -> FrameStream:
        """The video to emit from: the current one, or the next fed one once it is exhausted."""
        video = self._video
        if video is not None and video.next_frame < video.index.num_frames:
            return video
        if video is not None:
            video.close()
            self._video = None
        with self._cond:
            while not self._queue:
                if self._closed:
                    raise RuntimeError(f"{self.name}: the pipeline was closed while waiting for a fed video")
                if not self.args["blocking"]:
                    raise RuntimeError(f"{self.name}: no video left to decode: feed the next one with "
                                       f"pipe.feed_input({self.node.name!r}, [encoded_bytes]) before running "
                                       "(or use blocking=True)")
                self._cond.wait()
            data = self._queue.popleft()
        self._fed += 1
        what = f"{_OP}: fed video {self._fed}"
        self._video = FrameStream(data, index_video(data, what), what)
        return self._video

    def run(self, ctx, inputs, args):
        video = self._current()
        length, total = self.args["sequence_length"], video.index.num_frames
        count = min(ctx.max_batch_size, -(-(total - video.next_frame) // length))
        frames = video.take(min(count * length, total - video.next_frame))
        padded = count * length if self.args["last_sequence_policy"] == "pad" else len(frames)
        index = video.index
        out = np.zeros((padded, index.height, index.width, 3), np.uint8)  # padding frames are black

        def convert(lo: int, hi: int) -> None:  # sequences lo..hi (FFmpeg's conversion releases the GIL)
            a, b = lo * length, min(hi * length, len(frames))
            store_rgb(frames[a:b], out[a:b])

        ctx.parallel_for(convert, count)
        if padded == count * length:
            return TensorListCPU(out.reshape(count, length, *out.shape[1:]), "FHWC")
        return TensorListCPU([out[k * length:(k + 1) * length] for k in range(count)], "FHWC")

    def cancel(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def close(self) -> None:
        self.cancel()
        if self._video is not None:
            self._video.close()
            self._video = None


VIDEO_INPUT = register(OpSchema(
    name="experimental.inputs.video", impl=VideoInput, devices=("cpu", "mixed"), min_inputs=0, max_inputs=0,
    is_source=True,
    doc=("Streams a long encoded video given with Pipeline.feed_input (one video per call, its bytes as 1-D "
         "uint8) as batches of consecutive sequences of 'sequence_length' frames (F, H, W, 3), layout FHWC, "
         "decoding one batch at a time. The last batch of a video may be smaller; its last sequence is shorter "
         "('partial') or padded with black frames ('pad'). The next run moves to the next fed video. Decodes "
         "with FFmpeg (PyAV; install jaxdali[video]) as fn.decoders.video does: every codec FFmpeg decodes."),
    args=(
        Arg("sequence_length", "int", REQUIRED, "Number of frames in each sequence.", min=1),
        Arg("last_sequence_policy", "str", "partial", "The last sequence of a video: 'partial' (fewer frames) or "
            "'pad' (padded with black frames).", choices=("partial", "pad")),
        Arg("blocking", "bool", False, "Wait for the next fed video instead of raising when none is left."),
        Arg("no_copy", "bool", False, "DALI's zero-copy feeding; the video's bytes are always copied once here.",
            hint=True),
        Arg("affine", "bool", True, "Pin decoder threads to CPU cores (mixed backend).", hint=True),
    )))
