"""Records of one or more LMDB databases, addressed by a global index (the base of the Caffe readers).

The databases are concatenated in the order given; within one, entries are in LMDB key order
(lexicographic), as DALI reads them. The keys are listed once when the reader is built, so any
record is one B-tree lookup away: shuffles and checkpoint restores never scan.

LMDB is a memory-mapped local database: it is opened by the ``lmdb`` package from a local path
(a directory holding ``data.mdb``, or the data file itself), not through ``storage``.
"""

from __future__ import annotations

import operator
import os
import threading

import numpy as np

from jaxdali.ops.readers import storage
from jaxdali.ops.readers.base import Reader, records_fingerprint
from jaxdali.ops.readers.protowire import ProtoError
from jaxdali.ops.readers.shared_listing import listing
from jaxdali.tensors import TensorListCPU

__all__ = ["LmdbReader"]


# The lmdb package refuses to open one environment twice in a process, and pipelines may share a
# database (a training and a validation pipeline, a pipeline rebuilt after an error): readers share
# one read-only environment per real path, closed when its last reader closes.
_ENVS: dict[str, list] = {}  # real path -> [environment, number of readers]
_ENVS_LOCK = threading.Lock()


def _open(op: str, path: str) -> tuple[str, object]:
    try:
        import lmdb
    except ImportError:
        raise ImportError(f"fn.{op} needs the 'lmdb' package: pip install 'jaxdali[lmdb]'") from None
    storage.require_local(op, path, "an LMDB is memory-mapped by the lmdb package, which needs a local path "
                          "(see docs/readers/caffe.md)")
    if not os.path.exists(path):
        raise FileNotFoundError(f"fn.{op}: LMDB path {path!r} does not exist")
    real = os.path.realpath(path)
    with _ENVS_LOCK:
        entry = _ENVS.get(real)
        if entry is None:
            try:
                env = lmdb.open(real, readonly=True, lock=False, subdir=os.path.isdir(real), readahead=False,
                                max_readers=1024)
            except lmdb.Error as e:
                raise OSError(f"fn.{op}: cannot open LMDB {path!r}: {e}") from None
            entry = _ENVS[real] = [env, 0]
        entry[1] += 1
        return real, entry[0]


def _release(real: str) -> None:
    with _ENVS_LOCK:
        entry = _ENVS[real]
        entry[1] -= 1
        if entry[1] == 0:
            entry[0].close()
            del _ENVS[real]


def _pick(items: list, positions: list[int]) -> list:
    """``[items[p] for p in positions]`` in one C call."""
    if len(positions) == 1:
        return [items[positions[0]]]
    return list(operator.itemgetter(*positions)(items)) if positions else []


def _list_keys(op: str, paths: list[str], envs: list) -> tuple[list[list[bytes]], np.ndarray]:
    """The keys of each database (opened in ``envs``) in order, and the read-only first global index of each
    database (and the total at the end); shared by the readers of one iterator's pipelines."""
    keys = []
    for env in envs:
        with env.begin() as txn:
            keys.append(list(txn.cursor().iternext(keys=True, values=False)))
    counts = [len(k) for k in keys]
    if sum(counts) == 0:
        raise RuntimeError(f"fn.{op}: the LMDB {paths if len(paths) > 1 else paths[0]!r} has no entries")
    offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    offsets.flags.writeable = False
    return keys, offsets


class LmdbReader(Reader):
    """A reader whose samples are the entries of the LMDBs in argument ``path``; subclasses turn a
    batch of raw values into output batches with ``decode(records)``."""

    #: Whether the first output is the record's image.
    image: bool = False

    def __init__(self, node, build):
        super().__init__(node, build)
        op = node.schema.name
        paths = list(self.args["path"])
        if not paths:
            raise ValueError(f"fn.{op}: 'path' lists no LMDB")
        self.paths = paths
        self._opened: list[str] = []
        self.envs = []
        for p in paths:
            real, env = _open(op, p)
            self._opened.append(real)
            self.envs.append(env)
        #: Each database's keys in order, and the first global index of each database (and the total at the end).
        self.keys, self.offsets = listing(("lmdb", tuple(self._opened)), lambda: _list_keys(op, paths, self.envs))
        self.num_samples = int(self.offsets[-1])
        self.listing = records_fingerprint(paths, self.offsets)
        self.listing_source = f"the entries of the LMDB {paths}"
        self._name_prefixes = [f"{p} at key " for p in paths]
        self._init_sampling()

    def _locate(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        db = np.searchsorted(self.offsets, indices, side="right") - 1
        return db, indices - self.offsets[db]

    def source_info(self, index: int) -> str:
        """Where sample ``index`` comes from, as DALI names it: ``<path> at key <key>``."""
        db, local = self._locate(np.asarray([index]))
        key = self.keys[db[0]][local[0]]
        return f"{self.paths[db[0]]} at key {key.decode('utf-8', 'replace')}"

    def read(self, indices: np.ndarray) -> list[bytes]:
        """The raw values of the entries at ``indices``, in that order (one lookup call per database)."""
        db_of, local = self._locate(indices)
        if len(self.envs) == 1:
            return self._read_db(0, local.tolist())
        values: list = [None] * len(indices)
        for db in np.unique(db_of).tolist():
            where = np.flatnonzero(db_of == db)
            for i, value in zip(where.tolist(), self._read_db(db, local[where].tolist())):
                values[i] = value
        return values

    def _read_db(self, db: int, local: list[int]) -> list[bytes]:
        wanted = _pick(self.keys[db], local)
        with self.envs[db].begin() as txn:
            values = list(map(txn.get, wanted))  # one B-tree lookup each; quicker than Cursor.getmulti
        if None in values:
            missing = wanted[values.index(None)]
            raise KeyError(f"fn.{self.node.schema.name}: key {missing!r} of {self.paths[db]!r} disappeared "
                           "while reading (the database changed after the reader was built)")
        return values

    def load(self, ctx, indices):
        index_list = indices.tolist()
        records = self.read(indices)
        try:
            outputs = self.decode(records)
        except ProtoError as e:
            index = index_list[e.message]
            raise ValueError(f"fn.{self.node.schema.name}: record {index} ({self.source_info(index)}): {e}") from None
        if self.image:  # as in DALI, the image carries the record's name
            db_of, local = self._locate(indices)
            prefixes, keys = self._name_prefixes, self.keys
            if len(keys) == 1:
                prefix = prefixes[0]
                names = [prefix + key.decode("utf-8", "replace") for key in _pick(keys[0], local.tolist())]
            else:
                names = [prefixes[d] + keys[d][j].decode("utf-8", "replace")
                         for d, j in zip(db_of.tolist(), local.tolist())]
            outputs[0].source_info = names
        return outputs

    def decode(self, records: list[bytes]) -> list[TensorListCPU]:
        """The output batches of a batch of raw values; a bad record raises ProtoError naming its
        position in ``records``."""
        raise NotImplementedError

    def close(self) -> None:
        for real in self._opened:
            _release(real)
        self._opened, self.envs = [], []
