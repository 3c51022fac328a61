"""``fn.decoders.video`` (and ``fn.experimental.decoders.video``): encoded videos in, frame sequences out."""

from __future__ import annotations

import numpy as np

from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import Arg, OpArgumentError, OpSchema, register
from jaxdali.ops.video_codec import PAD_MODES, decode_frames, index_video, padded_indices, pyav
from jaxdali.tensors import TensorListCPU

__all__ = ["VIDEO_DECODER", "select_frames"]

_RANGE_ARGS = ("start_frame", "end_frame", "stride", "sequence_length")


def select_frames(num_frames: int, frames=None, start: int | None = None, end: int | None = None,
                  stride: int | None = None, length: int | None = None, pad_mode: str = "constant") -> np.ndarray:
    """Display indices of one sample's output frames (-1: a constant frame), as DALI's video decoder picks them.

    No selection: every frame. ``frames``: those indices. Otherwise ``start`` (default 0) advancing by
    ``stride`` (default 1), either ``length`` frames or up to ``end`` (exclusive; default the end of the
    video). Frames past the end are padded as ``pad_mode`` says; with "none" they are left out.
    """
    if frames is not None:
        wanted = np.asarray(frames, np.int64).reshape(-1)
        if (wanted < 0).any():
            raise ValueError(f"frame indices must be non-negative, got {wanted[wanted < 0][:4].tolist()}")
    else:
        start = 0 if start is None else int(start)
        stride = 1 if stride is None else int(stride)
        if not 0 <= start < num_frames:
            raise ValueError(f"start frame {start} is out of bounds, expected range [0, {num_frames})")
        if stride < 1:
            raise ValueError(f"stride must be >= 1, got {stride}")
        if length is not None:
            wanted = start + stride * np.arange(int(length), dtype=np.int64)
        else:
            wanted = np.arange(start, num_frames if end is None else int(end), stride, dtype=np.int64)
    if pad_mode == "none":
        return wanted[wanted < num_frames]
    return padded_indices(wanted, num_frames, pad_mode)


class VideoDecoder(Operator):
    def __init__(self, node, build):
        super().__init__(node, build)
        self.op = f"fn.{node.schema.name}"
        pyav()
        a = self.args
        if a["pad_mode"] not in PAD_MODES:
            raise OpArgumentError(f"{self.op}: argument 'pad_mode' must be one of {sorted(PAD_MODES)}, "
                                  f"got {a['pad_mode']!r}")
        given = {k for k in _RANGE_ARGS if node.args.get(k) is not None or k in node.arg_inputs}
        frames_given = node.args.get("frames") is not None or "frames" in node.arg_inputs
        if frames_given and given:
            raise OpArgumentError(f"{self.op}: 'frames' cannot be used together with {sorted(given)}")
        if {"end_frame", "sequence_length"} <= given:
            raise OpArgumentError(f"{self.op}: 'end_frame' and 'sequence_length' are mutually exclusive")
        fill = np.asarray(a["fill_value"], np.int64).reshape(-1)
        if fill.size not in (1, 3) or (fill < 0).any() or (fill > 255).any():
            raise OpArgumentError(f"{self.op}: argument 'fill_value' must be one value or one per channel (3), "
                                  f"each in [0, 255], got {list(a['fill_value'])}")
        self.fill_value = np.broadcast_to(fill, (3,)).astype(np.uint8)

    def _selection(self, args, i: int) -> dict:
        def value(name):
            v = args.sample_value(name, i)
            return None if v is None else (np.asarray(v).reshape(-1) if name == "frames" else int(np.asarray(v).reshape(())))
        return {"frames": value("frames"), "start": value("start_frame"), "end": value("end_frame"),
                "stride": value("stride"), "length": value("sequence_length")}

    def run(self, ctx, inputs, args):
        batch = inputs[0]
        samples = batch.samples()
        sources = batch.source_info or []
        n = len(samples)
        out: list = [None] * n
        pad_mode = self.args["pad_mode"]
        selections = [self._selection(args, i) for i in range(n)]

        def decode(start: int, stop: int) -> None:
            for i in range(start, stop):
                what = f"{self.op}: sample {i}" + (f" ({sources[i]!r})" if i < len(sources) and sources[i] else "")
                data = np.asarray(samples[i])
                if data.dtype not in (np.uint8, np.int8) or data.ndim != 1:
                    raise TypeError(f"{what}: expected the encoded video as 1-D uint8 bytes, got {data.dtype} of "
                                    f"shape {data.shape}")
                encoded = data.view(np.uint8).tobytes()
                index = index_video(encoded, what)
                try:
                    frames = select_frames(index.num_frames, pad_mode=pad_mode, **selections[i])
                except ValueError as e:
                    raise ValueError(f"{what}: {e}") from None
                out[i] = np.empty((len(frames), index.height, index.width, 3), np.uint8)
                decode_frames(encoded, index, frames, out[i], what, fill_value=self.fill_value)

        ctx.parallel_for(decode, n)
        return TensorListCPU(out, "FHWC", source_info=[sources[i] if i < len(sources) else "" for i in range(n)])


_ARGS = (
    Arg("frames", "ints", None, "Indices of the frames to decode, any order, repeats allowed (per sample).",
        tensor=True),
    Arg("start_frame", "int", None, "First frame (default 0).", tensor=True),
    Arg("end_frame", "int", None, "Frame to stop before (default: the end of the video).", tensor=True),
    Arg("stride", "int", None, "Step between decoded frames (default 1).", tensor=True),
    Arg("sequence_length", "int", None, "Number of frames to decode from start_frame.", tensor=True),
    Arg("pad_mode", "str", "constant", "Frames past the end of the video: 'constant' (fill_value), 'edge'/'repeat' "
        "(the last frame), 'reflect_101'/'reflect', 'reflect_1001'/'symmetric', or 'none' (left out)."),
    Arg("fill_value", "ints", (0,), "Padding value for pad_mode='constant': one value, or one per channel."),
    Arg("build_index", "bool", True, "The frame index is always built (from the packets, without decoding).",
        hint=True),
    Arg("affine", "bool", True, "Pin decoder threads to CPU cores (mixed backend).", hint=True),
)

_DOC = ("Decodes encoded videos (1-D uint8 samples, e.g. a file's bytes from fn.external_source or "
        "fn.readers.file) into frame sequences (F, H, W, 3), layout FHWC, F may differ per sample. Decodes on "
        "the CPU with FFmpeg (PyAV; install jaxdali[video]): H.264, H.265, VP8, VP9, AV1, MPEG-4, MJPEG and "
        "whatever else FFmpeg decodes (DALI 2.4's CPU backend rejects H.264/H.265/AV1), seeking to the "
        "keyframe before the first wanted frame. RGB as DALI's CPU decoder converts it (bit-exact). "
        "device='mixed' places the frames on the pipeline's JAX device.")

VIDEO_DECODER = register(OpSchema(name="decoders.video", impl=VideoDecoder, devices=("cpu", "mixed"), doc=_DOC,
                                  args=_ARGS))
EXPERIMENTAL_VIDEO_DECODER = register(OpSchema(
    name="experimental.decoders.video", impl=VideoDecoder, devices=("cpu", "mixed"),
    doc="The experimental name of fn.decoders.video. " + _DOC, args=_ARGS))
