"""The separable kernel behind ``fn.resize``'s fast path: the compiled one (``jaxdali/ops/_resample_kernel.c``)
and its NumPy equivalent (``jaxdali/ops/_resample_numpy.py``), which every test here runs alike."""

import os
import pathlib
import subprocess
import sys
import threading

import numpy as np
import pytest

from jaxdali import config
from jaxdali.ops.kernel_loader import load_kernel
from jaxdali.ops import _resample_numpy, resample
from jaxdali.ops.resample_plan import FILTERS, axis_taps
from jaxdali.types import DALIInterpType


@pytest.fixture(params=["compiled kernel", "numpy fallback"])
def kernel(request):
    """The implementation under test; ``resample.resample_frame`` runs it too while the test runs."""
    if request.param == "compiled kernel" and resample.kernel_status()[0] != "compiled kernel":
        pytest.skip(f"compiled kernel not in use: {resample.kernel_status()[1]}")
    previous = config.get("disable_kernel")
    config.update("disable_kernel", request.param == "numpy fallback")
    try:
        yield resample._KERNEL if request.param == "compiled kernel" else _resample_numpy.resample
    finally:
        config.update("disable_kernel", previous)


def _taps(n, m, filt=DALIInterpType.INTERP_LINEAR, antialias=True, lo=0.0, hi=None):
    return axis_taps(filt, np.array([n]), np.array([m]), np.array([lo]), np.array([float(n if hi is None else hi)]),
                     antialias, False)[0]


def _pass(x, taps, axis):
    """One pass in float32 exactly as the kernel writes it: 0 + w0 * x0 + w1 * x1 + ..., in tap order."""
    index, weights = taps
    x = np.moveaxis(x, axis, 0)
    acc = np.zeros((len(index),) + x.shape[1:], np.float32)
    for j in range(index.shape[1]):
        w = weights[:, j].reshape((-1,) + (1,) * (x.ndim - 1))
        acc = acc + w * x[index[:, j]]
    return np.moveaxis(acc, 0, axis)


def _expected(src, taps_h, taps_w, rows_first, out_dtype):
    x = src.astype(np.float32)
    for taps, axis in ((taps_h, 0), (taps_w, 1)) if rows_first else ((taps_w, 1), (taps_h, 0)):
        if taps is not None:
            x = _pass(x, taps, axis)
    if np.dtype(out_dtype).kind in "iu":
        info = np.iinfo(out_dtype)
        x = np.rint(np.clip(np.nan_to_num(x, nan=info.min), info.min, info.max))
    return x.astype(out_dtype)


@pytest.mark.parametrize("rows_first", [True, False])
@pytest.mark.parametrize("channels", [1, 2, 3, 4])
def test_both_pass_orders_give_the_float32_sums_bit_for_bit(rows_first, channels, kernel):
    r = np.random.default_rng(channels)
    filters = list(FILTERS)[1:]
    for trial in range(40):
        dtype = [np.uint8, np.uint16, np.int16, np.float32][trial % 4]
        out_dtype = [np.uint8, np.float32, np.int16, np.uint16, np.uint8][trial % 5]
        h, w = r.integers(1, 70, 2)
        oh, ow = r.integers(1, 90, 2)
        if np.dtype(dtype).kind == "f":
            src = (r.standard_normal((h, w, channels)) * 400).astype(dtype)
        else:
            info = np.iinfo(dtype)
            src = r.integers(info.min, info.max, (h, w, channels), endpoint=True).astype(dtype)
        f = filters[trial % len(filters)]
        taps_h = _taps(h, oh, f, trial % 3 != 0, *r.uniform(-2, 2, 1), h + r.uniform(-2, 2))
        # Windows of the input on both axes (as a windowed resize passes them): the kernel then reads
        # only the rows and columns the taps name.
        taps_w = _taps(w, ow, f, trial % 3 != 1, *r.uniform(-2, w / 3, 1), w - r.uniform(-2, w / 3))
        for th, tw in ((taps_h, taps_w), (None, taps_w), (taps_h, None)):
            out = np.empty((oh if th else h, ow if tw else w, channels), out_dtype)
            kernel(src, th, tw, out, rows_first)
            np.testing.assert_array_equal(out, _expected(src, th, tw, rows_first, out_dtype),
                                          err_msg=f"trial {trial}: {np.dtype(dtype)} -> {np.dtype(out_dtype)}")


