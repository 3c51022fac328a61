"""Device implementations (``run_jax``) of the image operators in the fused device stage.

Every device operator must give exactly the host operator's values (the same float32 formula in the
same order; products are kept out of fused multiply-adds), so a pipeline gives the same data
whether its trailing operators run on the host or on the device. On this machine the device is
JAX's CPU device (``device_id=0``).
"""

from __future__ import annotations


import jax
import numpy as np
import pytest

from jaxdali import fn, pipeline_def, types
from jaxdali.ops import color, geometry
from jaxdali.tensors import TensorListCPU, TensorListGPU
from tests.compilations import count_compilations

IMAGES = [np.random.default_rng(i).integers(0, 256, (20, 24, 3), dtype=np.uint8) for i in range(4)]
RAGGED = [np.random.default_rng(10 + i).integers(0, 256, (30 + 3 * i, 40 - i, 3), dtype=np.uint8) for i in range(4)]
LABELS = [np.array([i * 3 % 10], np.int32) for i in range(4)]


# Device-placed operators run their JAX implementations on the CPU device, as on a GPU.
pytestmark = pytest.mark.usefixtures("gpu_ops_as_jax")


def build(graph, inputs=IMAGES, num_threads=2, layout="HWC"):
    @pipeline_def(batch_size=len(inputs), num_threads=num_threads, device_id=0, seed=11, exec_pipelined=False)
    def pipe():
        x = fn.external_source(source=lambda: inputs, layout=layout)
        out = graph(x)
        return tuple(out) if isinstance(out, (list, tuple)) else out

    return pipe()


def run_once(graph, inputs=IMAGES, **kw):
    p = build(graph, inputs, **kw)
    try:
        return p.run()
    finally:
        p.close()


def assert_same(host, device):
    assert isinstance(host, TensorListCPU) and isinstance(device, TensorListGPU)
    h, d = host.as_array(), device.as_cpu().as_array()
    assert h.dtype == d.dtype and h.shape == d.shape
    np.testing.assert_array_equal(h, d)
    assert host.layout() == device.layout()




def test_device_crop_mirror_normalize_equals_host():
    """The design's main path: crop on the host, move uint8 to the device, normalise there."""

    def graph(x):
        coin = fn.random.coin_flip()
        host = fn.crop_mirror_normalize(x, crop=(16, 16), mean=[128.0] * 3, std=[64.0] * 3, mirror=coin)
        dev = fn.crop_mirror_normalize(fn.crop(x, crop=(16, 16)).gpu(), mean=[128.0] * 3, std=[64.0] * 3,
                                       mirror=coin)
        return host, dev, coin

    host, dev, coin = run_once(graph, RAGGED)
    assert set(coin.as_array().tolist()) == {0, 1}
    assert dev.layout() == "CHW" and dev.as_cpu().as_array().shape == (4, 3, 16, 16)
    assert_same(host, dev)


def test_device_outputs_are_jax_arrays_on_the_pipeline_device():
    (out,) = run_once(lambda x: fn.crop_mirror_normalize(x.gpu(), dtype=types.FLOAT16))
    assert isinstance(out, TensorListGPU)
    array = out.jax_array()
    assert isinstance(array, jax.Array) and array.dtype == np.float16 and array.shape == (4, 3, 20, 24)
    assert array.devices() == {jax.local_devices()[0]}


class _SharedDraws:
    """Random nodes created by the first application of a graph builder and reused by the second, so the
    host and device branches of one pipeline see the same per-sample arguments."""

    def __init__(self):
        self.nodes: list = []
        self.position = 0

    def start(self, replay: bool) -> None:
        if not replay:
            self.nodes = []
        self.position = 0

    def __call__(self, make):
        if self.position == len(self.nodes):
            self.nodes.append(make())
        node = self.nodes[self.position]
        self.position += 1
        return node


_draws = _SharedDraws()


def coin():
    return _draws(lambda: fn.random.coin_flip())


def uniform(lo, hi, **kw):
    return _draws(lambda: fn.random.uniform(range=(lo, hi), **kw))


