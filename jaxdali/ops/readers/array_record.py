"""``fn.readers.array_record``: the records of ArrayRecord files (Grain's and TFDS's format), a jaxdali
addition (no DALI version reads them).

ArrayRecord files index every record, so the reader fetches any record directly: a shuffle is a
permutation of the whole data set and restoring a checkpoint costs nothing. The files are read
through the storage layer (local paths memory-mapped, fsspec URLs by range requests) and decoded
here, a batch at a time: the chunks its records sit in are located with each file's index
(``array_record_format``), read in few requests (``ranges``) and decoded together
(``riegeli_format``: zstd without the GIL, spread over the worker threads). Chunks holding several
records are cached, so the neighbours of a record decompress once. Chunks not decoded here
(transposed, snappy) are read by the ``array-record`` package, for local files.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from jaxdali.ops.readers import ranges, storage
from jaxdali.ops.readers.array_record_format import read_index
from jaxdali.ops.readers.base import LOADER_ARGS, Reader, records_fingerprint
from jaxdali.ops.readers.riegeli_format import (CHUNK_HEADER_SIZE, FormatError, UnsupportedChunk, decode_simple,
                                                decode_simple_batch, physical_size, read_chunk)
from jaxdali.ops.readers.shared_listing import frozen, listing
from jaxdali.ops.schema import REQUIRED, Arg, OpSchema, register
from jaxdali.tensors import TensorListCPU

__all__ = ["ARRAY_RECORD_READER"]

# The library's random-access setting for the chunks it reads: no read-ahead buffer and no thread pool
# of its own (its hand-offs cost more than decoding a chunk in the calling thread).
_READER_OPTIONS = "readahead_buffer_size:0,max_parallelism:0"
#: Decoded bytes of multi-record chunks a reader keeps, so that a chunk's records decode once.
CACHE_BYTES = 64 << 20
# Bytes a compressed chunk may take beyond its records' decoded size (codec framing, size table).
_SLACK = 64


def _open_library(op: str, path: str):
    """The array-record library's reader of ``path``, for the chunks not decoded here."""
    try:
        from array_record.python.array_record_module import ArrayRecordReader
    except ImportError:
        raise ImportError(f"fn.{op}: {path!r} holds chunks only the 'array-record' package decodes (transposed or "
                          "snappy-compressed): pip install 'jaxdali[array_record]'") from None
    storage.require_local(op, path, "it holds chunks (transposed or snappy-compressed) that only the array-record "
                          "package decodes, and it opens local paths only")
    try:
        return ArrayRecordReader(path, _READER_OPTIONS)
    except (RuntimeError, ValueError, OSError) as e:
        raise ValueError(f"fn.{op}: {path!r} is not a readable ArrayRecord file: {e}") from None


def _index(op: str, path: str):
    if not storage.isfile(path):
        raise FileNotFoundError(f"fn.{op}: ArrayRecord file {path!r} does not exist")
    try:
        return read_index(path)
    except UnsupportedChunk:
        return None  # a footer in an encoding only the library decodes: the whole file goes through it
    except FormatError as e:
        raise ValueError(f"fn.{op}: {path!r} is not a readable ArrayRecord file: {e}") from None


def _list_chunks(op: str, paths: list[str]) -> tuple:
    """(paths, chunk begin (-1: read by the library), records, decoded size, file and limit, first record of each
    chunk, first record of each file) of the ArrayRecord files ``paths``, as read-only arrays (shared by the
    readers of one iterator's pipelines). A file whose footer only the library decodes is one pseudo-chunk per
    record, counted with the library (the readers open it again when they read)."""
    if not paths:
        raise ValueError(f"fn.{op}: 'path' lists no file")
    begins, counts, decoded, files, limits = [], [], [], [], []
    for f, path in enumerate(paths):
        index = _index(op, path)
        if index is None:
            library = _open_library(op, path)
            try:
                n = library.num_records()
            finally:
                library.close()
            # One pseudo-chunk per record: every record of the file is read by the library.
            index = (np.full(n, -1), np.ones(n, np.int64), np.zeros(n, np.int64), 0)
        begins.append(index[0])
        counts.append(index[1])
        decoded.append(index[2])
        files.append(np.full(len(index[0]), f))
        limits.append(np.full(len(index[0]), index[3]))
    chunks = tuple(np.concatenate(a).astype(np.int64) for a in (begins, counts, decoded, files, limits))
    chunk_first = np.concatenate(([0], np.cumsum(chunks[1])))
    file_records = np.bincount(chunks[3], chunks[1], len(paths)).astype(np.int64)
    offsets = np.concatenate(([0], np.cumsum(file_records))).astype(np.int64)
    if not offsets[-1]:
        raise RuntimeError(f"fn.{op}: the ArrayRecord files {paths} hold no records")
    for array in chunks + (chunk_first, offsets):
        array.flags.writeable = False
    return (paths,) + chunks + (chunk_first, offsets)


