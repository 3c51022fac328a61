"""``fn.experimental.readers.video`` and ``fn.readers.video``: sequences of frames from video files.

Every file is indexed once at build (its packets, not its frames); the samples are the sequences
enumerated from each file, so the epoch size is the number of sequences and sharding, shuffling,
padding and checkpoints come from the shared reader machinery. Each sequence is decoded on the
pipeline's worker threads, seeking to the keyframe before its first frame.
"""

from __future__ import annotations

import concurrent.futures
import math
import os
import warnings

import numpy as np

from jaxdali.ops.readers import storage
from jaxdali.ops.readers.base import LOADER_ARGS, Reader, listing_fingerprint
from jaxdali.ops.readers.file import list_class_folders
from jaxdali.ops.readers.shared_listing import frozen, listing
from jaxdali.ops.schema import REQUIRED, Arg, OpArgumentError, OpSchema, register
from jaxdali.ops.video_codec import PAD_MODES, VideoIndex, decode_frames, index_video, padded_indices, pyav
from jaxdali.tensors import TensorListCPU
from jaxdali.types import DALIDataType, DALIImageType

__all__ = ["sequence_starts", "uniform_frames", "VIDEO_READER", "EXPERIMENTAL_VIDEO_READER"]


def sequence_starts(begin: int, end: int, length: int, step: int, stride: int, pad: bool, legacy: bool) -> np.ndarray:
    """First frames of the sequences taken from frames ``[begin, end)`` of one file.

    ``fn.experimental.readers.video`` (as DALI 2.4 counts): starts ``begin, begin + step, ...`` whose
    sequence reaches ``length * stride`` frames within the range; with padding, one more start if it
    is still inside the range. ``fn.readers.video``: starts whose last frame,
    ``start + (length - 1) * stride``, is inside the range; with ``pad_sequences``, every start inside it.
    """
    span = (length - 1) * stride + 1 if legacy else length * stride
    full = max(0, (end - span - begin) // step + 1) if end - begin >= span else 0
    if pad:
        count = math.ceil((end - begin) / step) if legacy else full + (begin + full * step < end)
    else:
        count = full
    return begin + step * np.arange(max(count, 0), dtype=np.int64)


def uniform_frames(begin: int, end: int, length: int) -> np.ndarray:
    """``length`` frames spread evenly over ``[begin, end)``, rounded half away from zero (DALI's
    ``uniform_sample``)."""
    return np.floor(np.linspace(begin, end - 1, length) + 0.5).astype(np.int64)


def _frame_number_mode(value) -> str:
    if value is None or value is False or value == "none":
        return "none"
    if value is True or value == "scalar":
        return "scalar"
    if value == "sequence":
        return "sequence"
    raise OpArgumentError(f"argument 'enable_frame_num' must be 'none', 'scalar', 'sequence' or a boolean, got {value!r}")


def _has_labels(args) -> bool:
    return bool(args.get("file_root")) or bool(args.get("file_list")) or args.get("labels") is not None


def _num_outputs(args) -> int:
    return (1 + _has_labels(args) + (_frame_number_mode(args.get("enable_frame_num")) != "none")
            + bool(args.get("enable_timestamps")))


class VideoReader(Reader):
    """Both video readers; ``legacy`` selects ``fn.readers.video``'s arguments and sequence counting."""

    legacy = False

    def __init__(self, node, build):
        super().__init__(node, build)
        a = self.args
        self.op = f"fn.{node.schema.name}"
        pyav()
        self.length, self.stride = int(a["sequence_length"]), int(a["stride"])
        self.step = int(a["step"]) if a["step"] > 0 else self.length
        self.frame_numbers = _frame_number_mode(a["enable_frame_num"])
        self.timestamps = bool(a["enable_timestamps"])
        image_type = DALIImageType(a["image_type"])
        if image_type not in (DALIImageType.RGB, DALIImageType.YCbCr):
            raise OpArgumentError(f"{self.op}: argument 'image_type' must be RGB or YCbCr, got {image_type!r}")
        self.image_type = "rgb" if image_type == DALIImageType.RGB else "ycbcr"
        if self.legacy:
            self.pad_mode = "constant" if a["pad_sequences"] else "none"
            self.fill_value = np.zeros(3, np.uint8)
            self.uniform = False
            if a["channels"] != 3:
                raise OpArgumentError(f"{self.op}: argument 'channels' must be 3, got {a['channels']}")
            dtype = DALIDataType(a["dtype"])
            if dtype not in (DALIDataType.UINT8, DALIDataType.FLOAT):
                raise OpArgumentError(f"{self.op}: argument 'dtype' must be UINT8 or FLOAT, got {dtype!r}")
            self.float_output, self.normalized = dtype == DALIDataType.FLOAT, bool(a["normalized"])
        else:
            if a["pad_mode"] not in PAD_MODES:
                raise OpArgumentError(f"{self.op}: argument 'pad_mode' must be one of {sorted(PAD_MODES)}, "
                                      f"got {a['pad_mode']!r}")
            self.pad_mode = a["pad_mode"]
            self.fill_value = _fill_value(self.op, a["fill_value"])
            self.uniform = bool(a["uniform_sample"])
            self.float_output = self.normalized = False
        key = (self.op, self._ranges_as_frames()) + tuple(frozen(a[n]) for n in ("file_root", "file_list",
                                                                                   "filenames", "labels"))
        self.paths, self.labels, ranges, self.indexes = listing(key, self._list_videos)
        self._enumerate(ranges)
        self.listing = listing_fingerprint([f"{self.paths[f]}@{s}" for f, s in zip(self.seq_file, self.seq_start)],
                                           self.labels[self.seq_file])
        self.listing_source = "its video files"
        self._init_sampling()

    # -- listing ---------------------------------------------------------------------------------------
    def _ranges_as_frames(self) -> bool:
        """Whether the ranges of ``file_list`` are frame numbers (else seconds)."""
        a = self.args
        return bool(a["file_list_frame_num"]) if self.legacy else a["file_list_format"] == "frames"

    def _list_videos(self) -> tuple[list[str], np.ndarray, list[tuple], list[VideoIndex]]:
        """Paths, labels, ranges (see ``_listing``) and indexes of the videos, with read-only arrays: a function
        of the listing arguments, shared by the readers of one iterator's pipelines."""
        paths, labels, ranges = self._listing()
        labels = np.asarray(labels, np.int32).reshape(-1, 1)
        indexes = self._index_all(paths)
        for array in [labels] + [a for index in indexes for a in (index.pts, index.keyframes)]:
            array.flags.writeable = False
        return paths, labels, ranges, indexes

    def _listing(self) -> tuple[list[str], list[int], list[tuple]]:
        """Paths, labels and per-file (start, end, bounds_are_frames) ranges (None: the whole file)."""
        a = self.args
        root, file_list, filenames, labels = a["file_root"] or None, a["file_list"] or None, a["filenames"], a["labels"]
        given = [n for n, v in (("file_root", root), ("file_list", file_list), ("filenames", filenames)) if v]
        if len(given) != 1:
            raise OpArgumentError(f"{self.op}: give exactly one of 'file_root', 'file_list' or 'filenames'"
                                  + (f" (got {', '.join(given)})" if given else ""))
        if labels is not None and not filenames:
            raise OpArgumentError(f"{self.op}: 'labels' can only be used together with 'filenames'")
        if file_list:
            paths, label_list, bounds = _parse_file_list(self.op, file_list)
            as_frames = self._ranges_as_frames()
            return paths, label_list, [None if b is None else (*b, as_frames) for b in bounds]
        if filenames:
            filenames = list(filenames)
            if labels is not None and len(labels) != len(filenames):
                raise OpArgumentError(f"{self.op}: 'filenames' has {len(filenames)} entries but 'labels' has "
                                      f"{len(labels)}")
            label_list = list(labels) if labels is not None else [0] * len(filenames)
            return filenames, label_list, [None] * len(filenames)
        if not storage.isdir(root):
            raise FileNotFoundError(f"{self.op}: file_root {root!r} is not a directory")
        names, label_list = list_class_folders(root, ("*",))
        if not names:
            raise RuntimeError(f"{self.op}: no files found in the class folders of {root!r}")
        return [storage.join(root, n) for n in names], label_list, [None] * len(names)

    def _index_all(self, paths: list[str]) -> list[VideoIndex]:
        for p in paths:
            if not storage.isfile(p):
                raise FileNotFoundError(f"{self.op}: video file {p!r} does not exist")
        workers = max(1, min(self.build_ctx.num_threads, len(paths)))
        with concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="jaxdali-video-index") as pool:
            return list(pool.map(lambda p: index_video(p, f"{self.op}: {p!r}"), paths))

    def _frame_range(self, index: VideoIndex, spec) -> tuple[int, int]:
        n = index.num_frames
        if spec is None:
            return 0, n
        start, end, as_frames = spec
        a = self.args
        if as_frames:
            begin = _round(start, "up" if self.legacy else _rounding(a, 0))
            stop = None if end is None else _round(end, "down" if self.legacy else _rounding(a, 1))
            begin = begin + n if begin < 0 else begin
            if stop is not None:
                stop = stop + n if stop < 0 else stop
        else:
            fps = index.fps
            if self.legacy:
                preceding = bool(a["file_list_include_preceding_frame"])
                begin = _round(start * fps, "down" if preceding else "up")
                stop = None if end is None else _round(end * fps, "up" if preceding else "down")
            else:
                begin = _round(start * fps, _rounding(a, 0))
                stop = None if end is None else _round(end * fps, _rounding(a, 1))
        stop = n if stop is None or stop == 0 else min(stop, n)
        begin = max(0, min(begin, n))
        return begin, max(begin, stop)

    def _enumerate(self, ranges: list) -> None:
        files, starts, ends = [], [], []
        for f, (index, spec) in enumerate(zip(self.indexes, ranges)):
            begin, end = self._frame_range(index, spec)
            if end <= begin:
                warnings.warn(f"{self.op}: empty frame range [{begin}, {end}) for {self.paths[f]!r}; skipping it",
                              stacklevel=2)
                continue
            if self.uniform:
                s = np.array([begin], np.int64)
            else:
                s = sequence_starts(begin, end, self.length, self.step, self.stride,
                                    self.pad_mode != "none", self.legacy)
            files.append(np.full(len(s), f, np.int32))
            starts.append(s)
            ends.append(np.full(len(s), end, np.int64))
        self.seq_file = np.concatenate(files) if files else np.zeros(0, np.int32)
        self.seq_start = np.concatenate(starts) if starts else np.zeros(0, np.int64)
        self.seq_end = np.concatenate(ends) if ends else np.zeros(0, np.int64)
        self.num_samples = len(self.seq_file)
        if not self.num_samples:
            raise RuntimeError(f"{self.op}: no sequence of {self.length} frames (stride {self.stride}) fits in any "
                               f"of the {len(self.paths)} files")

    # -- reading ---------------------------------------------------------------------------------------
    def sequence_frames(self, sample: int) -> np.ndarray:
        """Display indices of the frames of sequence ``sample`` (-1 for constant padding)."""
        start, end = int(self.seq_start[sample]), int(self.seq_end[sample])
        if self.uniform:
            return uniform_frames(start, end, self.length)
        frames = start + self.stride * np.arange(self.length, dtype=np.int64)
        if self.pad_mode == "none":
            return frames
        return padded_indices(frames, end, self.pad_mode)

    def load(self, ctx, indices):
        n = len(indices)
        frames = [self.sequence_frames(int(i)) for i in indices]
        shapes = {(self.indexes[self.seq_file[i]].height, self.indexes[self.seq_file[i]].width) for i in indices}
        dense = len(shapes) == 1
        if dense:
            (h, w), = shapes
            video = np.empty((n, self.length, h, w, 3), np.uint8)
            outs = list(video)
        else:
            outs = [None] * n
        paths, files = self.paths, self.seq_file

        def decode(start: int, stop: int) -> None:
            for k in range(start, stop):
                f = int(files[indices[k]])
                index = self.indexes[f]
                if outs[k] is None:
                    outs[k] = np.empty((self.length, index.height, index.width, 3), np.uint8)
                decode_frames(paths[f], index, frames[k], outs[k], f"{self.op}: {paths[f]!r}", self.image_type,
                              self.fill_value)

        ctx.parallel_for(decode, n)
        video_out = video if dense else outs
        if self.float_output:
            scale = np.float32(1 / 255) if self.normalized else np.float32(1)
            video_out = np.multiply(video_out, scale, dtype=np.float32) if dense else [
                np.multiply(o, scale, dtype=np.float32) for o in outs]
        sources = [paths[files[i]] for i in indices]
        results = [TensorListCPU(video_out, "FHWC", source_info=sources)]
        if _has_labels(self.args):
            results.append(TensorListCPU(self.labels[files[indices]]))
        if self.frame_numbers == "scalar":
            results.append(TensorListCPU(np.stack([f[:1] for f in frames]).astype(np.int32)))
        elif self.frame_numbers == "sequence":
            results.append(TensorListCPU(np.stack(frames).astype(np.int32)))
        if self.timestamps:
            results.append(TensorListCPU(np.stack([self.indexes[files[i]].timestamps(f)
                                                   for i, f in zip(indices, frames)])))
        return results