def host_and_device(op):
    """A graph giving ``op`` applied to host data and to device data, with the same random arguments."""

    def graph(x):
        _draws.start(replay=False)
        host = op(x)
        _draws.start(replay=True)
        return host, op(x.gpu())

    return graph


# name -> graph builder applied once to CPU data and once to `.gpu()` data
DEVICE_OPS = {
    "cmn_uint8_pad_output": lambda x: fn.crop_mirror_normalize(
        x, crop=(10, 30), out_of_bounds_policy="pad", fill_values=[1, 2, 3, 4], pad_output=True, mirror=coin(),
        mean=[120, 110, 100], std=[60.0], scale=64, shift=128, dtype=types.UINT8),
    "cmn_per_sample_window_and_params": lambda x: fn.crop_mirror_normalize(
        x, crop=(12, 12), crop_pos_x=uniform(0, 1), crop_pos_y=uniform(0, 1), rounding="truncate",
        mean=uniform(100, 150, shape=(3,)), std=uniform(40, 80),
        output_layout="HWC", dtype=types.INT8),
    "cmn_float16_trim": lambda x: fn.crop_mirror_normalize(
        x, crop=(30, 12), out_of_bounds_policy="trim_to_shape", dtype=types.FLOAT16, mirror=1),
    "cmn_per_sample_pad": lambda x: fn.crop_mirror_normalize(
        x, crop=(26, 20), out_of_bounds_policy="pad", crop_pos_y=uniform(0, 1), fill_values=[-1.0], std=[2.0]),
    "crop_constant": lambda x: fn.crop(x, crop=(7, 9), crop_pos_x=0.3, crop_pos_y=0.9),
    "crop_per_sample_positions": lambda x: fn.crop(x, crop=(7, 9), crop_pos_x=uniform(0, 1),
                                                   crop_pos_y=uniform(0, 1)),
    "crop_pad_per_sample": lambda x: fn.crop(x, crop=(25, 30), out_of_bounds_policy="pad", fill_values=[7, 8, 9],
                                             crop_pos_x=uniform(0, 1)),
    "crop_trim_to_float": lambda x: fn.crop(x, crop=(25, 10), out_of_bounds_policy="trim_to_shape",
                                            dtype=types.FLOAT),
    "flip_per_sample": lambda x: fn.flip(x, horizontal=coin(), vertical=coin()),
    "flip_constant": lambda x: fn.flip(x, horizontal=0, vertical=1),
    "transpose": lambda x: fn.transpose(x, perm=[2, 0, 1]),
    "reshape": lambda x: fn.reshape(x, shape=[-1, 3]),
    "reshape_relative": lambda x: fn.reshape(x, rel_shape=[0.5, 2, 1], layout="ABC"),
    "cast_int8": lambda x: fn.cast(x, dtype=types.INT8),
    "one_hot_axis0": lambda x: fn.one_hot(x[0:2, 0:3, 0], num_classes=256, axis=0, dtype=types.INT32),
    "normalize_given": lambda x: fn.normalize(x, mean=120.0, stddev=55.0, scale=30, shift=128,
                                              dtype=types.UINT8),
    "normalize_given_epsilon": lambda x: fn.normalize(x, mean=120.0, stddev=55.0, epsilon=3.0),
    "normalize_computed": lambda x: fn.normalize(x, axes=[0, 1]),  # host fallback on "gpu"
    "brightness_contrast": lambda x: fn.brightness_contrast(x, brightness=uniform(0.5, 1.5),
                                                            contrast=uniform(0, 2), brightness_shift=0.05),
    "brightness_contrast_float": lambda x: fn.brightness_contrast(x, contrast=0.7, contrast_center=100.0,
                                                                  dtype=types.FLOAT),
    "hsv_per_sample": lambda x: fn.hsv(x, hue=uniform(-720, 720), saturation=uniform(0, 2), value=uniform(0.5, 1.5)),
    "hsv_constant_float": lambda x: fn.hsv(x, hue=33.0, saturation=1.4, dtype=types.FLOAT),
    "color_twist_per_sample": lambda x: fn.color_twist(x, hue=uniform(-90, 90), saturation=uniform(0, 2),
                                                       brightness=uniform(0.5, 1.5), contrast=uniform(0, 2)),
    "color_twist_int16": lambda x: fn.color_twist(x, hue=-20.0, contrast=1.3, dtype=types.INT16),
}