class ArrayRecordReader(Reader):
    def __init__(self, node, build):
        super().__init__(node, build)
        op = self.op = node.schema.name
        paths = list(self.args["path"])
        (self.paths, self.chunk_begin, self.chunk_records, self.chunk_decoded, self.chunk_file, self.chunk_limit,
         self.chunk_first, self.offsets) = listing((op, frozen(paths)), lambda: _list_chunks(op, paths))
        #: The library's readers of the files it reads, opened when first needed.
        self._library: list = [None] * len(self.paths)
        self._library_lock = threading.Lock()
        self.num_samples = int(self.offsets[-1])
        self.listing = records_fingerprint(self.paths, self.offsets)
        self.listing_source = f"the records of {self.paths}"
        self._maps = ranges.map_local_files(self.paths, self.args["dont_use_mmap"])
        self._cache: OrderedDict = OrderedDict()  # chunk -> (values, record offsets); multi-record chunks only
        self._cached_bytes = 0
        self._init_sampling(self.args["shuffle_after_epoch"], self.args["shuffle_after_epoch_seed"])

    def load(self, ctx, indices):
        chunk = np.searchsorted(self.chunk_first, indices, side="right") - 1
        within = (indices - self.chunk_first[chunk]).tolist()
        needed, slot = np.unique(chunk, return_inverse=True)
        values, offsets = self._chunks(ctx, needed)
        records = []
        for k, w in zip(slot.tolist(), within):
            o = offsets[k]
            records.append(values[k] if o is None else values[k][o[w]:o[w + 1]])
        file_of = self.chunk_file[chunk]
        infos = [f"{self.paths[f]} at record {r}"
                 for f, r in zip(file_of.tolist(), (indices - self.offsets[file_of]).tolist())]
        return TensorListCPU(records, source_info=infos)

    def _chunks(self, ctx, needed: np.ndarray) -> tuple[list, list]:
        """Each chunk's decoded values (uint8) and its records' offsets in them (None: one record)."""
        n = len(needed)
        values: list = [None] * n
        offsets: list = [None] * n
        missing = []
        for k, c in enumerate(needed.tolist()):
            hit = self._cache.get(c)
            if hit is None:
                missing.append(k)
            else:
                self._cache.move_to_end(c)
                values[k], offsets[k] = hit
        if not missing:
            return values, offsets
        rows = np.asarray(missing)
        missing_rows = rows.tolist()
        chunks = needed[rows]
        native = self.chunk_begin[chunks] >= 0
        done = np.zeros(len(rows), bool)
        if native.any():
            sel = np.flatnonzero(native)
            c = chunks[sel]
            begin = self.chunk_begin[c]
            want = CHUNK_HEADER_SIZE + self.chunk_decoded[c] + _SLACK + 10 * self.chunk_records[c]
            length = np.minimum(physical_size(begin, want), self.chunk_limit[c] - begin)
            blob, pos = ranges.read_ranges(self.paths, self.chunk_file[c], begin, length, ctx.parallel_for,
                                           f"fn.{self.op}", maps=self._maps)
            got = decode_simple_batch(np.frombuffer(blob, np.uint8), pos, begin, length, ctx.parallel_for)
            for i in np.flatnonzero(got.done).tolist():
                k = int(rows[sel[i]])
                values[k] = got.values[i]
                s = got.sizes[i]
                offsets[k] = None if s is None else np.concatenate(([0], np.cumsum(s))).tolist()
            done[sel[got.done]] = True
        alone = np.flatnonzero(~done)

        def decode_alone(lo: int, hi: int) -> None:
            for i in alone[lo:hi].tolist():
                values[missing_rows[i]], offsets[missing_rows[i]] = self._chunk_alone(int(chunks[i]))

        ctx.parallel_for(decode_alone, len(alone))
        for k in missing:
            if offsets[k] is not None:
                self._remember(int(needed[k]), values[k], offsets[k])
        return values, offsets

    def _chunk_alone(self, c: int) -> tuple[np.ndarray, list | None]:
        """One chunk read and decoded by itself (chunks crossing a block boundary, other codecs, the library's)."""
        f, begin = int(self.chunk_file[c]), int(self.chunk_begin[c])
        path = self.paths[f]
        first = int(self.chunk_first[c]) - int(self.offsets[f])
        count = int(self.chunk_records[c])
        if begin >= 0:
            data = self._maps[f] if self._maps is not None else None
            try:
                header, content = read_chunk(
                    (lambda o, n: bytes(data[o:o + n])) if data is not None else
                    (lambda o, n: storage.read_range(path, o, n)), begin)
                if header.num_records != count or header.decoded_size != self.chunk_decoded[c]:
                    raise FormatError(f"its header says {header.num_records} records of {header.decoded_size} bytes, "
                                      f"the footer {count} of {int(self.chunk_decoded[c])}")
                values, sizes = decode_simple(header, content)
                return np.frombuffer(values, np.uint8), (None if count == 1 else
                                                         np.concatenate(([0], np.cumsum(sizes))).tolist())
            except UnsupportedChunk:
                pass
            except FormatError as e:
                raise OSError(f"fn.{self.op}: {path!r}, records {first} to {first + count - 1} (the chunk at byte "
                              f"{begin}): {e}") from None
        with self._library_lock:  # chunks decode on several threads; the library's readers are used by one
            if self._library[f] is None:
                self._library[f] = _open_library(self.op, path)
            try:
                records = self._library[f].read(list(range(first, first + count)))
            except (RuntimeError, ValueError, OSError) as e:
                raise OSError(f"fn.{self.op}: reading records {first} to {first + count - 1} of {path!r}: "
                              f"{e}") from None
        sizes = np.fromiter(map(len, records), np.int64, count)
        return np.frombuffer(b"".join(records), np.uint8), (None if count == 1 else
                                                           np.concatenate(([0], np.cumsum(sizes))).tolist())

    def _remember(self, c: int, values: np.ndarray, offsets: list) -> None:
        self._cache[c] = (values, offsets)
        self._cached_bytes += len(values)
        while self._cached_bytes > CACHE_BYTES and len(self._cache) > 1:
            _, (old, _) = self._cache.popitem(last=False)
            self._cached_bytes -= len(old)

    def close(self) -> None:
        for f in self._library:
            if f is not None:
                f.close()
        self._library = []
        self._cache.clear()


ARRAY_RECORD_READER = register(OpSchema(
    name="readers.array_record", impl=ArrayRecordReader, min_inputs=0, max_inputs=0, num_outputs=1,
    is_source=True,
    doc=("Reads the records of ArrayRecord files (the format of Grain and TensorFlow Datasets), in file order "
         "and then record order, as raw bytes (1-D uint8): pass them to a decoder when they hold encoded "
         "images, or parse them yourself. Every record is read directly, so ``random_shuffle`` and "
         "``shuffle_after_epoch`` shuffle the whole data set and checkpoints restore in O(1). Local files and "
         "fsspec URLs; the chunks of a batch are decoded together, on the worker threads. Not in DALI."),
    args=(
        Arg("path", "strs", REQUIRED, "ArrayRecord files, read one after the other."),
        Arg("shuffle_after_epoch", "bool", False,
            "Reshuffle the whole data set every epoch, identically on all shards (implies stick_to_shard)."),
        Arg("shuffle_after_epoch_seed", "int", None, "Base seed of the shuffle_after_epoch orders."),
    ) + LOADER_ARGS))
