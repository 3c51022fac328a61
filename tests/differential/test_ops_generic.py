"""Generic operators (constants, tensor plumbing, reductions, ...) against real NVIDIA DALI (CPU):
bit-exact unless a case states a tolerance."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("nvidia.dali")

from tests.differential.twin import assert_same, photos, run, run_both  # noqa: E402

COVERED_OPERATORS = ("constant", "full", "zeros", "ones", "full_like", "zeros_like", "ones_like", "cast_like",
                     "copy", "cat", "stack", "squeeze", "expand_dims",
                     "reductions.sum", "reductions.mean", "reductions.mean_square", "reductions.rms", "reductions.min",
                     "reductions.max", "reductions.variance", "reductions.std_dev",
                     "shapes", "element_extract", "sequence_rearrange", "per_frame", "lookup_table", "reinterpret",
                     "get_property", "permute_batch", "batch_permutation", "slice", "pad",
                     "io.file.read", "peek_image_shape", "python_function",
                     "dl_tensor_python_function", "decoders.image_crop", "decoders.image_slice", "image_decoder_crop",
                     "image_decoder_slice")

IMAGES = (photos(3, (20, 30)), "HWC")
rng = np.random.default_rng(0)
FLOATS = [(rng.standard_normal(s) * 100).astype(np.float32) for s in [(4, 5), (3, 5), (6, 5)]]
INT16 = [rng.integers(-300, 300, s).astype(np.int16) for s in [(2, 3), (2, 3), (2, 3)]]
ROW3 = [np.array([1.5, 2.5, -3.5], np.float32)] * 3
SCALARS = [np.array(v, np.float64) for v in (2.5, -1.0, 7.25)]
UINT8_ONE = [np.zeros(1, np.uint8)] * 3
UNIT_AXES = [np.ones((1, k, 1), np.int32) * k for k in (2, 3, 1)]
U8_EVEN = [rng.integers(0, 256, s).astype(np.uint8) for s in [(4, 6), (2, 8), (6, 2)]]
FLAT_SHAPES = [np.array([-1, 5], np.int32)] * 3
INDICES = [np.array(v, np.int32) for v in (1, 1, 0)]
SHAPES = [np.array(s, np.int32) for s in ([2, 3], [1, 4], [3, 3])]

# (id, body(fn, types, *sources), feeds)
CASES = [
    ("constant_fdata", lambda f, t, x: f.constant(fdata=[1.5, 2.0, -3.25]), [UINT8_ONE]),
    ("constant_idata_shape_layout", lambda f, t, x: f.constant(idata=[1, 2, 3, 4, 5, 6], shape=[2, 3], layout="AB"),
     [UINT8_ONE]),
    ("constant_one_value_fills", lambda f, t, x: f.constant(idata=7, shape=[2, 3]), [UINT8_ONE]),
    ("constant_fdata_to_int", lambda f, t, x: f.constant(fdata=[1.7, -2.5, 2.5, 300.0], dtype=t.UINT8), [UINT8_ONE]),
    ("constant_idata_to_float", lambda f, t, x: f.constant(idata=[1, -2], dtype=t.FLOAT16), [UINT8_ONE]),
    ("constant_plus_data", lambda f, t, x: x + f.constant(idata=[3], dtype=t.UINT8), [UINT8_ONE]),
    ("full", lambda f, t, x: f.full(x, shape=[2, 3]), [ROW3]),
    ("full_scalar", lambda f, t, x: f.full(x, shape=[4], layout="X"), [SCALARS]),
    ("full_no_shape", lambda f, t, x: f.full(x), [SCALARS]),
    ("full_per_sample_shape", lambda f, t, x, s: f.full(x, shape=s), [SCALARS, SHAPES]),
    ("zeros", lambda f, t, x: f.zeros(shape=[2, 3]), [UINT8_ONE]),
    ("zeros_scalar", lambda f, t, x: f.zeros(), [UINT8_ONE]),
    ("ones_dtype_layout", lambda f, t, x: f.ones(shape=[2], dtype=t.UINT8, layout="X"), [UINT8_ONE]),
    ("ones_per_sample_shape", lambda f, t, x, s: f.ones(shape=s, dtype=t.FLOAT), [UINT8_ONE, SHAPES]),
    ("full_like", lambda f, t, x, v: f.full_like(x, v), [IMAGES, ROW3]),
    ("full_like_scalar", lambda f, t, x, v: f.full_like(x, v), [(FLOATS, "AB"), SCALARS]),
    ("zeros_like", lambda f, t, x: f.zeros_like(x), [IMAGES]),
    ("zeros_like_ragged", lambda f, t, x: f.zeros_like(x, dtype=t.INT64), [(FLOATS, "AB")]),
    ("ones_like", lambda f, t, x: f.ones_like(x, dtype=t.FLOAT), [IMAGES]),
    ("cast_like_saturates", lambda f, t, x, y: f.cast_like(x, y), [(FLOATS, "AB"), UINT8_ONE]),
    ("cast_like_int16", lambda f, t, x, y: f.cast_like(x, y), [(FLOATS, "AB"), INT16]),
    ("cast_like_to_float", lambda f, t, x, y: f.cast_like(x, y), [INT16, FLOATS]),
    ("copy", lambda f, t, x: f.copy(x), [IMAGES]),
    ("copy_ragged", lambda f, t, x: f.copy(x), [(FLOATS, "AB")]),
    ("cat", lambda f, t, x, y: f.cat(x, y), [(FLOATS, "AB"), FLOATS[::-1]]),
    ("cat_axis1", lambda f, t, x, y: f.cat(x, y, x, axis=-1), [(FLOATS, "AB"), (FLOATS, "XY")]),
    ("cat_images_channels", lambda f, t, x: f.cat(x, x, axis_name="C"), [IMAGES]),
    ("cat_one", lambda f, t, x: f.cat(x, axis=1), [(FLOATS, "AB")]),
    ("stack", lambda f, t, x, y: f.stack(x, y), [(FLOATS, "AB"), FLOATS]),
    ("stack_last_named", lambda f, t, x, y: f.stack(x, y, axis=2, axis_name="Z"), [(FLOATS, "AB"), FLOATS]),
    ("stack_negative", lambda f, t, x: f.stack(x, x, x, axis=-1), [IMAGES]),
    ("squeeze_axes", lambda f, t, x: f.squeeze(x, axes=[2, 0]), [(UNIT_AXES, "ABC")]),
    ("squeeze_names", lambda f, t, x: f.squeeze(x, axis_names="A"), [(UNIT_AXES, "ABC")]),
    ("expand_dims", lambda f, t, x: f.expand_dims(x, axes=[0, 3], new_axis_names="XY"), [(FLOATS, "AB")]),
    ("expand_dims_unnamed", lambda f, t, x: f.expand_dims(x, axes=[1]), [IMAGES]),
    ("expand_dims_no_layout", lambda f, t, x: f.expand_dims(x, axes=[2, 0]), [FLOATS]),
]


@pytest.mark.parametrize("body,feeds", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_matches_dali(body, feeds):
    ours, theirs = run_both(body, feeds)
    assert_same(ours, theirs)


def _layouts(lib, body, feeds):
    import jaxdali
    from jaxdali import fn

    if lib == "dali":
        import nvidia.dali as dali
        from nvidia.dali import fn as dfn
        return _layouts_of(dali.pipeline_def, dfn, body, feeds)
    return _layouts_of(jaxdali.pipeline_def, fn, body, feeds)


def _layouts_of(pipeline_def, fn, body, feeds):
    @pipeline_def(batch_size=3, num_threads=1, device_id=None)
    def p():
        srcs = [fn.external_source(source=(lambda s: lambda: s)(s), batch=True, layout=lay) for s, lay in feeds]
        return body(fn, *srcs)

    pipe = p()
    pipe.build()
    return [out.layout() for out in pipe.run()]


@pytest.mark.parametrize("body", [lambda f, x, y: f.full_like(x, y[0, 0]),
                                  lambda f, x, y: f.zeros_like(x),
                                  lambda f, x, y: f.cast_like(x, y), lambda f, x, y: f.copy(x)])
def test_layouts_match_dali(body):
    feeds = [(FLOATS, "AB"), (INT16, "XY")]
    assert _layouts("jaxdali", body, feeds) == _layouts("dali", body, feeds)


SEQ = [rng.integers(0, 256, s).astype(np.uint8) for s in [(4, 2, 3), (3, 2, 3), (5, 2, 3)]]
KEYS = [np.array(v, np.int32) for v in ([0, 1, 2, 5, -1, 70000], [5, 5, 2], [3])]
ORDERS = [np.array(v, np.int32) for v in ([2, 0, 0], [1], [4, 3, 2, 1, 0])]
PLUMBING_CASES = [
    ("shapes", lambda f, t, x: f.shapes(x), [(SEQ, "FHW")]),
    ("shapes_float", lambda f, t, x: f.shapes(x, dtype=t.FLOAT), [(FLOATS, "AB")]),
    ("element_extract", lambda f, t, x: f.element_extract(x, element_map=[0, 2]), [(SEQ, "FHW")]),
    ("element_extract_one", lambda f, t, x: f.element_extract(x, element_map=[1]), [(SEQ, "FHW")]),
    ("sequence_rearrange", lambda f, t, x: f.sequence_rearrange(x, new_order=[2, 0, 0, 1]), [(SEQ, "FHW")]),
    ("sequence_rearrange_per_sample", lambda f, t, x, o: f.sequence_rearrange(x, new_order=o), [(SEQ, "FHW"), ORDERS]),
    ("per_frame", lambda f, t, x: f.per_frame(x), [(SEQ, "FHW")]),
    ("per_frame_no_layout", lambda f, t, x: f.per_frame(x), [SEQ]),
    ("per_frame_replace", lambda f, t, x: f.per_frame(x, replace=True), [(SEQ, "HWC")]),
    ("lookup_table", lambda f, t, x: f.lookup_table(x, keys=[0, 2, 5], values=[0.5, 2.5, 5.5]), [KEYS]),
    ("lookup_table_uint8", lambda f, t, x: f.lookup_table(x, keys=[0, 2, 5], values=[10, 20, 300.6], dtype=t.UINT8,
                                                          default_value=-7.4), [KEYS]),
    ("lookup_table_uint16_same_shapes", lambda f, t, x: f.lookup_table(x, keys=[0, 5, 9], values=[1.5, -2, 3]),
     [[np.array([[0, 2], [5, 9]], np.uint16), np.array([[65535, 5], [9, 0]], np.uint16)]]),
    ("lookup_table_from_uint8", lambda f, t, x: f.lookup_table(x, keys=[0, 255, 7], values=[1, 2, 3], dtype=t.INT16),
     [IMAGES]),
    ("reinterpret_dtype", lambda f, t, x: f.reinterpret(x, dtype=t.INT16), [(U8_EVEN, "AB")]),
    ("reinterpret_shape", lambda f, t, x: f.reinterpret(x, dtype=t.INT32, shape=[-1]), [(FLOATS, "AB")]),
    ("reinterpret_rel_shape", lambda f, t, x: f.reinterpret(x, rel_shape=[2, 0.5], layout="XY"), [(U8_EVEN, "AB")]),
    ("reinterpret_shape_input", lambda f, t, x, y: f.reinterpret(x, y), [(FLOATS, "AB"), FLAT_SHAPES]),
    ("reinterpret_shape_node", lambda f, t, x, y: f.reinterpret(x, shape=y, dtype=t.INT32), [(FLOATS, "AB"),
                                                                                             FLAT_SHAPES]),
    ("get_property_layout", lambda f, t, x: f.get_property(x, key="layout"), [(FLOATS, "AB")]),
    ("get_property_source_info", lambda f, t, x: f.get_property(x, key="source_info"), [(FLOATS, "AB")]),
    ("permute_batch", lambda f, t, x: f.permute_batch(x, indices=[2, 0, 0]), [(FLOATS, "AB")]),
    ("permute_batch_node", lambda f, t, x, i: f.permute_batch(x, indices=i), [(SEQ, "FHW"), INDICES]),
]


@pytest.mark.parametrize("body,feeds", [c[1:] for c in PLUMBING_CASES], ids=[c[0] for c in PLUMBING_CASES])
def test_plumbing_matches_dali(body, feeds):
    ours, theirs = run_both(body, feeds)
    assert_same(ours, theirs)


@pytest.mark.parametrize("kwargs", [{}, {"no_fixed_points": True}, {"allow_repetitions": True},
                                    {"allow_repetitions": True, "no_fixed_points": True}])
def test_batch_permutation_draws_what_dali_draws(kwargs):
    """Random: the same kind of values (int32 scalars in range, a permutation unless repetitions are allowed,
    no fixed points when asked), and different values from one iteration to the next."""
    feeds = [[np.zeros(1, np.uint8)] * 8]
    for lib in ("jaxdali", "dali"):
        (perms,) = run(lib, lambda f, t, x: f.batch_permutation(**kwargs), feeds, iterations=6)
        batches = [np.array(perms[k:k + 8]) for k in range(0, 48, 8)]
        assert all(p.dtype == np.int32 and p.shape == (8,) for p in batches), lib
        for p in batches:
            assert ((p >= 0) & (p < 8)).all(), lib
            if not kwargs.get("allow_repetitions"):
                assert sorted(p.tolist()) == list(range(8)), lib
            if kwargs.get("no_fixed_points"):
                assert (p != np.arange(8)).all(), lib
        assert len({tuple(p) for p in batches}) > 1, lib


U8 = [rng.integers(0, 256, s).astype(np.uint8) for s in [(5, 7, 3), (4, 6, 3), (1, 2, 3)]]
SMALL_U8 = [rng.integers(0, 6, s).astype(np.uint8) for s in [(2, 3, 3), (3, 2, 3), (1, 2, 3)]]
I32 = [rng.integers(-10**6, 10**6, s).astype(np.int32) for s in [(3, 4), (5, 4), (2, 4)]]
EMPTY = [np.zeros((0, 3), np.float32), np.ones((2, 3), np.float32), np.zeros((0, 3), np.float32)]
REDUCTION_CASES = [
    ("sum_u8", lambda f, t, x: f.reductions.sum(x), [(U8, "HWC")], 0),
    ("sum_u8_axes_keep", lambda f, t, x: f.reductions.sum(x, axes=[0, 1], keep_dims=True), [(U8, "HWC")], 0),
    ("sum_u8_wraps", lambda f, t, x: f.reductions.sum(x, axis_names="HW", dtype=t.UINT8), [(U8, "HWC")], 0),
    ("sum_u8_float", lambda f, t, x: f.reductions.sum(x, axes=[-1], dtype=t.FLOAT), [(U8, "HWC")], 0),
    ("sum_i32", lambda f, t, x: f.reductions.sum(x, axes=[1]), [(I32, "AB")], 0),
    ("sum_f32", lambda f, t, x: f.reductions.sum(x, axes=[0]), [(FLOATS, "AB")], 1e-6),
    ("sum_empty", lambda f, t, x: f.reductions.sum(x, axes=[0]), [EMPTY], 0),
    ("mean_u8", lambda f, t, x: f.reductions.mean(x, axis_names="C"), [(U8, "HWC")], 1e-6),
    # DALI accumulates in the output type: compare where the sums fit in it (see NOTES in make_operators)
    ("mean_u8_truncated", lambda f, t, x: f.reductions.mean(x, axes=[0, 1], dtype=t.UINT8), [(SMALL_U8, "HWC")], 0),
    ("rms_u8_truncated", lambda f, t, x: f.reductions.rms(x, axes=[0], dtype=t.UINT8), [(SMALL_U8, "HWC")], 0),
    ("mean_f32", lambda f, t, x: f.reductions.mean(x), [(FLOATS, "AB")], 1e-6),
    ("mean_i32_none", lambda f, t, x: f.reductions.mean(x, axes=[]), [(I32, "AB")], 1e-6),
    ("mean_square_u8", lambda f, t, x: f.reductions.mean_square(x, axes=[1]), [(U8, "HWC")], 1e-6),
    ("mean_square_u8_int", lambda f, t, x: f.reductions.mean_square(x, dtype=t.UINT64), [(U8, "HWC")], 0),
    ("rms_f32", lambda f, t, x: f.reductions.rms(x, axes=[1], keep_dims=True), [(FLOATS, "AB")], 1e-6),
    ("min_u8", lambda f, t, x: f.reductions.min(x, axes=[0, 1]), [(U8, "HWC")], 0),
    ("max_i32", lambda f, t, x: f.reductions.max(x, axes=[0]), [(I32, "AB")], 0),
    ("min_max_empty", lambda f, t, x: (f.reductions.min(x, axes=[0]), f.reductions.max(x, axes=[0])), [EMPTY], 0),
    ("variance", lambda f, t, x: f.reductions.variance(x, f.reductions.mean(x, axes=[0, 1]), axes=[0, 1]),
     [(U8, "HWC")], 1e-6),
    ("std_dev_ddof_keep", lambda f, t, x: f.reductions.std_dev(x, f.reductions.mean(x, axes=1, keep_dims=True),
                                                                axes=1, ddof=1, keep_dims=True), [(FLOATS, "AB")], 1e-6),
]


@pytest.mark.parametrize("body,feeds,rtol", [c[1:] for c in REDUCTION_CASES], ids=[c[0] for c in REDUCTION_CASES])
def test_reductions_match_dali(body, feeds, rtol):
    """Bit-exact for integers; float results within ``rtol`` relative (jaxdali accumulates in float64,
    DALI in float32)."""
    ours, theirs = run_both(body, feeds)
    if rtol == 0:
        assert_same(ours, theirs)
        return
    for a_out, b_out in zip(ours, theirs):
        assert a_out.layout == b_out.layout
        for a, b in zip(a_out, b_out):
            assert a.shape == b.shape and a.dtype == b.dtype
            np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-5)


GRID = [np.arange(60, dtype=np.float32).reshape(6, 10), np.arange(40, dtype=np.float32).reshape(4, 10)]
REL_ANCHORS = [np.array([0.5, 0.1], np.float32), np.array([0.2, 0.25], np.float32)]
REL_SHAPES = [np.array([0.5, 0.5], np.float32)] * 2
ANCHORS = [np.array([1, 2], np.int32), np.array([3, 0], np.int32)]
SIZES = [np.array([2, 3], np.int32), np.array([4, 2], np.int32)]
SLICE_CASES = [
    ("rel", lambda f, t, x: f.slice(x, rel_start=[0.1, 0.3], rel_shape=[0.5, 0.5]), [(GRID, "HW")]),
    ("rel_end_axes", lambda f, t, x: f.slice(x, rel_start=[0.1, 0.3], rel_end=[0.5, 0.55], axes=[0, 1]),
     [(GRID, "HW")]),
    ("names", lambda f, t, x: f.slice(x, start=[1], end=[3], axis_names="H"), [(GRID, "HW")]),
    ("default_axes_no_layout", lambda f, t, x: f.slice(x, start=[1, 0], shape=[2, 3]), [GRID]),
    ("pad", lambda f, t, x: f.slice(x, start=[-2], shape=[5], axes=[1], out_of_bounds_policy="pad", fill_values=7),
     [(GRID, "HW")]),
    ("pad_channels", lambda f, t, x: f.slice(x, start=[-3, 15], shape=[40, 30], out_of_bounds_policy="pad",
                                            fill_values=[1, 2, 3]), [IMAGES]),
    ("trim", lambda f, t, x: f.slice(x, start=[-2], shape=[5], axes=[1], out_of_bounds_policy="trim_to_shape"),
     [(GRID, "HW")]),
    ("inputs_relative", lambda f, t, x, a, s: f.slice(x, a, s), [(GRID, "HW"), REL_ANCHORS, REL_SHAPES]),
    ("inputs_absolute", lambda f, t, x, a, s: f.slice(x, a, s, normalized_anchor=False, normalized_shape=False),
     [(GRID, "HW"), [np.array([1, 0], np.int32)] * 2, SIZES]),
    ("per_sample_start", lambda f, t, x, a: f.slice(x, start=a, shape=[2, 2], axes=[1, 0]), [(GRID, "HW"), ANCHORS]),
    ("image_window_dtype", lambda f, t, x: f.slice(x, rel_start=[0.25, 0.5], rel_shape=[0.5, 0.25],
                                                  dtype=t.FLOAT), [IMAGES]),
    ("rel_rounding", lambda f, t, x: f.slice(x, rel_start=[0.25], rel_shape=[0.5], axes=[0]), [(GRID, "HW")]),
]


@pytest.mark.parametrize("body,feeds", [c[1:] for c in SLICE_CASES], ids=[c[0] for c in SLICE_CASES])
def test_slice_matches_dali(body, feeds):
    ours, theirs = run_both(body, feeds)
    assert_same(ours, theirs)


PAD_CASES = [
    ("default", lambda f, t, x: f.pad(x), [(FLOATS, "AB")]),
    ("axes_fill", lambda f, t, x: f.pad(x, fill_value=-1, axes=[0]), [(FLOATS, "AB")]),
    ("shape", lambda f, t, x: f.pad(x, shape=[8, 6]), [(FLOATS, "AB")]),
    ("shape_minus_one", lambda f, t, x: f.pad(x, shape=[-1, 9]), [(FLOATS, "AB")]),
    ("shape_never_shrinks", lambda f, t, x: f.pad(x, shape=[1, 1]), [(FLOATS, "AB")]),
    ("align", lambda f, t, x: f.pad(x, align=[4]), [(FLOATS, "AB")]),
    ("align_shape", lambda f, t, x: f.pad(x, align=[2, 4], shape=[4, 1]), [(FLOATS, "AB")]),
    ("names", lambda f, t, x: f.pad(x, axis_names="B", shape=[7]), [(FLOATS, "AB")]),
    ("images", lambda f, t, x: f.pad(x, axis_names="HW", align=[16], fill_value=300.0), [IMAGES]),
    ("per_sample_fill", lambda f, t, x, v: f.pad(x, fill_value=v), [(FLOATS, "AB"), [s.astype(np.float32) for s in
                                                                                  SCALARS]]),
    ("fill_truncates", lambda f, t, x: f.pad(x, shape=[3, 5], fill_value=-3.7), [(INT16, "AB")]),
]


@pytest.mark.parametrize("body,feeds", [c[1:] for c in PAD_CASES], ids=[c[0] for c in PAD_CASES])
def test_pad_matches_dali(body, feeds):
    ours, theirs = run_both(body, feeds)
    assert_same(ours, theirs)


def _image_files():
    from tests.differential.twin import PHOTOS

    shared = PHOTOS.parent
    return (sorted((shared / "png").glob("*.png"))[:4] + sorted((shared / "jpeg_variants").rglob("*.jpg"))[:6]
            + sorted(PHOTOS.rglob("*.jpg"))[:2])


@pytest.mark.parametrize("kwargs", [{}, {"image_type": "GRAY"}, {"image_type": "ANY_DATA"}, {"dtype": "INT32"},
                                    {"adjust_orientation": False}])
def test_peek_image_shape_matches_dali(kwargs):
    encoded = [np.fromfile(p, np.uint8) for p in _image_files()]

    def body(f, t, x):
        return f.peek_image_shape(x, **{k: getattr(t, v) if isinstance(v, str) else v for k, v in kwargs.items()})

    ours, theirs = run_both(body, [encoded])
    assert_same(ours, theirs)


def test_file_read_matches_dali():
    paths = _image_files()[:5]
    names = [np.frombuffer(str(p).encode(), np.uint8) for p in paths]
    ours, theirs = run_both(lambda f, t, x: f.io.file.read(x), [names])
    assert_same(ours, theirs)
    assert ours[0][0].tobytes() == paths[0].read_bytes()


def _torch_triple(capsules):
    from torch.utils import dlpack

    return [dlpack.to_dlpack(dlpack.from_dlpack(c) * 3) for c in capsules]


def _torch_pair(a, b):
    from torch.utils import dlpack

    x, y = dlpack.from_dlpack(a), dlpack.from_dlpack(b)
    return dlpack.to_dlpack(x + y), dlpack.to_dlpack(x.sum(dim=0, keepdim=True))


PYTHON_CASES = [
    ("per_sample", lambda f, t, x: f.python_function(x, function=lambda a: a * 2), [(FLOATS, "AB")]),
    ("two_outputs", lambda f, t, x, y: f.python_function(x, y, function=lambda a, b: (a + b, np.sort(a, axis=None)),
                                                         num_outputs=2, output_layouts=["XY", "Z"]),
     [(FLOATS, "AB"), FLOATS]),
    ("batch", lambda f, t, x: f.python_function(x, function=lambda batch: [v[::-1].copy() for v in batch],
                                                batch_processing=True, output_layouts="HWC"), [IMAGES]),
    ("no_inputs", lambda f, t, x: f.python_function(function=lambda: np.array([1, 2], np.int16)), [UINT8_ONE]),
    ("dlpack_batch", lambda f, t, x: f.dl_tensor_python_function(x, function=_torch_triple), [(FLOATS, "AB")]),
    ("dlpack_per_sample", lambda f, t, x, y: f.dl_tensor_python_function(x, y, function=_torch_pair, num_outputs=2,
                                                                         batch_processing=False),
     [FLOATS, FLOATS]),
]


@pytest.mark.parametrize("body,feeds", [c[1:] for c in PYTHON_CASES], ids=[c[0] for c in PYTHON_CASES])
def test_python_functions_match_dali(body, feeds):
    ours, theirs = run_both(body, feeds)
    assert_same(ours, theirs)


def _photos_encoded():
    from tests.differential.twin import PHOTOS

    return [np.fromfile(p, np.uint8) for p in sorted(PHOTOS.rglob("*.jpg"))[:6]]


WINDOW_DECODER_CASES = [
    ("crop", lambda f, t, x: f.decoders.image_crop(x, crop=(100, 120))),
    ("crop_pos_truncate", lambda f, t, x: f.decoders.image_crop(x, crop_h=77, crop_w=91, crop_pos_x=0.3,
                                                               crop_pos_y=0.9, rounding="truncate")),
    ("crop_gray", lambda f, t, x: f.decoders.image_crop(x, crop=(64, 64), output_type=t.GRAY)),
    ("crop_legacy", lambda f, t, x: f.image_decoder_crop(x, crop=(50, 60), crop_pos_x=0.0)),
    ("slice_rel", lambda f, t, x: f.decoders.image_slice(x, rel_start=[0.1, 0.2], rel_shape=[0.5, 0.5])),
    ("slice_axes", lambda f, t, x: f.decoders.image_slice(x, start=[10, 20], shape=[50, 60], axes=[0, 1])),
    ("slice_legacy", lambda f, t, x: f.image_decoder_slice(x, rel_start=[0.25, 0.25], rel_end=[0.75, 0.5])),
]


@pytest.mark.parametrize("body", [c[1] for c in WINDOW_DECODER_CASES], ids=[c[0] for c in WINDOW_DECODER_CASES])
def test_window_decoders_match_dali(body):
    ours, theirs = run_both(body, [_photos_encoded()])
    assert_same(ours, theirs)


def test_slice_decoder_with_anchor_and_shape_inputs_matches_dali():
    encoded = _photos_encoded()
    anchors = [np.array([0.1, 0.3], np.float32)] * len(encoded)
    shapes = [np.array([0.5, 0.4], np.float32)] * len(encoded)
    ours, theirs = run_both(lambda f, t, x, a, s: f.decoders.image_slice(x, a, s), [encoded, anchors, shapes])
    assert_same(ours, theirs)