def test_integer_outputs_round_half_to_even_and_saturate(kernel):
    values = np.array([np.nan, np.inf, -np.inf, 1e10, -1e10, 0.5, 1.5, 2.5, 254.5, 255.5, -0.4, -0.6,
                       32767.5, -32768.5, 65535.5, 3.7], np.float32)
    src = values.reshape(1, -1, 1)
    for dtype in (np.uint8, np.uint16, np.int16):
        out = np.empty(src.shape, dtype)
        kernel(src, None, None, out, True)
        info = np.iinfo(dtype)
        expected = np.rint(np.clip(np.nan_to_num(values, nan=info.min), info.min, info.max)).astype(dtype)
        np.testing.assert_array_equal(out[0, :, 0], expected, err_msg=str(np.dtype(dtype)))
    # 16 and more values take the vectorised uint8 conversion; the same rule applies.
    wide = np.tile(src, (1, 3, 1))
    out = np.empty(wide.shape, np.uint8)
    kernel(wide, None, None, out, True)
    np.testing.assert_array_equal(out[0, :, 0], np.tile(np.rint(np.clip(np.nan_to_num(values, nan=0), 0, 255)), 3))


def test_a_window_of_rows_or_columns_reads_the_frame_in_place(kernel):
    src = np.random.default_rng(1).integers(0, 256, (50, 60, 3), np.uint8)
    taps_w = _taps(60, 25)
    out = np.empty((20, 25, 3), np.uint8)
    resample.resample_frame(src[10:30], None, taps_w, out, True)
    np.testing.assert_array_equal(out, _expected(src[10:30].copy(), None, taps_w, True, np.uint8))
    taps_h = _taps(50, 20)
    out = np.empty((20, 30, 3), np.uint8)
    resample.resample_frame(src[:, 15:45], taps_h, None, out, False)
    np.testing.assert_array_equal(out, _expected(src[:, 15:45].copy(), taps_h, None, True, np.uint8))
    # Channels that are not contiguous (every other column) are copied first.
    out = np.empty((20, 25, 3), np.uint8)
    resample.resample_frame(src[:, ::2][:, :, ::-1], taps_h, _taps(30, 25), out)
    np.testing.assert_array_equal(out, _expected(src[:, ::2][:, :, ::-1].copy(), taps_h, _taps(30, 25),
                                                 resample.rows_first((50, 30), (20, 25), taps_h, _taps(30, 25)),
                                                 np.uint8))


def test_length_one_axes_with_any_stride_are_accepted(kernel):
    """A (H, 1, C) or (H, W, 1) view whose unused stride is not the natural one (as NumPy allows)."""
    src = np.random.default_rng(4).integers(0, 256, (40, 1, 3), np.uint8)
    odd = np.lib.stride_tricks.as_strided(src, strides=(3, 999, 1))
    out = np.empty((20, 1, 3), np.uint8)
    kernel(odd, _taps(40, 20), None, out, True)
    np.testing.assert_array_equal(out, _expected(src, _taps(40, 20), None, True, np.uint8))
    gray = np.lib.stride_tricks.as_strided(src[:, :, :1], shape=(40, 3, 1), strides=(3, 1, 777))
    out = np.empty((20, 3, 1), np.uint8)
    kernel(gray, _taps(40, 20), None, out, True)
    np.testing.assert_array_equal(out, _expected(np.ascontiguousarray(gray), _taps(40, 20), None, True, np.uint8))


@pytest.mark.parametrize("case, message", [
    ("index_out_of_range", "W tap index 60 is outside the input's 60"),
    ("negative_index", "H tap index -1 is outside the input's 50"),
    ("float64_src", "src must be an \\(H, W, C\\) uint8, uint16, int16 or float32 array"),
    ("channels", "out has 4 channels, src 3"),
    ("taps_shape", "the H taps must be int32 and float32 arrays of shape \\(20, K >= 1\\)"),
    ("int64_index", "the W taps must be int32"),
    ("keeps_extent", "an axis without taps must keep its extent"),
    ("read_only_out", "not writable|read-only"),
])
def test_bad_arguments_raise_instead_of_reading_out_of_bounds(case, message, kernel):
    src = np.zeros((50, 60, 3), np.uint8)
    taps_h, taps_w = _taps(50, 20), _taps(60, 25)
    out = np.empty((20, 25, 3), np.uint8)
    if case == "index_out_of_range":
        taps_w = (taps_w[0] + 1, taps_w[1])
    elif case == "negative_index":
        taps_h = (taps_h[0] - 1, taps_h[1])
    elif case == "float64_src":
        src = src.astype(np.float64)
    elif case == "channels":
        out = np.empty((20, 25, 4), np.uint8)
    elif case == "taps_shape":
        taps_h = (taps_h[0][:5], taps_h[1][:5])
    elif case == "int64_index":
        taps_w = (taps_w[0].astype(np.int64), taps_w[1])
    elif case == "keeps_extent":
        taps_h = None
    else:
        out.flags.writeable = False
    with pytest.raises((ValueError, BufferError), match=message):
        kernel(src, taps_h, taps_w, out, True)