class LegacyVideoReader(VideoReader):
    legacy = True


def _fill_value(op: str, values) -> np.ndarray:
    fill = np.asarray(values, np.int64).reshape(-1)
    if fill.size not in (1, 3) or (fill < 0).any() or (fill > 255).any():
        raise OpArgumentError(f"{op}: argument 'fill_value' must be one value or one per channel (3), each in "
                              f"[0, 255], got {list(values)}")
    return np.broadcast_to(fill, (3,)).astype(np.uint8)


_ROUNDINGS = {"start_down_end_up": ("down", "up"), "start_up_end_down": ("up", "down"), "all_up": ("up", "up"),
              "all_down": ("down", "down")}


def _rounding(args, which: int) -> str:
    return _ROUNDINGS[args["file_list_rounding"]][which]


def _round(value: float, direction: str) -> int:
    return int(math.floor(value) if direction == "down" else math.ceil(value))


def _parse_file_list(op: str, path: str) -> tuple[list[str], list[int], list[tuple]]:
    """``file label [start [end]]`` lines. A relative file is taken from the working directory, as DALI
    does, or else from the list's folder."""
    base = storage.dirname(path)
    paths, labels, ranges = [], [], []
    for lineno, line in enumerate(storage.read_file(path).decode("utf-8").splitlines(), 1):
        parts = line.split()
        if not parts:
            continue
        try:
            if not 2 <= len(parts) <= 4:
                raise ValueError
            label = int(parts[1])
            bounds = [float(x) for x in parts[2:]]
        except ValueError:
            raise ValueError(f"{op}: line {lineno} of file_list {path!r} is not 'file label [start [end]]': "
                             f"{line.rstrip()!r}") from None
        name = parts[0]
        as_written = storage.is_remote(name) or os.path.isabs(name) or os.path.exists(name)
        paths.append(name if as_written else storage.join(base, name))
        labels.append(label)
        ranges.append(None if not bounds else (bounds[0], bounds[1] if len(bounds) > 1 else None))
    if not paths:
        raise RuntimeError(f"{op}: file_list {path!r} lists no files")
    return paths, labels, ranges


