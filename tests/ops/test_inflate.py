"""fn.decoders.inflate: LZ4 blocks (as nvCOMP and ``lz4.block.compress(..., store_size=False)`` write them)
inflated to the arrays that were compressed, single and chunked, on host and device placement, and its errors.

DALI 2.4 runs this operator on the GPU only, so it cannot be compared with DALI on the CPU here: the reference
is the data that was compressed."""

from __future__ import annotations

import numpy as np
import pytest

lz4_block = pytest.importorskip("lz4.block")

import jaxdali  # noqa: E402
from jaxdali import fn, types  # noqa: E402

COVERED_OPERATORS = ("decoders.inflate",)


def _block(array: np.ndarray) -> bytes:
    return lz4_block.compress(np.ascontiguousarray(array).tobytes(), store_size=False)


def _run(batches: list[list[np.ndarray]], body, batch_size: int = 2):
    @jaxdali.pipeline_def(batch_size=batch_size, num_threads=2, device_id=None)
    def p():
        return body(*[fn.external_source(source=(lambda b: lambda: b)(b)) for b in batches])

    pipe = p()
    pipe.build()
    out = pipe.run()
    return out if isinstance(out, tuple) else (out,)


def _samples(tl) -> list[np.ndarray]:
    tl = tl.as_cpu() if hasattr(tl, "as_cpu") else tl
    return [np.array(tl.at(i)) for i in range(len(tl))]


def test_single_blocks_inflate_to_the_compressed_arrays():
    rng = np.random.default_rng(0)
    images = [rng.integers(0, 8, (6, 5, 3)).astype(np.float32) for _ in range(2)]
    blocks = [np.frombuffer(_block(a), np.uint8) for a in images]
    (out,) = _run([blocks], lambda x: fn.decoders.inflate(x, shape=[6, 5, 3], dtype=types.FLOAT, layout="HWC"))
    assert out.layout() == "HWC"
    for got, want in zip(_samples(out), images):
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("by", ["chunk_sizes", "chunk_offsets", "both"])
def test_chunked_samples_become_sequences(by):
    rng = np.random.default_rng(1)
    videos = [rng.integers(0, 4, (f, 4, 3)).astype(np.uint8) for f in (3, 2)]
    blocks = [[_block(frame) for frame in video] for video in videos]
    data = [np.frombuffer(b"".join(bs), np.uint8) for bs in blocks]
    sizes = [np.array([len(b) for b in bs], np.int32) for bs in blocks]
    offsets = [np.concatenate(([0], np.cumsum(s)[:-1])).astype(np.int32) for s in sizes]

    def body(x, size_node, offset_node):
        kw = {"chunk_sizes": size_node} if by == "chunk_sizes" else {"chunk_offsets": offset_node} if \
            by == "chunk_offsets" else {"chunk_sizes": size_node, "chunk_offsets": offset_node}
        return fn.decoders.inflate(x.gpu(), shape=[4, 3], layout="HW", sequence_axis_name="T", **kw)

    (out,) = _run([data, sizes, offsets], body)
    assert out.layout() == "THW"
    for got, want in zip(_samples(out), videos):
        np.testing.assert_array_equal(got, want)


def test_shape_per_sample():
    arrays = [np.arange(12, dtype=np.int16).reshape(3, 4), np.arange(10, dtype=np.int16).reshape(5, 2)]
    blocks = [np.frombuffer(_block(a), np.uint8) for a in arrays]
    shapes = [np.array(a.shape, np.int32) for a in arrays]
    (out,) = _run([blocks, shapes], lambda x, s: fn.decoders.inflate(x, shape=s, dtype=types.INT16))
    for got, want in zip(_samples(out), arrays):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("case,message", [
    ("too_small", "more than the 8 bytes of 'shape' and 'dtype'"),
    ("too_large", "inflates to 12 bytes, but 'shape' and 'dtype' need 16"),
    ("garbage", "sample 0, chunk 0: corrupt LZ4 block"),
    ("chunk_outside", "chunk 1 (offset 2, size 999) lies outside"),
    ("algorithm", "argument 'algorithm' must be 'LZ4'"),
])
def test_errors_name_the_operator_sample_and_argument(case, message):
    block = np.frombuffer(_block(np.arange(12, dtype=np.uint8)), np.uint8)
    batch, kw = [block, block], {"shape": [12]}
    if case == "too_small":
        kw = {"shape": [8]}
    elif case == "too_large":
        kw = {"shape": [16]}
    elif case == "garbage":
        batch = [np.full(20, 0xF0, np.uint8)] * 2
    elif case == "chunk_outside":
        kw = {"shape": [12], "chunk_sizes": [2, 999]}
    elif case == "algorithm":
        kw = {"shape": [12], "algorithm": "deflate"}
    with pytest.raises(Exception, match="fn.decoders.inflate") as info:
        _run([batch], lambda x: fn.decoders.inflate(x, **kw))
    assert message in str(info.value)
