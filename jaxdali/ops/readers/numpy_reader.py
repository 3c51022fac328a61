"""``fn.readers.numpy``: ``.npy`` files, whole or a region of interest, from a folder, a list file or a list.

Each sample is one file's array with its own dtype and shape (C order, native byte order; Fortran
order files are transposed as DALI does). With a region of interest (``roi_*``/``rel_roi_*``,
``roi_axes``, ``out_of_bounds_policy``; see ``jaxdali.ops.readers.region``) only the bytes of the
region are read. Files may be local paths or fsspec URLs (``jaxdali.ops.readers.storage``); remote
files are read ahead (``jaxdali.ops.readers.read_ahead``) unless the ROI is given per sample.

.. note::
   Beyond DALI 2.4: ``.npy`` versions 2.0 and 3.0 and big-endian data are read too (DALI reads
   version 1.0, little-endian only).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from jaxdali.ops.convert import convert
from jaxdali.ops.crop_plan import window_slices
from jaxdali.ops.readers import npy_format, storage
from jaxdali.ops.readers.base import LOADER_ARGS, Reader, listing_fingerprint
from jaxdali.ops.readers.file_listing import file_args, resolve_files
from jaxdali.ops.readers.region import ROI_ARGS, check_roi_args, roi_box
from jaxdali.ops.schema import Arg, OpArgumentError, OpSchema, register
from jaxdali.tensors import TensorListCPU

__all__ = ["NUMPY_READER"]


#: Bytes of a file read first for a region: its header, and all of it when the file is small (most
#: samples are), so that one request serves both.
_FIRST_READ = 64 * 1024
#: Most distinct headers (and region plans) a reader keeps: a data set of many shapes must not grow them forever.
_MAX_CACHED = 4096


class NumpyReader(Reader):
    def __init__(self, node, build):
        super().__init__(node, build)
        a = self.args
        listing = resolve_files("readers.numpy", a)
        names, paths = listing.names, listing.paths
        check_roi_args("readers.numpy", lambda n: n in node.arg_inputs or a.get(n) is not None)
        if a["use_o_direct"] and not a["dont_use_mmap"]:
            raise OpArgumentError("fn.readers.numpy: Cannot use use_o_direct with ``dont_use_mmap=False``.")
        self.names, self.paths = names, paths
        #: ROI arguments given as constants, and whether any comes per sample (an argument input).
        self._roi = {n: a[n] for n in ROI_ARGS if a.get(n) is not None}
        self._roi_per_sample = any(n in node.arg_inputs for n in ROI_ARGS)
        self._headers: dict[int, npy_format.NpyHeader] | None = {} if a["cache_header_information"] else None
        #: The box of the constant ROI for each sample shape met so far.
        self._regions: dict[tuple[int, ...], tuple] = {}
        #: Size of the last whole file read: the expected size of the next one.
        self._size_hint: int | None = None
        #: Headers by their raw bytes (files of a data set share a handful), and for the constant ROI, its
        #: region and read plan by raw header (or header): the per-sample work of a region read is then
        #: a read, two dict lookups and a copy.
        self._parsed: dict[bytes, npy_format.NpyHeader] = {}
        self._plans: dict[Any, tuple] = {}
        remote = any(storage.is_remote(p) for p in paths)
        #: Bytes read first for a region when every file is local (else decided per file).
        self._first_read = None if remote else max(storage.LOCAL_GRANULARITY, _FIRST_READ)
        self.num_samples = len(names)
        self.listing, self.listing_source = listing_fingerprint(names), listing.where
        self._init_sampling(a["shuffle_after_epoch"], a["shuffle_after_epoch_seed"])
        if not self._roi_per_sample:
            self._init_read_ahead(paths)

    # -- one sample -----------------------------------------------------------------------------------
    def _header(self, index: int, path: str) -> tuple[npy_format.NpyHeader, bytes, bytes | None]:
        """The file's header, the bytes read to get it (the start of the file) and the header's raw bytes
        (None when the header came from the per-file cache, which reads nothing)."""
        cached = self._headers.get(index) if self._headers is not None else None
        if cached is not None:
            return cached, b"", None
        first = self._first_read or max(storage.request_granularity(path), _FIRST_READ)
        prefix = storage.read_range(path, 0, first)
        length = npy_format.header_length(prefix, path)
        if length > len(prefix) == first:
            prefix = storage.read_range(path, 0, length)
        raw = prefix[:length]
        header = self._parsed.get(raw)
        if header is None:
            if len(self._parsed) >= _MAX_CACHED:
                self._parsed.clear()
            header = self._parsed[raw] = npy_format.parse_header(prefix, path)
        if self._headers is not None:
            self._headers[index] = header
        return header, prefix, raw

    def _region(self, shape: tuple[int, ...], roi: dict[str, Any], path: str) -> tuple[tuple, tuple, tuple, tuple]:
        """(start, end) of the requested box and (lo, hi) of its part inside the array."""
        constant = roi is self._roi
        if constant and shape in self._regions:
            return self._regions[shape]
        a = self.args
        start, end = roi_box(shape, roi, a["roi_axes"], a["out_of_bounds_policy"], path)
        lo = np.clip(start, 0, shape)
        hi = np.maximum(np.clip(end, 0, shape), lo)
        region = tuple(start.tolist()), tuple(end.tolist()), tuple(lo.tolist()), tuple(hi.tolist())
        if constant:
            self._regions[shape] = region
        return region

    def _read(self, index: int, roi: dict[str, Any]) -> np.ndarray:
        path = self.paths[index]
        try:
            if not roi:
                data = storage.read_file(path, self._size_hint)
                self._size_hint = len(data)  # data sets are often of equal-sized files (a hint: races are harmless)
                return npy_format.array_from_bytes(data, npy_format.parse_header(data, path), path)
            header, prefix, raw = self._header(index, path)
            constant = roi is self._roi
            planned = self._plans.get(raw if raw is not None else header) if constant else None
            if planned is None:
                region = self._region(header.shape, roi, path)
                planned = (region, npy_format.box_plan(header, region[2], region[3],
                                                       storage.request_granularity(path)))
                if constant:
                    if len(self._plans) >= _MAX_CACHED:
                        self._plans.clear()
                    self._plans[raw if raw is not None else header] = planned
            (start, end, lo, hi), plan = planned
            inside = npy_format.read_planned(path, header, plan, prefix)
            if (lo, hi) == (start, end):
                return inside
            size = [e - s for s, e in zip(start, end)]
            out = np.full(size, convert(np.float32(self.args["fill_value"]), inside.dtype, np, "round"), inside.dtype)
            _, dst, _ = window_slices(start, size, header.shape)
            out[tuple(dst)] = inside
            return out
        except (OSError, ValueError) as e:
            e.add_note(f"fn.readers.numpy: reading sample {index} ({path!r})")
            raise

    def fetch(self, index: int) -> np.ndarray:
        return self._read(index, self._roi)

    # -- one batch ------------------------------------------------------------------------------------
    def run(self, ctx, inputs, args):
        # Per-sample ROI values are this batch's argument inputs, which load() reads from here.
        self._batch_args = args
        return super().run(ctx, inputs, args)

    def load(self, ctx, indices):
        if not self._roi_per_sample:
            arrays = self.fetch_all(ctx, indices)
        else:
            arrays = [None] * len(indices)
            args = self._batch_args
            given = [n for n in ROI_ARGS if args.given(n)]

            def read(lo: int, hi: int) -> None:
                for k in range(lo, hi):
                    arrays[k] = self._read(int(indices[k]), {n: args.sample_value(n, k) for n in given})

            ctx.parallel_for(read, len(indices))
        names = [self.names[i] for i in indices]
        _check_uniform(arrays, [self.paths[i] for i in indices])
        return TensorListCPU(arrays, source_info=names)


def _check_uniform(arrays: list[np.ndarray], paths: list[str]) -> None:
    """A batch holds one dtype and one number of dimensions (DALI's checks and wording)."""
    first = arrays[0]
    for a, path in zip(arrays, paths):
        if a.dtype != first.dtype:
            raise ValueError(f"fn.readers.numpy: Inconsistent data: All samples in the batch must have the same data "
                             f"type. Got {paths[0]!r} with data type {first.dtype} and {path!r} with data type "
                             f"{a.dtype}")
        if a.ndim != first.ndim:
            raise ValueError(f"fn.readers.numpy: Inconsistent data: All samples in the batch must have the same "
                             f"number of dimensions. Got {paths[0]!r} with {first.ndim} dimensions and {path!r} with "
                             f"{a.ndim} dimensions")


NUMPY_READER = register(OpSchema(
    name="readers.numpy", impl=NumpyReader, min_inputs=0, max_inputs=0, num_outputs=1, is_source=True,
    doc=("Reads NumPy arrays from .npy files: all files matching 'file_filter' in 'file_root' and its "
         "sub-folders, the files named in 'file_list', or 'files'. Each output sample is one array with the "
         "file's dtype and shape, or the region of interest given by the roi arguments."),
    args=file_args("*.npy", ".npy") + (
        Arg("roi_start", "ints", None, "Start of the region of interest, absolute.", tensor=True),
        Arg("rel_roi_start", "floats", None, "Start of the region of interest, relative to the shape.", tensor=True),
        Arg("roi_end", "ints", None, "End of the region of interest, absolute.", tensor=True),
        Arg("rel_roi_end", "floats", None, "End of the region of interest, relative to the shape.", tensor=True),
        Arg("roi_shape", "ints", None, "Shape of the region of interest, absolute.", tensor=True),
        Arg("rel_roi_shape", "floats", None, "Shape of the region of interest, relative to the shape.", tensor=True),
        Arg("roi_axes", "ints", (), "Axes the roi vectors describe, in their order (default: every axis)."),
        Arg("out_of_bounds_policy", "str", "error", "A region outside the array: 'error', 'trim_to_shape' or "
            "'pad' (with fill_value).", choices=("error", "trim_to_shape", "pad")),
        Arg("fill_value", "float", 0.0, "Padding value of out_of_bounds_policy='pad'."),
        Arg("cache_header_information", "bool", False, "Keep each file's parsed header after its first read."),
        Arg("use_o_direct", "bool", False, "Bypass the page cache (needs dont_use_mmap=True, as in DALI).", hint=True),
        Arg("register_buffers", "bool", True, "GPU (GDS) buffer registration.", hint=True),
        Arg("shuffle_after_epoch", "bool", False,
            "Reshuffle the whole list every epoch, identically on all shards (implies stick_to_shard)."),
        Arg("shuffle_after_epoch_seed", "int", None, "Base seed of the shuffle_after_epoch orders."),
    ) + LOADER_ARGS))