# -- schemas ----------------------------------------------------------------------------------------

_COMMON_ARGS = (
    Arg("filenames", "strs", None, "Paths of the video files (mutually exclusive with file_root and file_list)."),
    Arg("labels", "ints", None, "A label per file of 'filenames' (no label output when not given)."),
    Arg("file_root", "str", None, "Folder of class sub-folders of videos (sorted; label = folder index)."),
    Arg("file_list", "str", None, "Text file of 'file label [start [end]]' lines; a relative file is taken "
        "from the working directory, or else from the list's folder."),
    Arg("sequence_length", "int", REQUIRED, "Frames per sequence.", min=1),
    Arg("step", "int", -1, "Frames between the starts of consecutive sequences (<= 0: sequence_length)."),
    Arg("stride", "int", 1, "Distance between consecutive frames of a sequence.", min=1),
    Arg("enable_frame_num", "any", "none",
        "Extra output of frame numbers: 'none'/False, 'scalar'/True (the first frame, shape (1,)) or 'sequence' "
        "(every frame, -1 for constant padding)."),
    Arg("enable_timestamps", "bool", False, "Extra output: each frame's time in seconds (-1 for constant padding)."),
    Arg("image_type", "image_type", DALIImageType.RGB, "Colour space of the frames: RGB or YCbCr."),
    Arg("skip_vfr_check", "bool", False, "Accepted: frames are found by their timestamps, so variable frame "
        "rate videos are read correctly and no check is needed.", hint=True),
)

