"""``fn.readers.mxnet``: encoded images and float labels from MXNet RecordIO files (``.rec`` + ``.idx``).

The index lists every record's offset once; local files are memory-mapped (unless ``dont_use_mmap``,
as in DALI), other batches are read with a few coalesced range requests (``ranges.read_ranges``);
either way a batch is parsed with vectorised gathers: frame headers, IRHeaders and labels
of the whole batch at once, with a per-record path only for records split over several frames or
carrying several labels. See ``recordio_format`` for the format.
"""

from __future__ import annotations

import numpy as np

from jaxdali.ops.readers import recordio_format as fmt
from jaxdali.ops.readers import storage
from jaxdali.ops.readers.base import LOADER_ARGS, Reader, records_fingerprint
from jaxdali.ops.readers.ranges import map_local_files, read_ranges
from jaxdali.ops.readers.shared_listing import frozen, listing
from jaxdali.ops.schema import REQUIRED, Arg, OpArgumentError, OpSchema, register
from jaxdali.tensors import TensorListCPU

__all__ = ["MXNET_READER"]

_OP = "fn.readers.mxnet"
_LENGTH_MASK = (1 << 29) - 1


def _words(buf: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The little-endian uint32 at each byte position ``at`` of ``buf``."""
    return buf[at[:, None] + np.arange(4)].view("<u4").ravel()


def _list_records(paths: list[str], index_paths: list[str]) -> tuple:
    """(file of each record, its offset in the file, its size, listing fingerprint, where) of the RecordIO
    files ``paths`` through the index ``index_paths[0]``; the arrays are read-only (shared by the readers
    of one iterator's pipelines)."""
    if not paths:
        raise OpArgumentError(f"{_OP}: 'path' lists no RecordIO file")
    if len(index_paths) != 1:
        raise OpArgumentError(f"{_OP}: 'index_path' must list exactly one index file (for all of 'path'), got "
                              f"{len(index_paths)}")
    for p in paths:
        if not storage.isfile(p):
            raise FileNotFoundError(f"{_OP}: RecordIO file {p!r} does not exist")
    index_path = index_paths[0]
    if not storage.isfile(index_path):
        raise FileNotFoundError(f"{_OP}: index file {index_path!r} does not exist (MXNet's im2rec.py writes it "
                                f"with the .rec file)")
    offsets = fmt.parse_index(storage.read_file(index_path), f"{_OP}: index {index_path!r}")
    if not len(offsets):
        raise RuntimeError(f"{_OP}: index {index_path!r} lists no record")
    file_sizes = np.array([storage.file_size(p) for p in paths], np.int64)
    file_start = np.concatenate(([0], np.cumsum(file_sizes)))
    if offsets[-1] >= file_start[-1]:
        raise fmt.RecordIOError(f"{_OP}: index {index_path!r} lists offset {int(offsets[-1])}, past the end of "
                                f"the RecordIO files ({int(file_start[-1])} bytes in all): the index is stale "
                                f"or belongs to other files")
    file_id = np.searchsorted(file_start, offsets, side="right") - 1
    # A record ends where the next one starts, or at the end of its file.
    ends = np.minimum(np.append(offsets[1:], file_start[-1]), file_start[file_id + 1])
    in_file, sizes = offsets - file_start[file_id], ends - offsets
    for array in (file_id, in_file, sizes):
        array.flags.writeable = False
    return file_id, in_file, sizes, records_fingerprint(paths, offsets), f"index {index_path!r} of {paths}"


class MXNetReader(Reader):
    """Records in offset order over the ``.rec`` files taken one after the other, as DALI numbers them."""

    def __init__(self, node, build):
        super().__init__(node, build)
        a = self.args
        self.paths = list(a["path"])
        key = ("readers.mxnet", frozen(a["path"]), frozen(a["index_path"]))
        self.file_id, self.offsets, self.sizes, self.listing, self.listing_source = listing(
            key, lambda: _list_records(self.paths, list(a["index_path"])))
        #: The files memory-mapped (as DALI reads them unless dont_use_mmap): a batch is then views of the
        #: page cache, without a read call. None for remote files or with dont_use_mmap.
        self._maps = map_local_files(self.paths, a["dont_use_mmap"])
        self.num_samples = len(self.offsets)
        self._init_sampling(a["shuffle_after_epoch"], a["shuffle_after_epoch_seed"])

    def _where(self, index: int) -> str:
        return f"{_OP}: record at offset {int(self.offsets[index])} of {self.paths[self.file_id[index]]!r}"

    def load(self, ctx, indices):
        n = len(indices)
        sizes = self.sizes[indices]
        short = np.flatnonzero(sizes < 8 + fmt.IR_HEADER_SIZE)
        if len(short):
            i = int(short[0])
            raise fmt.RecordIOError(f"{self._where(indices[i])}: only {int(sizes[i])} bytes until the next record or "
                                    f"the end of the file; a record holds at least {8 + fmt.IR_HEADER_SIZE}")
        file_ids = self.file_id[indices]
        blob, starts = read_ranges(self.paths, file_ids, self.offsets[indices], sizes, ctx.parallel_for, _OP,
                                   maps=self._maps)
        buf = np.frombuffer(blob, np.uint8)
        magic, word = _words(buf, starts), _words(buf, starts + 4)
        bad = np.flatnonzero(magic != fmt.MAGIC)
        if len(bad):
            raise fmt.RecordIOError(f"{self._where(indices[int(bad[0])])}: does not start with the RecordIO magic "
                                    f"word (a stale index or not a RecordIO file)")
        split = (word >> 29) != 0
        length = (word & _LENGTH_MASK).astype(np.int64)
        bad = np.flatnonzero(~split & ((length + 8 > sizes) | (length < fmt.IR_HEADER_SIZE)))
        if len(bad):
            i = int(bad[0])
            raise fmt.RecordIOError(f"{self._where(indices[i])}: its payload of {int(length[i])} bytes does not fit "
                                    f"the {int(sizes[i]) - 8} bytes before the next record, or is shorter than the "
                                    f"{fmt.IR_HEADER_SIZE}-byte image header")
        payload = starts + 8
        label_count = _words(buf, payload)
        images: list = [None] * n
        if not split.any() and not label_count.any():  # the common case: whole records, one label each
            labels = buf[(payload + 4)[:, None] + np.arange(4)].view("<f4")
            begin, end = (payload + fmt.IR_HEADER_SIZE).tolist(), (payload + length).tolist()
            images = [buf[b:e] for b, e in zip(begin, end)]
        else:
            labels = [None] * n
            for i in range(n):
                if split[i]:
                    record = np.frombuffer(fmt.join_parts(memoryview(buf)[starts[i]:starts[i] + sizes[i]],
                                                          self._where(indices[i])), np.uint8)
                else:
                    record = buf[payload[i]:payload[i] + length[i]]
                images[i], labels[i] = self._split_record(record, indices[i])
        info = [f"{self.paths[f]} at index {o}" for f, o in zip(file_ids.tolist(), self.offsets[indices].tolist())]
        return TensorListCPU(images, source_info=info), TensorListCPU(labels)

    def _split_record(self, record: np.ndarray, index: int) -> tuple[np.ndarray, np.ndarray]:
        """(image bytes, labels) of one record's payload."""
        if len(record) < fmt.IR_HEADER_SIZE:
            raise fmt.RecordIOError(f"{self._where(index)}: its payload of {len(record)} bytes is shorter than the "
                                    f"{fmt.IR_HEADER_SIZE}-byte image header")
        count = int(record[:4].view("<u4")[0])
        if count == 0:
            return record[fmt.IR_HEADER_SIZE:], record[4:8].view("<f4")
        stop = fmt.IR_HEADER_SIZE + 4 * count
        if stop > len(record):
            raise fmt.RecordIOError(f"{self._where(index)}: its header announces {count} labels, more than its "
                                    f"{len(record)}-byte payload holds")
        return record[stop:], record[fmt.IR_HEADER_SIZE:stop].view("<f4")


MXNET_READER = register(OpSchema(
    name="readers.mxnet", impl=MXNetReader, min_inputs=0, max_inputs=0, num_outputs=2, is_source=True,
    doc=("Reads MXNet RecordIO files (made by MXNet's im2rec.py): outputs each record's data (1-D uint8, usually "
         "an encoded image) and its label (1-D float32: one value, or the record's several labels). Records are "
         "taken in the order of their offsets in the index."),
    args=(
        Arg("path", "strs", REQUIRED, "RecordIO (.rec) files, read as if one after the other."),
        Arg("index_path", "strs", REQUIRED, "A list holding the one index (.idx) file of 'path': '<key> <offset>' "
            "lines, offsets counted over the files of 'path' in order."),
        Arg("shuffle_after_epoch", "bool", False,
            "Reshuffle all records every epoch, identically on all shards (implies stick_to_shard). DALI shuffles "
            "only the order of whole files."),
        Arg("shuffle_after_epoch_seed", "int", None, "Base seed of the shuffle_after_epoch orders."),
    ) + LOADER_ARGS))