def test_threads_resample_at_the_same_time_with_their_own_results(kernel):
    """The kernel runs without the GIL: frames resized on 4 threads at once equal the one-thread results."""
    r = np.random.default_rng(2)
    frames = [r.integers(0, 256, (int(h), int(w), 3), np.uint8) for h, w in r.integers(100, 300, (16, 2))]
    plans = [(_taps(f.shape[0], 97), _taps(f.shape[1], 113)) for f in frames]
    alone = []
    for f, (th, tw) in zip(frames, plans):
        alone.append(np.empty((97, 113, 3), np.uint8))
        kernel(f, th, tw, alone[-1], True)
    together = [np.empty((97, 113, 3), np.uint8) for _ in frames]

    def work(k):
        for i in range(k, len(frames), 4):
            for _ in range(5):
                kernel(frames[i], *plans[i], together[i], True)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for a, b in zip(alone, together):
        np.testing.assert_array_equal(a, b)


def test_a_large_downscale_with_more_taps_than_cached_rows(kernel):
    """120 taps per output row (more than the 8 rows the kernel keeps converted) give the same sums."""
    src = np.random.default_rng(3).integers(0, 256, (300, 40, 3), np.uint8)
    taps_h, taps_w = _taps(300, 5), _taps(40, 7)
    assert taps_h[0].shape[1] > 8
    for order in (True, False):
        out = np.empty((5, 7, 3), np.uint8)
        kernel(src, taps_h, taps_w, out, order)
        np.testing.assert_array_equal(out, _expected(src, taps_h, taps_w, order, np.uint8))


@pytest.mark.slow
def test_without_the_kernel_jaxdali_imports_and_resizes_with_numpy():
    """A tree where the kernel is not built: jaxdali imports, says why, and resizes (real photo, real pipeline)."""
    blocker = ("import sys\n"
               "class Block:\n"
               "    def find_spec(self, name, path=None, target=None):\n"
               "        if name == 'jaxdali.ops._resample_kernel':\n"
               "            raise ImportError('not built')\n"
               "sys.meta_path.insert(0, Block())\n"
               "import numpy as np\n"
               "from jaxdali import fn, pipeline_def\n"
               "from jaxdali.ops import resample\n"
               "@pipeline_def(batch_size=2, num_threads=1, device_id=None)\n"
               "def pipe():\n"
               "    img = fn.external_source(source=lambda: [np.zeros((40, 60, 3), np.uint8) + 7] * 2, batch=True)\n"
               "    return fn.resize(img, resize_x=25, resize_y=17, interp_type=3)\n"
               "p = pipe(); p.build(); (out,) = p.run()\n"
               "print(resample.kernel_status())\n"
               "print(np.asarray(out.at(0)).shape, int(np.asarray(out.at(0)).max()))\n")
    env = {k: v for k, v in os.environ.items() if k != "JAXDALI_DISABLE_KERNEL"}
    result = subprocess.run([sys.executable, "-c", blocker], capture_output=True, text=True, timeout=120,
                            cwd=pathlib.Path(__file__).resolve().parents[2], env=env)
    assert result.returncode == 0, result.stderr
    status, shape = result.stdout.splitlines()[-2:]
    assert status.startswith("('numpy fallback', 'compiled kernel not built (not built)")
    assert shape == "(17, 25, 3) 7"


def test_a_kernel_built_from_another_source_is_ignored_with_a_warning(tmp_path):
    """The hash compiled into the module must be the source's: an edited source makes the module stale."""
    if resample._KERNEL is None:
        pytest.skip(f"compiled kernel not built: {resample.kernel_status()[1]}")
    name = "jaxdali.ops._resample_kernel"
    assert load_kernel(name, resample._KERNEL_SOURCE, "resize kernel")[0] is resample._KERNEL_MODULE
    source = resample._KERNEL_SOURCE.read_bytes()
    edited = tmp_path / "_resample_kernel.c"
    edited.write_bytes(source + b"/* a newer line */\n")
    with pytest.warns(RuntimeWarning, match="ignores its compiled resize kernel.*built from another version of "
                                            "_resample_kernel.c"):
        kernel, reason = load_kernel(name, edited, "resize kernel")
    assert kernel is None and reason.startswith("stale: ")
    # Line endings do not count (a checkout with CRLF is the same source).
    edited.write_bytes(source.replace(b"\n", b"\r\n"))
    assert load_kernel(name, edited, "resize kernel")[0] is resample._KERNEL_MODULE
