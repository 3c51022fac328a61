"""``fn.readers.webdataset``: samples of WebDataset tar shards, one output per extension set."""

from __future__ import annotations

import warnings

import numpy as np

from jaxdali.ops.readers import storage
from jaxdali.ops.readers import wds_index
from jaxdali.ops.readers.base import LOADER_ARGS, Reader, records_fingerprint
from jaxdali.ops.readers.ranges import map_local_files, read_ranges
from jaxdali.ops.readers.shared_listing import frozen, listing
from jaxdali.ops.schema import REQUIRED, Arg, OpArgumentError, OpSchema, register
from jaxdali.tensors import TensorListCPU
from jaxdali.types import to_dali_type, to_numpy_type

__all__ = ["WEBDATASET_READER"]

_OP = "fn.readers.webdataset"
_MISSING = ("", "empty", "skip", "error")


def _ext_set(entry: str, case_sensitive: bool) -> frozenset[str]:
    exts = [e for e in entry.split(";") if e]
    if not exts:
        raise OpArgumentError(f"{_OP}: argument 'ext' has an empty extension set {entry!r}")
    return frozenset(exts if case_sensitive else (e.lower() for e in exts))


def _dtypes(dtypes, outputs: int) -> list[np.dtype]:
    if dtypes is None:
        return [np.dtype(np.uint8)] * outputs
    dtypes = list(dtypes) if isinstance(dtypes, (list, tuple)) else [dtypes]
    if len(dtypes) != outputs:
        raise OpArgumentError(f"{_OP}: 'dtypes' has {len(dtypes)} entries but 'ext' defines {outputs} outputs")
    return [np.dtype(to_numpy_type(to_dali_type(d))) for d in dtypes]


def _archive_samples(path: str, index_path: str | None) -> list[list[wds_index.Component]]:
    if not storage.isfile(path):
        raise FileNotFoundError(f"{_OP}: archive {path!r} does not exist")
    if index_path is None:
        return wds_index.group_samples(wds_index.scan_tar(path))
    if not storage.isfile(index_path):
        raise FileNotFoundError(f"{_OP}: index file {index_path!r} (for {path!r}) does not exist; create it with "
                                f"`python -m jaxdali.tools.wds2idx {path} {index_path}` or leave index_paths "
                                f"unset to scan the archive")
    text = storage.read_file(index_path).decode("utf-8", errors="replace")
    return wds_index.parse_index(text, f"{_OP}: index {index_path!r}", storage.file_size(path))


#: The arguments the samples depend on.
_LISTING_ARGS = ("paths", "index_paths", "ext", "dtypes", "missing_component_behavior", "case_sensitive_extensions")


def _list_samples(a) -> tuple:
    """(paths, dtypes, archive of each sample, (samples, outputs) offsets, sizes and presence, source infos,
    listing fingerprint, where) of the reader's arguments ``a``; the arrays are read-only (shared by the
    readers of one iterator's pipelines)."""
    paths = list(a["paths"])
    case_sensitive = a["case_sensitive_extensions"]
    ext_sets = [_ext_set(e, case_sensitive) for e in a["ext"]]
    index_paths = list(a["index_paths"]) if a["index_paths"] is not None else None
    if index_paths is not None and len(index_paths) != len(paths):
        raise OpArgumentError(f"{_OP}: 'paths' has {len(paths)} archives but 'index_paths' has {len(index_paths)}; "
                              f"give one index per archive")
    dtypes = _dtypes(a["dtypes"], len(ext_sets))
    missing = a["missing_component_behavior"]

    # Per sample: its archive and, per output, the index of the matching component (-1: none).
    sample_file, chosen, offsets, sizes, sources = [], [], [], [], []
    for f, path in enumerate(paths):
        samples = _archive_samples(path, index_paths[f] if index_paths else None)
        for sample in samples:
            picks = []
            for j, wanted in enumerate(ext_sets):
                hits = [c for c in sample if (c.ext if case_sensitive else c.ext.lower()) in wanted]
                if len(hits) > 1:
                    warnings.warn(f"{_OP}: sample {_key(sample)!r} of {path!r} has several components "
                                  f"for output {j} ({[c.name or c.ext for c in hits]}); using the first",
                                  stacklevel=2)
                picks.append(hits[0] if hits else None)
            if None in picks and missing != "empty" and missing != "":
                if missing == "skip":
                    continue
                j = picks.index(None)
                raise RuntimeError(f"{_OP}: sample {_key(sample)!r} of {path!r} has no component for output {j} "
                                   f"(extensions {a['ext'][j]!r}); its files: {[c.name or c.ext for c in sample]} "
                                   f"(missing_component_behavior='error')")
            sample_file.append(f)
            for j, c in enumerate(picks):
                if c is not None and c.size % dtypes[j].itemsize:
                    raise RuntimeError(f"{_OP}: component {c.name or c.ext!r} of {path!r} has {c.size} bytes, "
                                       f"not a multiple of the {dtypes[j].itemsize}-byte dtype {dtypes[j]} of "
                                       f"output {j}")
            offsets.append([c.offset if c else 0 for c in picks])
            sizes.append([c.size if c else 0 for c in picks])
            sources.append([f"{path}:{c.offset}:{c.name}" if c else "" for c in picks])
            chosen.append([c is not None for c in picks])
    if not sample_file:
        raise RuntimeError(f"{_OP}: no samples in {paths}" +
                           (" (every sample lacks a component and missing_component_behavior='skip')"
                            if missing == "skip" else ""))
    arrays = (np.asarray(sample_file, dtype=np.int64), np.asarray(offsets, dtype=np.int64),
              np.asarray(sizes, dtype=np.int64), np.asarray(chosen, dtype=bool))
    for array in arrays:
        array.flags.writeable = False
    fingerprint = records_fingerprint(paths, np.column_stack(arrays[:3]))
    return (paths, dtypes) + arrays + (sources, fingerprint, f"the samples of {paths} with components {list(a['ext'])}")


