"""``fn.decoders.inflate``: LZ4-compressed samples decompressed to tensors of a given shape and type.

Each sample is one raw LZ4 block (no frame header, no stored size, as nvCOMP and
``lz4.block.compress(data, store_size=False)`` write it) or several blocks, given by
``chunk_offsets``/``chunk_sizes``, that inflate to tensors of the same shape, stacked along a new
outer (sequence) axis. The blocks of a batch are decompressed on the worker pool by the ``lz4``
package, which releases the GIL. DALI runs this operator on the GPU only; here it runs on the host
wherever it is placed.
"""

from __future__ import annotations

import math

import numpy as np

from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import Arg, OpArgumentError, OpSchema, REQUIRED, register
from jaxdali.tensors import TensorListCPU
from jaxdali.types import DALIDataType, to_numpy_type

__all__ = ["INFLATE"]

_OP = "fn.decoders.inflate"


def _lz4_block():
    try:
        import lz4.block
    except ImportError:
        raise ImportError(f"{_OP} needs the 'lz4' package: pip install 'jaxdali[inflate]'") from None
    return lz4.block


def _chunks(i: int, size: int, offsets, sizes) -> list[tuple[int, int]]:
    """(start, stop) of each compressed chunk of sample ``i`` (``size`` bytes), or one chunk: all of it."""
    if offsets is None and sizes is None:
        return [(0, size)]
    offsets = None if offsets is None else np.asarray(offsets, np.int64).reshape(-1)
    sizes = None if sizes is None else np.asarray(sizes, np.int64).reshape(-1)
    if offsets is None:
        offsets = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    if sizes is None:
        sizes = np.diff(np.append(offsets, size))
    if len(offsets) != len(sizes):
        raise OpArgumentError(f"{_OP}: sample {i}: 'chunk_offsets' has {len(offsets)} entries but 'chunk_sizes' has "
                              f"{len(sizes)}")
    ends = offsets + sizes
    bad = np.flatnonzero((offsets < 0) | (sizes < 0) | (ends > size))
    if len(bad):
        k = int(bad[0])
        raise OpArgumentError(f"{_OP}: sample {i}: chunk {k} (offset {int(offsets[k])}, size {int(sizes[k])}) lies "
                              f"outside the sample's {size} bytes")
    return list(zip(offsets.tolist(), ends.tolist()))


class Inflate(Operator):
    def __init__(self, node, build):
        super().__init__(node, build)
        algorithm = self.args["algorithm"]
        if algorithm.upper() != "LZ4":
            raise OpArgumentError(f"{_OP}: argument 'algorithm' must be 'LZ4' (the only algorithm DALI supports), got "
                                  f"{algorithm!r}")
        self._dtype = np.dtype(to_numpy_type(self.args["dtype"]))
        self._block = _lz4_block()

    def run(self, ctx, inputs, args):
        samples = inputs[0].samples()
        n = len(samples)
        sequences = args.given("chunk_offsets") or args.given("chunk_sizes")
        shapes, jobs = [], []  # jobs: (sample, chunk, compressed view)
        for i, sample in enumerate(samples):
            data = np.asarray(sample)
            if data.dtype != np.uint8 or data.ndim != 1:
                raise OpArgumentError(f"{_OP}: sample {i} must be 1-D uint8 compressed bytes, got {data.dtype} of "
                                      f"shape {list(data.shape)}")
            shape = tuple(int(d) for d in np.asarray(args.sample_value("shape", i)).reshape(-1))
            if any(d < 0 for d in shape):
                raise OpArgumentError(f"{_OP}: sample {i}: 'shape' {list(shape)} has a negative extent")
            chunks = _chunks(i, len(data), args.sample_value("chunk_offsets", i) if sequences else None,
                             args.sample_value("chunk_sizes", i) if sequences else None)
            shapes.append(((len(chunks),) if sequences else ()) + shape)
            jobs += [(i, k, data[a:b]) for k, (a, b) in enumerate(chunks)]
        out = [np.empty(s, self._dtype) for s in shapes]
        flat = [o.reshape(-1, *s[1:]) if sequences else o.reshape((1,) + s) for o, s in zip(out, shapes)]
        chunk_bytes = [math.prod(s[1:] if sequences else s) * self._dtype.itemsize for s in shapes]
        block = self._block

        def work(lo: int, hi: int) -> None:
            for i, k, compressed in jobs[lo:hi]:
                expected = chunk_bytes[i]
                try:
                    raw = block.decompress(compressed, uncompressed_size=expected) if expected else b""
                except Exception as e:  # lz4.block.LZ4BlockError: corrupt data or output larger than the shape
                    raise ValueError(f"{_OP}: sample {i}, chunk {k}: corrupt LZ4 block, or one that inflates to "
                                     f"more than the {expected} bytes of 'shape' and 'dtype': {e}") from None
                if len(raw) != expected:
                    raise ValueError(f"{_OP}: sample {i}, chunk {k} inflates to {len(raw)} bytes, but 'shape' and "
                                     f"'dtype' need {expected}")
                flat[i][k] = np.frombuffer(raw, self._dtype).reshape(flat[i].shape[1:])

        ctx.parallel_for(work, len(jobs))
        layout = self.args["layout"] or ""
        if layout and sequences:
            layout = self.args["sequence_axis_name"] + layout
        return TensorListCPU(out, layout)


INFLATE = register(OpSchema(
    name="decoders.inflate", impl=Inflate, devices=("cpu", "gpu"),
    doc=("Decompresses LZ4-compressed samples (1-D uint8, raw LZ4 blocks) into tensors of `shape` and `dtype`. A "
         "sample may hold several blocks (`chunk_offsets` and/or `chunk_sizes`) that inflate to tensors of `shape`; "
         "they are stacked along a new outer axis named `sequence_axis_name` in the layout. DALI runs it on the "
         "GPU only; jaxdali decompresses on the host wherever it is placed (the `lz4` package, `inflate` extra)."),
    args=(
        Arg("shape", "ints", REQUIRED, "Shape of one inflated chunk.", tensor=True),
        Arg("dtype", "dtype", DALIDataType.UINT8, "Type of the inflated data."),
        Arg("algorithm", "str", "LZ4", "Compression algorithm; only 'LZ4' is supported (as in DALI)."),
        Arg("chunk_offsets", "ints", None, "Where each compressed chunk of a sample starts (with no 'chunk_sizes', "
            "chunks are packed and the last ends with the sample).", tensor=True),
        Arg("chunk_sizes", "ints", None, "Size of each compressed chunk of a sample (with no 'chunk_offsets', chunks "
            "are packed from the sample's start).", tensor=True),
        Arg("layout", "str", "", "Layout of one inflated chunk."),
        Arg("sequence_axis_name", "str", "F", "Name of the outer axis of multi-chunk samples, put before 'layout'."),
        Arg("check_output_size", "bool", False, "DALI's GPU-side size check; jaxdali always checks.", hint=True),
    )))
