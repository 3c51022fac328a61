"""Records of one or more LMDB databases, addressed by a global index (the base of the Caffe readers).

The databases are concatenated in the order given; within one, entries are in LMDB key order
(lexicographic), as DALI reads them. The keys are listed once when the reader is built, so any
record is one B-tree lookup away: shuffles and checkpoint restores never scan.

LMDB is a memory-mapped local database: it is opened by the ``lmdb`` package from a local path
(a directory holding ``data.mdb``, or the data file itself), not through ``storage``.
"""

from __future__ import annotations

import os

import numpy as np

from jaxdali.ops.readers.base import Reader
from jaxdali.pipeline.tensors import TensorListCPU

__all__ = ["LmdbReader"]


def _open(op: str, path: str):
    try:
        import lmdb
    except ImportError:
        raise ImportError(f"fn.{op} needs the 'lmdb' package: pip install 'jaxdali[lmdb]'") from None
    if not os.path.exists(path):
        raise FileNotFoundError(f"fn.{op}: LMDB path {path!r} does not exist")
    try:
        return lmdb.open(path, readonly=True, lock=False, subdir=os.path.isdir(path), readahead=False,
                         max_readers=1024)
    except lmdb.Error as e:
        raise OSError(f"fn.{op}: cannot open LMDB {path!r}: {e}") from None


class LmdbReader(Reader):
    """A reader whose samples are the entries of the LMDBs in argument ``path``; subclasses turn a
    raw value into its outputs with ``parse(value)``."""

    def __init__(self, node, build):
        super().__init__(node, build)
        op = node.schema.name
        paths = list(self.args["path"])
        if not paths:
            raise ValueError(f"fn.{op}: 'path' lists no LMDB")
        self.paths = paths
        self.envs = [_open(op, p) for p in paths]
        self.keys: list[list[bytes]] = []
        for env in self.envs:
            with env.begin() as txn:
                self.keys.append(list(txn.cursor().iternext(keys=True, values=False)))
        counts = [len(k) for k in self.keys]
        if sum(counts) == 0:
            raise RuntimeError(f"fn.{op}: the LMDB {paths if len(paths) > 1 else paths[0]!r} has no entries")
        #: First global index of each database (and the total at the end).
        self.offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
        self.num_samples = int(self.offsets[-1])
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
        """The raw values of the entries at ``indices``, in that order."""
        db_of, local = self._locate(indices)
        values: list = [None] * len(indices)
        for db in np.unique(db_of):
            where = np.flatnonzero(db_of == db)
            keys = self.keys[db]
            with self.envs[db].begin() as txn:
                get = txn.get
                for i, j in zip(where.tolist(), local[where].tolist()):
                    values[i] = get(keys[j])
        return values

    def load(self, ctx, indices):
        op = self.node.schema.name
        samples = []
        for index, value in zip(indices.tolist(), self.read(indices)):
            try:
                samples.append(self.parse(value))
            except ValueError as e:
                raise ValueError(f"fn.{op}: record {index} ({self.source_info(index)}): {e}") from None
        infos = [self.source_info(i) for i in indices.tolist()]
        return [TensorListCPU([s[k] for s in samples], layout=self.layout(k, samples), source_info=infos)
                for k in range(len(self.node.outputs))]

    def parse(self, value: bytes) -> tuple[np.ndarray, ...]:
        """One output array per output, from one raw value; raises ValueError on a bad record."""
        raise NotImplementedError

    def layout(self, output: int, samples: list) -> str:
        """The layout of output ``output`` ("" unless a subclass says otherwise)."""
        return ""

    def close(self) -> None:
        for env in self.envs:
            env.close()
        self.envs = []