class WebdatasetReader(Reader):
    """Samples listed once from index files or tar headers; per sample and output, the chosen file's
    position, so a batch is a few coalesced range reads handed out as views."""

    def __init__(self, node, build):
        super().__init__(node, build)
        a = self.args
        key = ("readers.webdataset",) + tuple(frozen(a[name]) for name in _LISTING_ARGS)
        #: sources: each sample's source_info per output, as DALI gives it: "<archive>:<offset>:<member name>".
        (self.paths, self.dtypes, self.sample_file, self.offsets, self.sizes, self.present, self.sources,
         self.listing, self.listing_source) = listing(key, lambda: _list_samples(a))
        #: Local archives memory-mapped unless dont_use_mmap (see ranges.read_ranges).
        self._maps = map_local_files(self.paths, a["dont_use_mmap"])
        self.num_samples = len(self.sample_file)
        self._init_sampling(a["shuffle_after_epoch"], a["shuffle_after_epoch_seed"])

    def load(self, ctx, indices):
        n = len(indices)
        rows, cols = np.nonzero(self.present[indices])
        sample = indices[rows]
        sizes = self.sizes[sample, cols]
        blob, starts = read_ranges(self.paths, self.sample_file[sample], self.offsets[sample, cols], sizes,
                                   ctx.parallel_for, _OP, maps=self._maps)
        buf = np.frombuffer(blob, dtype=np.uint8)
        ends = starts + sizes
        sources = self.sources
        outputs = []
        for j, dtype in enumerate(self.dtypes):
            mine = cols == j
            spans = zip(starts[mine].tolist(), ends[mine].tolist())
            pieces = [buf[s:e] for s, e in spans] if dtype == np.uint8 else [buf[s:e].view(dtype) for s, e in spans]
            if len(pieces) == n:
                samples = pieces
            else:
                samples = [np.zeros(0, dtype)] * n
                for r, piece in zip(rows[mine].tolist(), pieces):
                    samples[r] = piece
            outputs.append(TensorListCPU(samples, source_info=[sources[i][j] for i in indices.tolist()]))
        return outputs


def _key(sample: list[wds_index.Component]) -> str:
    return wds_index.split_name(sample[0].name)[0] if sample and sample[0].name else "?"


WEBDATASET_READER = register(OpSchema(
    name="readers.webdataset", impl=WebdatasetReader, min_inputs=0, max_inputs=0, is_source=True,
    num_outputs=lambda args: len(args["ext"]),
    doc=("Reads samples from WebDataset tar shards: one output per entry of 'ext', each the bytes of the sample's "
         "file with one of that entry's extensions (viewed as 'dtypes')."),
    args=(
        Arg("paths", "strs", REQUIRED, "The tar archives; samples are numbered across them in this order."),
        Arg("index_paths", "strs", None, "One DALI index file per archive (`python -m jaxdali.tools.wds2idx`); "
            "without them the archives' tar headers are scanned at start-up."),
        Arg("ext", "strs", REQUIRED, "One extension set per output, alternatives separated by ';' (e.g. 'jpg;png')."),
        Arg("missing_component_behavior", "str", "", "A sample without a file for some output: '' or 'empty' "
            "(an empty array), 'skip' (drop the sample), 'error'.",
            choices=_MISSING),
        Arg("dtypes", "any", None, "One DALIDataType per output (default uint8); file sizes must be multiples of it."),
        Arg("case_sensitive_extensions", "bool", True, "Match extensions case-sensitively."),
        Arg("shuffle_after_epoch", "bool", False,
            "Reshuffle all samples every epoch, identically on all shards (implies stick_to_shard). DALI shuffles "
            "only the order of whole archives."),
        Arg("shuffle_after_epoch_seed", "int", None, "Base seed of the shuffle_after_epoch orders."),
    ) + LOADER_ARGS))