_LEGACY_ARGS = (
    Arg("pad_sequences", "bool", False, "Also take the sequences that run past the end of a file, their missing "
        "frames zero (frame number and timestamp -1)."),
    Arg("file_list_frame_num", "bool", False, "file_list bounds are frame numbers (start rounded up, end down), "
        "not seconds."),
    Arg("file_list_include_preceding_frame", "bool", False,
        "Seconds in file_list become frames as floor(start * fps) and ceil(end * fps) instead of ceil and floor."),
    Arg("channels", "int", 3, "Channels of the frames (3)."),
    Arg("dtype", "dtype", DALIDataType.UINT8, "Output type: UINT8 or FLOAT."),
    Arg("normalized", "bool", False, "With dtype=FLOAT, scale values to [0, 1]."),
    Arg("additional_decode_surfaces", "int", 2, "NVDEC decode surfaces.", hint=True),
)

_EXPERIMENTAL_ARGS = (
    Arg("pad_mode", "str", "none", "Sequences past the end of a file: 'none' (not taken), 'constant' "
        "(fill_value frames), 'edge'/'repeat' (the last frame), 'reflect_101'/'reflect' (ABC -> ABCBA) or "
        "'reflect_1001'/'symmetric' (ABC -> ABCCBA); padding adds at most one sequence per file."),
    Arg("fill_value", "ints", (0,), "Padding value for pad_mode='constant': one value, or one per channel."),
    Arg("file_list_format", "str", "timestamps", "file_list bounds are 'timestamps' (seconds) or 'frames' "
        "(0-based; negative counts from the end).", choices=("timestamps", "frames")),
    Arg("file_list_include_end", "bool", True, "Accepted; sequences are counted as DALI 2.4 counts them, where this "
        "flag changes no sequence (measured).", hint=True),
    Arg("file_list_rounding", "str", "start_down_end_up", "Rounding of file_list bounds to frames.",
        choices=tuple(_ROUNDINGS)),
    Arg("uniform_sample", "bool", False, "One sequence per file: sequence_length frames spread evenly over it "
        "(frames repeat when the file is shorter); step, stride and pad_mode are ignored."),
)