# Float inputs with exact ties (k + 0.5), out-of-range values, infinities and NaN.
_rng = np.random.default_rng(5)
FLOAT_IMAGES = [np.concatenate([(_rng.integers(-300, 300, (20, 16, 3)) + 0.5).astype(np.float32),
                                _rng.normal(100, 120, (20, 8, 3)).astype(np.float32)], axis=1) for _ in range(4)]
FLOAT_IMAGES[0][0, 0] = [np.nan, np.inf, -np.inf]
FLOAT_DEVICE_OPS = {
    "cast_uint8": lambda x: fn.cast(x, dtype=types.UINT8),
    "cast_int8": lambda x: fn.cast(x, dtype=types.INT8),
    "cast_int32": lambda x: fn.cast(x, dtype=types.INT32),
    "cast_float16": lambda x: fn.cast(x, dtype=types.FLOAT16),
    "cast_bool": lambda x: fn.cast(x, dtype=types.BOOL),
    "cmn_uint8": lambda x: fn.crop_mirror_normalize(x, mean=[0.5], std=[1.0], dtype=types.UINT8),
    "crop_to_uint8": lambda x: fn.crop(x, crop=(10, 10), crop_pos_x=uniform(0, 1), dtype=types.UINT8),
    "normalize_int16": lambda x: fn.normalize(x, mean=0.25, stddev=0.5, dtype=types.INT16),
    "brightness_contrast_uint8": lambda x: fn.brightness_contrast(x, brightness=uniform(0.5, 1.5), dtype=types.UINT8),
    "hsv_uint8": lambda x: fn.hsv(x, hue=uniform(-30, 30)),
}


@pytest.mark.parametrize("name", sorted(FLOAT_DEVICE_OPS))
def test_device_op_on_float_input_equals_host_op(name, device_ops_stay_on_device):
    with np.errstate(invalid="ignore"):
        host, dev = run_once(host_and_device(FLOAT_DEVICE_OPS[name]), FLOAT_IMAGES)
        assert_same(host, dev)


HOST_FALLBACK = {"normalize_computed"}  # statistics need reductions: computed on the host, then moved


@pytest.fixture
def device_ops_stay_on_device(monkeypatch):
    """Makes a device-placed operator fail if it runs its host implementation instead of run_jax."""
    classes = [geometry.Crop, geometry.Flip, geometry.Transpose, geometry.Reshape, color.CropMirrorNormalize,
               color.Cast, color.OneHot, color.Normalize, color.BrightnessContrast, color.Hsv, color.ColorTwist]
    for cls in classes:
        original = cls.run

        def run(self, ctx, inputs, args, _original=original):
            if self.node.device == "gpu":
                raise AssertionError(f"{self.name} ran on the host although it was placed on the device")
            return _original(self, ctx, inputs, args)

        monkeypatch.setattr(cls, "run", run)


@pytest.mark.parametrize("name", sorted(set(DEVICE_OPS) - HOST_FALLBACK))
def test_device_op_equals_host_op(name, device_ops_stay_on_device):
    host, dev = run_once(host_and_device(DEVICE_OPS[name]))
    assert_same(host, dev)


@pytest.mark.parametrize("name", sorted(HOST_FALLBACK))
def test_device_placed_op_without_device_kernel_equals_host_op(name):
    host, dev = run_once(host_and_device(DEVICE_OPS[name]))
    assert_same(host, dev)


def test_one_hot_scalar_labels_on_device(device_ops_stay_on_device):
    host, dev = run_once(lambda x: (fn.one_hot(x, num_classes=10), fn.one_hot(x.gpu(), num_classes=10)),
                         LABELS, layout="")
    assert_same(host, dev)
    assert dev.as_cpu().as_array().shape == (4, 10)


