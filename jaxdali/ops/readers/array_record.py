"""``fn.readers.array_record``: the records of ArrayRecord files (Grain's and TFDS's format), a jaxdali
addition (no DALI version reads them).

ArrayRecord files index every record, so the reader fetches any record directly: a shuffle is a
permutation of the whole data set, each batch is one parallel ``read`` per file, and restoring a
checkpoint costs nothing. Files are opened from local paths by the ``array-record`` package.
"""

from __future__ import annotations

import os

import numpy as np

from jaxdali.ops.readers import storage
from jaxdali.ops.readers.base import LOADER_ARGS, Reader
from jaxdali.ops.schema import REQUIRED, Arg, OpSchema, register
from jaxdali.tensors import TensorListCPU

__all__ = ["ARRAY_RECORD_READER"]

# The library's random-access setting: no read-ahead buffer (each batch asks for exactly the records it
# needs) and no thread pool of its own (its hand-offs cost more than decoding a batch's small records in
# the calling thread, and the pipeline's worker threads are busy with the other operators).
_READER_OPTIONS = "readahead_buffer_size:0,max_parallelism:0"


def _open(op: str, path: str):
    try:
        from array_record.python.array_record_module import ArrayRecordReader
    except ImportError:
        raise ImportError(f"fn.{op} needs the 'array-record' package: pip install 'jaxdali[array_record]'") from None
    storage.require_local(op, path, "ArrayRecord files are read by the array-record package's own C++ file "
                          "layer, which opens local paths only (see docs/readers/array_record.md)")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"fn.{op}: ArrayRecord file {path!r} does not exist")
    try:
        reader = ArrayRecordReader(path, _READER_OPTIONS)
    except (RuntimeError, ValueError, OSError) as e:
        raise ValueError(f"fn.{op}: {path!r} is not a readable ArrayRecord file: {e}") from None
    if not reader.ok():
        try:
            reader.close()  # raises the reader's failure
            why = "bad or truncated footer"
        except RuntimeError as e:
            why = str(e)
        raise ValueError(f"fn.{op}: {path!r} is not a readable ArrayRecord file: {why}")
    return reader


class ArrayRecordReader(Reader):
    def __init__(self, node, build):
        super().__init__(node, build)
        op = node.schema.name
        self.paths = list(self.args["path"])
        if not self.paths:
            raise ValueError(f"fn.{op}: 'path' lists no file")
        self.files = [_open(op, p) for p in self.paths]
        counts = [f.num_records() for f in self.files]
        self.offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
        self.num_samples = int(self.offsets[-1])
        if not self.num_samples:
            raise RuntimeError(f"fn.{op}: the ArrayRecord files {self.paths} hold no records")
        self._init_sampling(self.args["shuffle_after_epoch"], self.args["shuffle_after_epoch_seed"])

    def load(self, ctx, indices):
        file_of = np.searchsorted(self.offsets, indices, side="right") - 1
        local = indices - self.offsets[file_of]
        records: list = [None] * len(indices)
        for f in np.unique(file_of).tolist():
            where = np.flatnonzero(file_of == f)
            try:
                values = self.files[f].read(local[where].tolist())
            except (RuntimeError, ValueError, OSError) as e:
                raise OSError(f"fn.{self.node.schema.name}: reading records {local[where].tolist()} of "
                              f"{self.paths[f]!r}: {e}") from None
            for i, value in zip(where.tolist(), values):
                records[i] = np.frombuffer(value, dtype=np.uint8)
        infos = [f"{self.paths[f]} at record {r}" for f, r in zip(file_of.tolist(), local.tolist())]
        return TensorListCPU(records, source_info=infos)

    def close(self) -> None:
        for f in self.files:
            f.close()
        self.files = []


ARRAY_RECORD_READER = register(OpSchema(
    name="readers.array_record", impl=ArrayRecordReader, min_inputs=0, max_inputs=0, num_outputs=1,
    is_source=True,
    doc=("Reads the records of ArrayRecord files (the format of Grain and TensorFlow Datasets), in file order "
         "and then record order, as raw bytes (1-D uint8): pass them to a decoder when they hold encoded "
         "images, or parse them yourself. Every record is read directly, so ``random_shuffle`` and "
         "``shuffle_after_epoch`` shuffle the whole data set and checkpoints restore in O(1). Not in DALI."),
    args=(
        Arg("path", "strs", REQUIRED, "ArrayRecord files, read one after the other."),
        Arg("shuffle_after_epoch", "bool", False,
            "Reshuffle the whole data set every epoch, identically on all shards (implies stick_to_shard)."),
        Arg("shuffle_after_epoch_seed", "int", None, "Base seed of the shuffle_after_epoch orders."),
    ) + LOADER_ARGS))
