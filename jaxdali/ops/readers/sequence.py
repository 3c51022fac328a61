"""``fn.readers.sequence``: sequences of frames from folders of image files, one folder per stream.

Streams are the sub-folders of ``file_root`` (sorted by name), frames their image files (sorted by
name). Sequence ``k`` of a stream starts at frame ``k * step`` and takes ``sequence_length`` frames
``stride`` apart; only sequences that fit inside their stream are listed, so a batch never pads
and never crosses streams. A batch's frames are read and decoded on the worker pool (the decoders
release the GIL) and stacked per sequence into ``FHWC`` arrays.
"""

from __future__ import annotations

import numpy as np

from jaxdali.ops.decoders import decode_image
from jaxdali.ops.readers import storage
from jaxdali.ops.readers.base import LOADER_ARGS, Reader, listing_fingerprint
from jaxdali.ops.readers.file import DEFAULT_FILE_FILTERS, list_class_folders
from jaxdali.ops.readers.shared_listing import listing
from jaxdali.ops.schema import REQUIRED, Arg, OpSchema, register
from jaxdali.tensors import TensorListCPU
from jaxdali.types import DALIImageType

__all__ = ["SEQUENCE_READER"]

_OP = "fn.readers.sequence"
#: The image files a stream folder's frames are taken from (other files are ignored, as in DALI).
FRAME_FILTERS = tuple(f for f in DEFAULT_FILE_FILTERS if f not in ("*.flac", "*.ogg", "*.wav"))


def _list_sequences(root: str, length: int, step: int, stride: int) -> tuple:
    """(frame paths, first frame of each sequence, its stream, listing fingerprint) of the stream folders of
    ``root``; the arrays are read-only (shared by the readers of one iterator's pipelines)."""
    if not storage.isdir(root):
        raise FileNotFoundError(f"{_OP}: file_root {root!r} is not a directory")
    names, streams = list_class_folders(root, FRAME_FILTERS)
    prefix = storage.join(root, "")
    paths = [prefix + n for n in names]
    streams = np.asarray(streams, np.int64)
    stream_ids, first_frame, frame_counts = np.unique(streams, return_index=True, return_counts=True)
    span = (length - 1) * stride + 1
    counts = np.maximum(0, (frame_counts - span) // step + 1)
    if not counts.sum():
        raise RuntimeError(f"{_OP}: no stream of file_root {root!r} has the {span} frames a sequence of "
                           f"sequence_length={length} with stride={stride} needs (streams: {len(stream_ids)}, "
                           f"most frames in one: {int(frame_counts.max()) if len(frame_counts) else 0})")
    first = np.concatenate([f + np.arange(c) * step for f, c in zip(first_frame, counts)]).astype(np.int64)
    stream = np.repeat(stream_ids, counts)
    first.flags.writeable = stream.flags.writeable = False
    return paths, first, stream, listing_fingerprint(names, streams)


class SequenceReader(Reader):
    def __init__(self, node, build):
        super().__init__(node, build)
        a = self.args
        root, length, step, stride = a["file_root"], a["sequence_length"], a["step"], a["stride"]
        # Per sequence: the index (in self.paths) of its first frame, and its stream.
        self.paths, self.first, self.stream, self.listing = listing(
            ("readers.sequence", root, length, step, stride), lambda: _list_sequences(root, length, step, stride))
        self.frame_offsets = np.arange(length, dtype=np.int64) * stride
        self.image_type = DALIImageType(a["image_type"])
        self.num_samples = len(self.first)
        self.listing_source = f"the stream folders of file_root {root!r}"
        self._init_sampling()

    def load(self, ctx, indices):
        frames = (self.first[indices][:, None] + self.frame_offsets).ravel().tolist()
        images: list = [None] * len(frames)
        paths, image_type = self.paths, self.image_type

        def work(lo: int, hi: int) -> None:
            for k in range(lo, hi):
                path = paths[frames[k]]
                try:
                    images[k] = decode_image(storage.read_file(path), image_type, path)
                except Exception as e:
                    e.add_note(f"{_OP}: reading frame {path!r}")
                    raise

        ctx.parallel_for(work, len(frames))
        length = len(self.frame_offsets)
        out = []
        for i in range(len(indices)):
            seq = images[i * length:(i + 1) * length]
            shapes = {f.shape for f in seq}
            if len(shapes) > 1:
                raise ValueError(f"{_OP}: the frames of a sequence must have one shape; frames "
                                 f"{[paths[f] for f in frames[i * length:(i + 1) * length]]} have shapes "
                                 f"{[list(f.shape) for f in seq]}")
            out.append(np.stack(seq))
        sources = [paths[f] for f in frames[::length]]
        return TensorListCPU(out, "FHWC", sources)


SEQUENCE_READER = register(OpSchema(
    name="readers.sequence", impl=SequenceReader, min_inputs=0, max_inputs=0, num_outputs=1, is_source=True,
    doc=("Reads sequences of frames from a folder of streams: each sub-folder of `file_root` is a stream whose "
         "image files (sorted by name) are its frames. Outputs each sequence decoded as uint8 `FHWC`. Sequences "
         "start every `step` frames, take `sequence_length` frames `stride` apart and never cross a stream (only "
         "whole sequences are listed). Deprecated in DALI, kept for porting. Each sample's source info is its "
         "first frame's path (DALI gives none)."),
    args=(
        Arg("file_root", "str", REQUIRED, "Folder whose sub-folders are the streams."),
        Arg("sequence_length", "int", REQUIRED, "Frames per sequence.", min=1),
        Arg("step", "int", 1, "Frames between the first frames of consecutive sequences.", min=1),
        Arg("stride", "int", 1, "Frames between consecutive frames of a sequence.", min=1),
        Arg("image_type", "image_type", DALIImageType.RGB, "Colour space of the output frames."),
    ) + LOADER_ARGS))