_READER_DOC = (
    "Reads sequences of frames from video files and decodes them on the CPU with FFmpeg (PyAV; install "
    "jaxdali[video]), any codec FFmpeg decodes (H.264, H.265, VP8, VP9, AV1, MPEG-4, MJPEG, ...). Outputs: "
    "video (F, H, W, C) per sample, layout FHWC; then labels (int32, (1,)) when given by labels, file_root or "
    "file_list; frame numbers (enable_frame_num); timestamps in seconds (float64, enable_timestamps). The "
    "samples are the sequences of all files (the epoch size counts sequences), sharded and shuffled like "
    "files in fn.readers.file. Frames are converted to RGB as DALI's CPU video decoder does (bit-exact). ")

EXPERIMENTAL_VIDEO_READER = register(OpSchema(
    name="experimental.readers.video", impl=VideoReader, devices=("cpu", "gpu"), min_inputs=0, max_inputs=0,
    num_outputs=_num_outputs, is_source=True,
    doc=_READER_DOC + "device='gpu' decodes on the host and places the frames on the pipeline's JAX device.",
    args=_COMMON_ARGS + _EXPERIMENTAL_ARGS + LOADER_ARGS))

VIDEO_READER = register(OpSchema(
    name="readers.video", impl=LegacyVideoReader, devices=("cpu", "gpu"), min_inputs=0, max_inputs=0,
    num_outputs=_num_outputs, is_source=True,
    doc=_READER_DOC + "DALI's legacy reader decodes on the GPU only; here device='cpu' works too, and "
        "device='gpu' decodes on the host and places the frames on the pipeline's JAX device. Sequences are "
        "counted as DALI's legacy reader does: a sequence is taken when its last frame is in the file.",
    args=_COMMON_ARGS + _LEGACY_ARGS + LOADER_ARGS))