def test_fused_chain_equals_host_chain(device_ops_stay_on_device):
    """crop on the host, then one device program: normalise to uint8, flip, transpose, cast, reshape."""

    def chain(x, mirror, hue):
        x = fn.crop_mirror_normalize(x, mean=[100.0] * 3, std=[50.0] * 3, scale=60, shift=128, mirror=mirror,
                                     output_layout="HWC", dtype=types.UINT8)
        x = fn.hsv(x, hue=hue)
        x = fn.flip(x, vertical=1, horizontal=0)
        x = fn.transpose(x, perm=[2, 0, 1])
        x = fn.cast(x, dtype=types.INT16)
        return fn.reshape(x, shape=[3, -1])

    def graph(x):
        cropped = fn.crop(x, crop=(16, 16), crop_pos_x=fn.random.uniform(range=(0, 1)))
        m, h = fn.random.coin_flip(), fn.random.uniform(range=(-45, 45))
        return chain(cropped, m, h), chain(cropped.gpu(), m, h)

    host, dev = run_once(graph, RAGGED)
    assert_same(host, dev)
    assert dev.layout() == "" and dev.as_cpu().as_array().shape == (4, 3, 256)


def test_second_batch_compiles_nothing():
    def graph(x):
        _draws.start(replay=False)
        y = fn.crop_mirror_normalize(x.gpu(), crop=(16, 16), crop_pos_x=uniform(0, 1), mirror=coin(),
                                     mean=[128.0] * 3, std=[64.0] * 3)
        return fn.cast(fn.flip(y, vertical=coin()), dtype=types.FLOAT16), fn.hsv(x.gpu(), hue=uniform(-30, 30))

    p = build(graph)
    try:
        with count_compilations() as first:
            a1, b1 = p.run()
        with count_compilations() as later:
            a2, b2 = p.run()
            p.run()
        assert first[0] >= 1
        assert later[0] == 0
        assert not np.array_equal(a1.as_cpu().as_array(), a2.as_cpu().as_array())  # new random values, no retrace
    finally:
        p.close()


def test_device_result_does_not_depend_on_num_threads():
    op = DEVICE_OPS["cmn_per_sample_window_and_params"]
    (_, a) = run_once(host_and_device(op), num_threads=1)
    (_, b) = run_once(host_and_device(op), num_threads=2)
    np.testing.assert_array_equal(a.as_cpu().as_array(), b.as_cpu().as_array())


def test_device_crop_window_too_large_is_an_error():
    with pytest.raises(ValueError, match="Slice can't be placed out of bounds"):
        run_once(lambda x: fn.crop(x.gpu(), crop=(30, 10)))


FLOWERS = __import__("pathlib").Path(__file__).resolve().parents[3] / "shared" / "data" / "flowers"


@pytest.mark.skipif(not FLOWERS.is_dir(), reason=f"shared photos not found at {FLOWERS}")
def test_host_decode_and_crop_then_device_normalise_equals_all_cpu_pipeline(device_ops_stay_on_device):
    """The training path written by hand: read, decode a random window and resize on the host, move the
    uint8 batch with .gpu(), normalise (with a coin-flip mirror) on the device. Same values as the same
    pipeline run entirely on the CPU (device_id=None): the copy that .gpu() adds takes no place in the
    sequence of operator seeds, so the coin flip defined after it draws the same stream."""

    def make(on_device: bool):
        @pipeline_def(batch_size=8, num_threads=2, device_id=0 if on_device else None, seed=17)
        def pipe():
            jpegs, labels = fn.readers.file(file_root=str(FLOWERS), random_shuffle=True)
            images = fn.resize(fn.decoders.image_random_crop(jpegs, output_type=types.RGB), resize_x=64, resize_y=64)
            images = fn.crop_mirror_normalize(images.gpu() if on_device else images, dtype=types.FLOAT,
                                              mean=[124, 116, 104], std=[58, 57, 57], mirror=fn.random.coin_flip())
            return images, labels

        return pipe()

    cpu, dev = make(False), make(True)
    try:
        for _ in range(2):
            (host_images, host_labels), (dev_images, dev_labels) = cpu.run(), dev.run()
            assert isinstance(dev_images, TensorListGPU) and isinstance(host_images, TensorListCPU)
            assert dev_images.as_cpu().as_array().shape == (8, 3, 64, 64)
            np.testing.assert_array_equal(dev_labels.as_array(), host_labels.as_array())
            assert_same(host_images, dev_images)
    finally:
        cpu.close()
        dev.close()
