"""``fn.experimental.readers.fits``: image HDUs of FITS files, one output per entry of ``hdu_indices``.

Files are listed as by ``readers.numpy`` (``file_root`` + ``file_filter``, ``file_list`` or ``files``; local
paths or fsspec URLs) and read on the shared reader machinery (shards, shuffles, padding, checkpoints,
read-ahead). Each output sample is the image of HDU ``hdu_indices[k]`` (1 is the primary HDU; DALI's default
``[2]`` is the first extension) as a C-order array ``(NAXISn, ..., NAXIS1)`` with ``BSCALE``/``BZERO``
applied, in CFITSIO's equivalent type (see ``jaxdali.ops.readers.fits_format``) as in DALI; tile-compressed
images are decompressed by ``jaxdali.ops.readers.fits_tiles``.
"""

from __future__ import annotations

import numpy as np

from jaxdali.ops.readers import fits_format, fits_tiles, storage
from jaxdali.ops.readers.base import LOADER_ARGS, Reader, listing_fingerprint
from jaxdali.ops.readers.file_listing import file_args, resolve_files
from jaxdali.ops.schema import Arg, OpArgumentError, OpSchema, register
from jaxdali.tensors import TensorListCPU
from jaxdali.types import to_dali_type, to_numpy_type

__all__ = ["FITS_READER"]

_OP = "experimental.readers.fits"
#: Bytes read first from every file: its first headers, and all of it when it is small.
_FIRST_READ = 64 * 1024
#: The output types DALI accepts in ``dtypes``.
_SUPPORTED = tuple(np.dtype(t) for t in ("u1", "u2", "u4", "u8", "i1", "i2", "i4", "i8", "f4", "f8"))


class FitsReader(Reader):
    def __init__(self, node, build):
        super().__init__(node, build)
        a = self.args
        self.hdu_indices = [int(i) for i in a["hdu_indices"]]
        if not self.hdu_indices or min(self.hdu_indices) < 1:
            raise OpArgumentError(f"fn.{_OP}: argument 'hdu_indices' must list HDU numbers >= 1 (1 is the primary "
                                  f"HDU), got {list(self.hdu_indices)}")
        self.dtypes = self._dtypes(a["dtypes"], len(self.hdu_indices))
        listing = resolve_files(_OP, a)
        self.names, self.paths = listing.names, listing.paths
        self.num_samples = len(self.names)
        self.listing, self.listing_source = listing_fingerprint(self.names), listing.where
        self._init_sampling(a["shuffle_after_epoch"], a["shuffle_after_epoch_seed"])
        self._init_read_ahead(self.paths)

    @staticmethod
    def _dtypes(dtypes, outputs: int) -> list[np.dtype] | None:
        """The declared output types (None: each output takes its file's type, as DALI's default does)."""
        if dtypes is None:
            return None
        dtypes = list(dtypes) if isinstance(dtypes, (list, tuple)) else [dtypes]
        if len(dtypes) != outputs:
            raise OpArgumentError(f"fn.{_OP}: 'dtypes' has {len(dtypes)} entries but 'hdu_indices' asks for {outputs} "
                                  "outputs; give one type per HDU")
        out = [np.dtype(to_numpy_type(to_dali_type(d))) for d in dtypes]
        for d in out:
            if d not in _SUPPORTED:
                raise OpArgumentError(f"fn.{_OP}: argument 'dtypes': {d} is not a FITS image type; use one of "
                                      f"{[str(t) for t in _SUPPORTED]}")
        return out

    def fetch(self, index: int) -> list[np.ndarray]:
        path = self.paths[index]
        try:
            return self._read(path)
        except (OSError, ValueError) as e:
            e.add_note(f"fn.{_OP}: reading sample {index} ({path!r})")
            raise

    def _read(self, path: str) -> list[np.ndarray]:
        asked = max(storage.request_granularity(path), _FIRST_READ)
        prefix = storage.read_range(path, 0, asked)

        def read(offset: int, length: int) -> bytes:
            if offset + length <= len(prefix) or len(prefix) < asked:  # a short prefix is the whole file
                return prefix[offset:offset + length]
            return storage.read_range(path, offset, length)

        hdus = fits_format.read_hdus(read, max(self.hdu_indices), path)
        out = []
        for k, number in enumerate(self.hdu_indices):
            if number > len(hdus):
                raise fits_format.FitsError(f"{path}: hdu_indices asks for HDU {number}, but the file has {len(hdus)}")
            hdu = hdus[number - 1]
            image = (fits_tiles.read_compressed_image if hdu.is_compressed_image else fits_format.read_image)(
                hdu, read, path)
            if self.dtypes is not None and image.dtype != self.dtypes[k]:
                raise fits_format.FitsError(f"{path}: HDU {number} holds {image.dtype} values, but 'dtypes' declares "
                                            f"{self.dtypes[k]} for output {k}")
            out.append(image)
        return out

    def load(self, ctx, indices):
        samples = self.fetch_all(ctx, indices)
        names = [self.names[i] for i in indices]
        outputs = []
        for k, number in enumerate(self.hdu_indices):
            arrays = [s[k] for s in samples]
            first = arrays[0]
            for a, i in zip(arrays, indices):
                if a.dtype != first.dtype or a.ndim != first.ndim:
                    raise ValueError(
                        f"fn.{_OP}: Inconsistent data: all samples of a batch must have the same data type and number "
                        f"of dimensions in each output; HDU {number} of {self.paths[indices[0]]!r} is {first.dtype} "
                        f"with {first.ndim} dimensions, of {self.paths[i]!r} {a.dtype} with {a.ndim}")
            outputs.append(TensorListCPU(arrays, source_info=names))
        return outputs


FITS_READER = register(OpSchema(
    name=_OP, impl=FitsReader, min_inputs=0, max_inputs=0, is_source=True,
    num_outputs=lambda args: len(args["hdu_indices"]),
    doc=("Reads image HDUs of FITS files: all files matching 'file_filter' in 'file_root' and its sub-folders, the "
         "files named in 'file_list', or 'files'. One output per entry of 'hdu_indices'; each sample is that HDU's "
         "image, shape (NAXISn, ..., NAXIS1), with BSCALE/BZERO applied, in CFITSIO's equivalent type (BITPIX=16 "
         "with BZERO=32768 is uint16). Tile-compressed images (RICE_1, GZIP_1, GZIP_2, NOCOMPRESS; floats "
         "stored losslessly or quantized, with or without subtractive dither) are decompressed."),
    args=file_args("*.fits", "FITS") + (
        Arg("hdu_indices", "ints", (2,), "HDU numbers to read, one output each; 1 is the primary HDU, the default "
            "[2] the first extension."),
        Arg("dtypes", "any", None, "The type of each output (DALI's list of DALIDataType); a file whose HDU holds "
            "another type is an error. Unset: each output has its file's type."),
        Arg("shuffle_after_epoch", "bool", False,
            "Reshuffle the whole list every epoch, identically on all shards (implies stick_to_shard)."),
        Arg("shuffle_after_epoch_seed", "int", None, "Base seed of the shuffle_after_epoch orders."),
    ) + LOADER_ARGS))
