"""``fn.readers.tfrecord``: features of ``tf.train.Example`` records from TFRecord files with DALI index files."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from jaxdali import tfrecord as tfrec
from jaxdali.ops.readers import storage
from jaxdali.ops.readers import tfrecord_format as fmt
from jaxdali.ops.readers.example_layout import FeatureSpans, locate_features
from jaxdali.ops.readers.base import LOADER_ARGS, Reader, records_fingerprint
from jaxdali.ops.readers.ranges import map_local_files, read_ranges
from jaxdali.ops.readers.shared_listing import frozen, listing
from jaxdali.ops.schema import REQUIRED, Arg, OpArgumentError, OpSchema, register
from jaxdali.tensors import TensorListCPU

__all__ = ["TFRECORD_READER", "load_index"]

_OP = "fn.readers.tfrecord"
_LIST_KIND = {tfrec.int64: fmt.INT64_LIST, tfrec.float32: fmt.FLOAT_LIST, tfrec.string: fmt.BYTES_LIST}
_KIND_NAME = {fmt.INT64_LIST: "int64_list", fmt.FLOAT_LIST: "float_list", fmt.BYTES_LIST: "bytes_list"}
_TOOL = "`python -m jaxdali.tools.tfrecord2idx <tfrecord> <index>`"


def load_index(path: str, index_path: str) -> np.ndarray:
    """The ``(offset, size)`` rows of ``index_path``, checked against the TFRecord file ``path``."""
    if not storage.isfile(path):
        raise FileNotFoundError(f"{_OP}: TFRecord file {path!r} does not exist")
    if not storage.isfile(index_path):
        raise FileNotFoundError(f"{_OP}: index file {index_path!r} (for {path!r}) does not exist; create it with "
                                f"{_TOOL}")
    return fmt.parse_index(storage.read_file(index_path), f"{_OP}: index {index_path!r}", storage.file_size(path),
                           path)


def _check_features(features: Any) -> dict[str, tfrec.Feature]:
    if not isinstance(features, Mapping) or not features:
        raise OpArgumentError(f"{_OP}: 'features' must be a non-empty dict of name -> tfrecord.FixedLenFeature / "
                              f"tfrecord.VarLenFeature, got {features!r}")
    for name, spec in features.items():
        if not isinstance(name, str) or not isinstance(spec, tfrec.Feature):
            raise OpArgumentError(f"{_OP}: 'features' entry {name!r}: {spec!r} is not a jaxdali.tfrecord feature "
                                  f"(use jaxdali.tfrecord.FixedLenFeature / VarLenFeature)")
    return dict(features)


def _list_records(paths: list[str], index_paths: list[str]) -> tuple:
    """(paths, file of each record, its number in the file, offsets, sizes, listing fingerprint, where) of
    the TFRecord files ``paths`` through their indexes; the arrays are read-only (shared by the readers of
    one iterator's pipelines)."""
    if len(paths) != len(index_paths):
        raise OpArgumentError(f"{_OP}: 'path' has {len(paths)} files but 'index_path' has {len(index_paths)}; "
                              f"give one index per TFRecord file")
    indexes = [load_index(p, i) for p, i in zip(paths, index_paths)]
    counts = [len(rows) for rows in indexes]
    if not sum(counts):
        raise RuntimeError(f"{_OP}: the index files list no records ({index_paths})")
    file_id = np.repeat(np.arange(len(paths)), counts)
    record_in_file = np.concatenate([np.arange(c) for c in counts])
    rows = np.concatenate(indexes)
    offsets, sizes = rows[:, 0].copy(), rows[:, 1].copy()
    for array in (file_id, record_in_file, offsets, sizes):
        array.flags.writeable = False
    fingerprint = records_fingerprint(paths, np.column_stack([file_id, rows]))
    where = f"the records of {paths} listed by {index_paths}"
    return paths, file_id, record_in_file, offsets, sizes, fingerprint, where


class TFRecordReader(Reader):
    """Records numbered across the files through their indexes; each batch read in few requests and
    parsed batch-wise (``example_layout``), falling back to ``parse_example`` record by record."""

    def __init__(self, node, build):
        super().__init__(node, build)
        a = self.args
        self.features = _check_features(a["features"])
        key = ("readers.tfrecord", frozen(a["path"]), frozen(a["index_path"]))
        (self.paths, self.file_id, self.record_in_file, self.offsets, self.sizes, self.listing,
         self.listing_source) = listing(key, lambda: _list_records(list(a["path"]), list(a["index_path"])))
        self.check_crc = a["check_crc"]
        self.names = list(self.features)
        self.keys = [n.encode() for n in self.names]
        self.defaults = [_default(n, f) for n, f in self.features.items()]
        #: Byte layouts of recent records (see example_layout.locate_features), tried first on every batch.
        self.layouts: list = []
        #: Local files memory-mapped unless dont_use_mmap (see ranges.read_ranges).
        self._maps = map_local_files(self.paths, a["dont_use_mmap"])
        self.num_samples = len(self.offsets)
        self._init_sampling(a["shuffle_after_epoch"], a["shuffle_after_epoch_seed"])

    def _where(self, index: int) -> str:
        return (f"{_OP}: record {int(self.record_in_file[index])} of {self.paths[self.file_id[index]]!r} "
                f"(offset {int(self.offsets[index])})")

    def load(self, ctx, indices):
        sizes = self.sizes[indices]
        blob, starts = read_ranges(self.paths, self.file_id[indices], self.offsets[indices], sizes, ctx.parallel_for,
                                   _OP, maps=self._maps)
        buf = np.frombuffer(blob, dtype=np.uint8)
        lengths = buf[starts[:, None] + np.arange(8)].view("<u8").ravel()
        stale = np.flatnonzero(lengths != sizes - fmt.FRAME_OVERHEAD)
        if len(stale):
            i = int(stale[0])
            fmt.check_frame(memoryview(buf[starts[i]:starts[i] + sizes[i]]), self._where(indices[i]), False)
        if self.check_crc:
            for i, index in enumerate(indices):
                fmt.check_frame(memoryview(buf[starts[i]:starts[i] + sizes[i]]), self._where(index), True)
        data_start, data_stop = starts + 12, starts + sizes - 4
        view = memoryview(blob)
        spans, irregular = locate_features(blob, data_start, data_stop, self.keys, self.layouts)
        parsed = {}
        for i in irregular:
            try:
                parsed[i] = fmt.parse_example(view[data_start[i]:data_stop[i]], dict.fromkeys(self.keys))
            except ValueError as e:
                raise fmt.RecordError(f"{self._where(indices[i])}: {e}") from None
        paths, file_ids, offsets = self.paths, self.file_id[indices].tolist(), self.offsets[indices].tolist()
        info = [f"{paths[f]} at index {o}" for f, o in zip(file_ids, offsets)]
        return [TensorListCPU(self._output(j, spans[j], buf, parsed, indices), source_info=info)
                for j in range(len(self.names))]

    def _output(self, j: int, span: FeatureSpans, buf: np.ndarray, parsed: dict, indices) -> np.ndarray | list:
        """Feature ``j`` of every record: a dense array, or a list of per-record arrays."""
        name, key, spec, default = self.names[j], self.keys[j], self.features[self.names[j]], self.defaults[j]
        n = len(indices)
        kind = _LIST_KIND[spec.dtype]
        if not parsed and (span.kind == kind).all() and not span.empty_list.any():  # the common case
            if spec.dtype == tfrec.string:
                return [buf[a:b] for a, b in zip(span.start.tolist(), span.stop.tolist())]  # the first string, as DALI
            if spec.fixed and (dense := self._dense(spec, span, buf)) is not None:
                return dense
        kinds, starts, stops = span.kind.tolist(), span.start.tolist(), span.stop.tolist()
        samples: list = [None] * n
        for i in range(n):
            got = kinds[i]
            if i in parsed:
                samples[i] = self._from_parsed(parsed[i].get(key), kind, spec, default, name, indices[i])
            elif got == 0:
                samples[i] = default
            elif span.empty_list[i]:  # an empty list has no type
                samples[i] = self._from_parsed((got, []), kind, spec, default, name, indices[i])
            elif got != kind:
                self._fail(indices[i], name, f"is a {_KIND_NAME[got]}, but the feature spec reads {_KIND_NAME[kind]}")
            elif spec.dtype == tfrec.string:
                samples[i] = buf[starts[i]:stops[i]]
            else:
                raw = buf[starts[i]:stops[i]]
                if kind == fmt.FLOAT_LIST and len(raw) % 4:
                    self._fail(indices[i], name, f"has a {len(raw)}-byte float_list (not a multiple of 4)")
                values = raw.view("<f4") if kind == fmt.FLOAT_LIST else fmt.decode_varints(raw)
                samples[i] = self._shaped(values, spec, name, indices[i])
        return np.stack(samples) if spec.fixed and spec.dtype != tfrec.string else samples

    def _dense(self, spec: tfrec.Feature, span: FeatureSpans, buf: np.ndarray) -> np.ndarray | None:
        """All records' fixed-length numbers in one gather, when every one has exactly the right byte count."""
        count = int(np.prod(spec.shape))
        width = 4 if spec.dtype == tfrec.float32 else 1  # one byte per varint in the fast case
        start = span.start
        if not (span.stop - start == count * width).all():
            return None
        raw = buf[start[:, None] + np.arange(count * width)]
        if spec.dtype == tfrec.float32:
            return raw.view("<f4").reshape((len(raw),) + spec.shape)
        if (raw >= 0x80).any():
            return None
        return raw.astype(np.int64).reshape((len(raw),) + spec.shape)

    def _from_parsed(self, found, kind: int, spec: tfrec.Feature, default, name: str, index: int):
        if found is None:
            return default
        got_kind, values = found
        if got_kind == 0 or not len(values):  # an empty Feature or list
            if spec.dtype == tfrec.string:
                self._fail(index, name, "has no string, FixedLenFeature((), string) needs one")
            values = np.zeros(0, tfrec.NUMPY_TYPES[spec.dtype])
        elif got_kind != kind:
            self._fail(index, name, f"is a {_KIND_NAME[got_kind]}, but the feature spec reads {_KIND_NAME[kind]}")
        if spec.dtype == tfrec.string:
            return np.frombuffer(values[0], dtype=np.uint8)
        return self._shaped(values, spec, name, index)

    def _shaped(self, values: np.ndarray, spec: tfrec.Feature, name: str, index: int) -> np.ndarray:
        if spec.fixed:
            if values.size != int(np.prod(spec.shape)):
                self._fail(index, name, f"has {values.size} values, FixedLenFeature shape {list(spec.shape)} needs "
                           f"{int(np.prod(spec.shape))}")
            return values.reshape(spec.shape)
        inner = int(np.prod(spec.shape))
        if inner == 0 or values.size % inner:
            self._fail(index, name, f"has {values.size} values, not a multiple of VarLenFeature partial shape "
                       f"{list(spec.shape)}")
        return values.reshape((-1,) + spec.shape)

    def _fail(self, index: int, name: str, what: str):
        raise fmt.RecordError(f"{self._where(index)}: feature {name!r} {what}")


def _default(name: str, spec: tfrec.Feature) -> np.ndarray:
    """What a record without the feature gives: the default for fixed-length features, else an empty array."""
    dtype = tfrec.NUMPY_TYPES[spec.dtype]
    if not spec.fixed:
        return np.zeros((0,) + spec.shape, dtype)
    if spec.dtype == tfrec.string:
        value = spec.default.encode() if isinstance(spec.default, str) else bytes(spec.default or b"")
        return np.frombuffer(value, dtype=np.uint8)
    default = np.asarray(spec.default, dtype=dtype)
    if default.size not in (1, int(np.prod(spec.shape))):
        raise OpArgumentError(f"{_OP}: feature {name!r}: the default {spec.default!r} has {default.size} values; "
                              f"shape {list(spec.shape)} needs 1 or {int(np.prod(spec.shape))}")
    return np.broadcast_to(default.reshape(-1)[0] if default.size == 1 else default.reshape(spec.shape),
                           spec.shape).copy()


TFRECORD_READER = register(OpSchema(
    name="readers.tfrecord", impl=TFRecordReader, min_inputs=0, max_inputs=0, is_source=True,
    num_outputs=lambda args: len(args["features"]),
    output_names=lambda args: list(args["features"]),
    doc=("Reads tf.train.Example records from TFRecord files. Returns a dict of outputs keyed by feature name: "
         "int64 features as int64, float32 as float32, strings as their bytes (1-D uint8). A record without a "
         "feature gives the FixedLenFeature's default or an empty VarLenFeature array."),
    args=(
        Arg("path", "strs", REQUIRED, "TFRecord files; records are numbered across them in this order."),
        Arg("index_path", "strs", REQUIRED, "One index file per TFRecord file ('<offset> <size>' per record), made "
            "by `python -m jaxdali.tools.tfrecord2idx` or DALI's tfrecord2idx."),
        Arg("features", "any", REQUIRED, "dict of feature name -> jaxdali.tfrecord.FixedLenFeature / VarLenFeature."),
        Arg("check_crc", "bool", False, "Verify each record's CRC-32C checksums (jaxdali extension; DALI never "
            "checks them)."),
        Arg("use_o_direct", "bool", False, "Bypass the page cache.", hint=True),
        Arg("shuffle_after_epoch", "bool", False,
            "Reshuffle all records every epoch, identically on all shards (implies stick_to_shard). DALI shuffles "
            "only the order of whole files."),
        Arg("shuffle_after_epoch_seed", "int", None, "Base seed of the shuffle_after_epoch orders."),
    ) + LOADER_ARGS))
