"""Generic operators: errors name the operator and the argument; the device placement gives the host's
values. (Values are checked against DALI in tests/differential/test_ops_generic.py.)"""

from __future__ import annotations

import numpy as np
import pytest

from jaxdali import fn, pipeline_def, types
from jaxdali.ops.schema import OpArgumentError
from tests.run_once import run_once


def run(make, batch_size=2, device_id=None):
    """Runs ``make()`` as a pipeline once; returns each output as a list of NumPy samples."""
    return run_once(make, batch_size=batch_size, device_id=device_id, prefetch_queue_depth=1)[0]

def feed(*samples, layout=""):
    return fn.external_source(source=lambda: [np.asarray(s) for s in samples], layout=layout)


ERRORS = [
    (lambda: fn.constant(shape=[2]), "fn.constant: give exactly one of 'fdata' and 'idata'"),
    (lambda: fn.constant(fdata=[1.0], idata=[1]), "fn.constant: give exactly one of 'fdata' and 'idata'"),
    (lambda: fn.constant(fdata=[1.0, 2.0, 3.0], shape=[2]), r"fn.constant: 3 values of 'fdata' do not fill 'shape' \[2\]"),
    (lambda: fn.full(feed([1, 2, 3], [1, 2, 3]), shape=[2, 2]),
     r"fn.full: fill_value of shape \[3\] cannot be broadcast to the shape \[2, 2\]"),
    (lambda: fn.zeros(shape=[2, -1]), r"fn.zeros: argument 'shape' must not have negative extents"),
    (lambda: fn.ones(shape=feed([2, -1], [1, 1])), r"fn.ones: argument 'shape' must not have negative extents.*sample 0"),
    (lambda: fn.full_like(feed(np.zeros((2, 2)), np.zeros((2, 3))), feed([1, 2, 3], [1, 2, 3])),
     r"fn.full_like: fill_value of shape \[3\] cannot be broadcast to the shape \[2, 2\] \(sample 0\)"),
    (lambda: fn.cat(feed(np.zeros((2, 3)), np.zeros((2, 3))), feed(np.zeros((2, 4)), np.zeros((2, 3)))),
     r"fn.cat: the inputs may differ only in the axis 0; sample 0 has shape \[2, 3\] in input 0 and \[2, 4\]"),
    (lambda: fn.cat(feed(np.zeros((2, 3)), np.zeros((2, 3))), feed(np.zeros((2, 3), np.int32), np.zeros((2, 3), np.int32))),
     r"fn.cat: all inputs must have the same type and number of dimensions; input 0: float64, 2-D, input 1: int32"),
    (lambda: fn.cat(feed(np.zeros((2, 3)), np.zeros((2, 3))), axis=2),
     r"fn.cat: argument 'axis' is 2 for 2-D inputs; accepted range is \[-2, 1\]"),
    (lambda: fn.cat(feed(np.zeros((2, 3)), np.zeros((2, 3)), layout="AB"), axis_name="C"),
     r"fn.cat: argument 'axis_name' is 'C', but the input layout is 'AB'"),
    (lambda: fn.stack(feed(np.zeros((2, 3)), np.zeros((2, 3))), feed(np.zeros((3, 2)), np.zeros((2, 3)))),
     r"fn.stack: the inputs must have equal shapes; sample 0 has shape \[2, 3\] in input 0 and \[3, 2\]"),
    (lambda: fn.stack(feed(np.zeros((2, 3)), np.zeros((2, 3))), axis=-4),
     r"fn.stack: argument 'axis' is -4 for 2-D inputs; accepted range is \[-3, 2\]"),
    (lambda: fn.squeeze(feed(np.zeros((1, 3)), np.zeros((1, 3)))), "fn.squeeze: give exactly one of 'axes' and 'axis_names'"),
    (lambda: fn.squeeze(feed(np.zeros((1, 3)), np.zeros((1, 3))), axes=[1]),
     r"fn.squeeze: axis 1 of sample 0 has extent 3, not 1 \(shape \[1, 3\]\)"),
    (lambda: fn.squeeze(feed(np.zeros((1, 3)), np.zeros((1, 3))), axes=[-1]), "fn.squeeze: axis -1 in 'axes' is out of range"),
    (lambda: fn.squeeze(feed(np.zeros((1, 3)), np.zeros((1, 3)), layout="AB"), axis_names="C"),
     "fn.squeeze: 'axis_names' 'C' are not all in the layout 'AB'"),
    (lambda: fn.expand_dims(feed(np.zeros(3), np.zeros(3)), axes=[0, 0]), "fn.expand_dims: argument 'axes' has a duplicated"),
    (lambda: fn.expand_dims(feed(np.zeros(3), np.zeros(3)), axes=[3]), "fn.expand_dims: axis 3 is out of range for 1-D"),
    (lambda: fn.expand_dims(feed(np.zeros(3), np.zeros(3)), axes=[0], new_axis_names="X"),
     "fn.expand_dims: 'new_axis_names' needs an input with a layout"),
    (lambda: fn.expand_dims(feed(np.zeros(3), np.zeros(3), layout="A"), axes=[0], new_axis_names="XY"),
     "fn.expand_dims: 'new_axis_names' 'XY' must name each of the 1 new axes"),
    (lambda: fn.reductions.sum(feed(np.zeros((2, 3)), np.zeros((2, 3)))),
     r"fn.reductions.sum: unsupported input type float64; expected one of"),
    (lambda: fn.reductions.mean(feed(np.zeros((2, 3), np.uint8), np.zeros((2, 3), np.uint8)), dtype=types.INT32),
     r"fn.reductions.mean: argument 'dtype' cannot be int32 for uint8 input; allowed: \['float32', 'uint8'\]"),
    (lambda: fn.reductions.max(feed(np.zeros((2, 3), np.uint8), np.zeros((2, 3), np.uint8)), axes=[2]),
     r"fn.reductions.max: axis 2 in 'axes' is out of range for 2-D input \(accepted: -2 to 1\)"),
    (lambda: fn.reductions.min(feed(np.zeros((2, 3), np.uint8), np.zeros((2, 3), np.uint8)), axes=[0, -2]),
     r"fn.reductions.min: argument 'axes' has a duplicated axis: \[0, -2\]"),
    (lambda: fn.reductions.rms(feed(np.zeros((2, 3), np.uint8), np.zeros((2, 3), np.uint8), layout="AB"), axis_names="C"),
     r"fn.reductions.rms: 'axis_names' 'C' are not all in the input layout 'AB'"),
    (lambda: fn.reductions.sum(feed(np.zeros((2, 3), np.uint8), np.zeros((2, 3), np.uint8)), axes=[0], axis_names="A"),
     r"fn.reductions.sum: give 'axes' or 'axis_names', not both"),
    (lambda: fn.reductions.variance(feed(np.zeros((2, 3), np.uint8), np.zeros((2, 3), np.uint8)),
                                    feed(np.zeros(2, np.float32), np.zeros(2, np.float32))),
     r"fn.reductions.variance: the mean of sample 0 has shape \[2\]; expected the reduced shape \[\]"),
    (lambda: fn.reductions.std_dev(feed(np.zeros((2, 3), np.uint8), np.zeros((2, 3), np.uint8)),
                                   feed(np.zeros((), np.int32), np.zeros((), np.int32))),
     r"fn.reductions.std_dev: the mean \(input 1\) must be float32, got int32"),
    (lambda: fn.element_extract(feed(np.zeros((3, 2)), np.zeros((2, 2)), layout="FX"), element_map=[2]),
     r"fn.element_extract: element_map\[0\] = 2 is out of range for sample 1 with 2 frames"),
    (lambda: fn.element_extract(feed(np.zeros((3, 2)), np.zeros((2, 2)), layout="HW"), element_map=[0]),
     "fn.element_extract: the input must be a sequence: its layout must start with 'F', got 'HW'"),
    (lambda: fn.sequence_rearrange(feed(np.zeros((3, 2)), np.zeros((2, 2))), new_order=[0, 2]),
     r"fn.sequence_rearrange: new_order\[1\] = 2 is out of range for sample 1 with 2 frames"),
    (lambda: fn.sequence_rearrange(feed(np.zeros((3, 2)), np.zeros((2, 2))), new_order=[]),
     "fn.sequence_rearrange: 'new_order' of sample 0 is empty"),
    (lambda: fn.per_frame(feed(np.zeros((3, 2)), np.zeros((2, 2)), layout="HW")),
     "fn.per_frame: the input layout 'HW' does not start with 'F'; pass replace=True"),
    (lambda: fn.lookup_table(feed(np.zeros(3, np.int32), np.zeros(3, np.int32)), keys=[1, 2], values=[1.0]),
     "fn.lookup_table: 'keys' has 2 entries and 'values' 1"),
    (lambda: fn.lookup_table(feed(np.zeros(3, np.int32), np.zeros(3, np.int32)), keys=[70000], values=[1.0]),
     r"fn.lookup_table: 'keys' must be in \[0, 65535\]"),
    (lambda: fn.lookup_table(feed(np.zeros(3, np.float32), np.zeros(3, np.float32)), keys=[1], values=[1.0]),
     "fn.lookup_table: the input must be of an integer type, got float32"),
    (lambda: fn.reinterpret(feed(np.zeros(3, np.uint8), np.zeros(3, np.uint8)), dtype=types.INT16),
     r"fn.reinterpret: the innermost extent of sample 0 \(\(3,\) x 1 bytes\) is not a multiple of the size of int16"),
    (lambda: fn.reinterpret(feed(np.zeros(6, np.uint8), np.zeros(6, np.uint8)), shape=[4]),
     r"fn.reinterpret: sample 0 has 6 bytes, the shape \[4\] of uint8 needs 4"),
    (lambda: fn.reinterpret(feed(np.zeros(6, np.uint8), np.zeros(6, np.uint8)), shape=[4], rel_shape=[1.0]),
     "fn.reinterpret: give at most one of 'shape', 'rel_shape' and 'src_dims'"),
    (lambda: fn.get_property(feed(np.zeros(6), np.zeros(6)), key="size"), "fn.get_property: argument 'key' must be one of"),
    (lambda: fn.permute_batch(feed(np.zeros(6), np.zeros(6)), indices=[0, 2]),
     r"fn.permute_batch: indices\[1\] = 2 is not a sample of the batch of 2"),
    (lambda: fn.permute_batch(feed(np.zeros(6), np.zeros(6)), indices=[0, 1, 0]),
     "fn.permute_batch: 'indices' has 3 entries for a batch of 2"),
    (lambda: fn.random.beta(alpha=0.0), "fn.random.beta: 'alpha' must be a positive finite number, got 0 for sample 0"),
    (lambda: fn.random.beta(beta=feed(np.float32(1), np.float32(-2))),
     "fn.random.beta: 'beta' must be a positive finite number, got -2 for sample 1"),
    (lambda: fn.random.beta(dtype=types.INT32), "fn.random.beta: argument 'dtype' must be FLOAT or FLOAT64"),
    (lambda: fn.slice(feed(np.zeros((4, 4)), np.zeros((4, 4))), start=[3, 3], shape=[2, 2]),
     r"fn.slice: 'sample 0': Slice can't be placed out of bounds with current policy"),
    (lambda: fn.slice(feed(np.zeros((4, 4)), np.zeros((4, 4))), start=[1], rel_start=[0.5]),
     "fn.slice: argument 'roi_start' is incompatible with 'rel_roi_start'"),
    (lambda: fn.slice(feed(np.zeros((4, 4)), np.zeros((4, 4))), feed([0.5], [0.5])),
     "fn.slice: give both the anchor and the shape inputs, or neither"),
    (lambda: fn.slice(feed(np.zeros((4, 4)), np.zeros((4, 4))), feed([0.5], [0.5]), feed([0.5], [0.5]), start=[1]),
     r"fn.slice: the anchor and shape are given as inputs; do not also give \['start'\]"),
    (lambda: fn.slice(feed(np.zeros((4, 4)), np.zeros((4, 4)), layout="AB"), start=[1], shape=[2]),
     "fn.slice: 'axis_names' 'WH' are not all in the layout 'AB'"),
    (lambda: fn.slice(feed(np.zeros((4, 4)), np.zeros((4, 4))), start=[1], shape=[2], axes=[0],
                      out_of_bounds_policy="pad", fill_values=[1, 2]),
     "fn.slice: 2 'fill_values' need a channel axis 'C'"),
    (lambda: fn.pad(feed(np.zeros((2, 2)), np.zeros((2, 2))), shape=[3, 3, 3]),
     r"fn.pad: 'shape' has 3 values for 2 padded axes \(sample 0\)"),
    (lambda: fn.pad(feed(np.zeros((2, 2)), np.zeros((2, 2))), align=[0]), r"fn.pad: 'align' must be positive, got 0"),
    (lambda: fn.pad(feed(np.zeros((2, 2)), np.zeros((2, 2))), axes=[2]), "fn.pad: axis 2 in 'axes' is out of range"),
    (lambda: fn.pad(feed(np.zeros((2, 2)), np.zeros((2, 2)), layout="AB"), axis_names="C"),
     "fn.pad: 'axis_names' 'C' are not all in the layout 'AB'"),
    (lambda: fn.io.file.read(feed(np.zeros(3, np.float32), np.zeros(3, np.float32))),
     r"fn.io.file.read: sample 0 must hold a file name as 1-D uint8 bytes, got float32 of shape \[3\]"),
    (lambda: fn.python_function(feed(np.zeros(2), np.zeros(2)), function=lambda a: a, num_outputs=2,
                                output_layouts=["A", "B", "C"]),
     "fn.python_function: 'output_layouts' has 3 entries for 2 outputs"),
]

PYTHON_ERRORS = [
    (lambda x: fn.python_function(x, function=lambda a: 5), "fn.python_function: the function returned int for "
                                                             "sample 0 of output 0; expected a NumPy array"),
    (lambda x: fn.python_function(x, function=lambda a: (a, a, a), num_outputs=2),
     "fn.python_function: the function returned 3 values for sample 0; expected a tuple of num_outputs=2"),
    (lambda x: fn.python_function(x, function=lambda b: b[:1], batch_processing=True),
     "fn.python_function: output 0 of the function must be a list of 2 samples"),
    (lambda x: fn.dl_tensor_python_function(x, function=lambda b: [1, 2]),
     "fn.dl_tensor_python_function: the function returned int for sample 0 of output 0; expected a DLPack capsule"),
]


@pytest.mark.parametrize("make,message", PYTHON_ERRORS, ids=[str(i) for i in range(len(PYTHON_ERRORS))])
def test_python_function_results_are_checked(make, message):
    with pytest.raises(TypeError, match=message):
        run(lambda: make(feed(np.zeros(2), np.ones(2))))


def test_python_function_without_outputs_still_runs():
    seen = []

    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        x = feed(np.zeros(2), np.ones(2))
        fn.python_function(x, function=lambda a: seen.append(float(a.sum())), num_outputs=0)
        return x

    p = pipe()
    p.run()
    p.run()
    p.close()
    assert seen == [0.0, 2.0, 0.0, 2.0]


@pytest.mark.parametrize("make,message", ERRORS, ids=[str(i) for i in range(len(ERRORS))])
def test_bad_arguments_raise_naming_the_operator(make, message):
    with pytest.raises(OpArgumentError, match=message):
        run(make)


@pytest.mark.parametrize("make", [
    lambda x: fn.cast_like(x, fn.constant(idata=[0], dtype=types.UINT8)),
    lambda x: fn.copy(x),
    lambda x: fn.cat(x, x, axis=1),
    lambda x: fn.stack(x, x, axis=-1, axis_name="Z"),
    lambda x: fn.expand_dims(x, axes=[0, 2], new_axis_names="XY"),
    lambda x: fn.squeeze(fn.expand_dims(x, axes=[1]), axes=[1]),
    lambda x: fn.squeeze(fn.expand_dims(x, axes=[1], new_axis_names="X"), axis_names="X"),
])
def test_device_placement_gives_the_host_values_and_layout(make):
    data = [np.array([[-3.5, 2.5], [300.2, 0.49]], np.float32), np.array([[7.0, -0.5], [1e9, 254.5]], np.float32)]

    @pipeline_def(batch_size=2, num_threads=1, device_id=0, seed=7, prefetch_queue_depth=1)
    def pipe():
        return make(feed(*data, layout="AB")), make(feed(*data, layout="AB").gpu())

    p = pipe()
    host, device = p.run()
    p.close()
    assert host.layout() == device.layout()
    for i in range(2):
        a, b = np.asarray(host.at(i)), np.asarray(device.as_cpu().at(i))
        assert a.dtype == b.dtype and np.array_equal(a, b)


def test_constant_on_the_device():
    (out,) = run(lambda: fn.constant(fdata=[1.0, 2.0], device="gpu"), device_id=0)
    assert [o.tolist() for o in out] == [[1.0, 2.0], [1.0, 2.0]]


def test_permute_batch_moves_the_source_info_with_the_samples(tmp_path):
    for k in range(3):
        (tmp_path / f"{k}.bin").write_bytes(bytes([k]))
    files = [str(tmp_path / f"{k}.bin") for k in range(3)]

    @pipeline_def(batch_size=3, num_threads=1, device_id=None, seed=7)
    def pipe():
        data, _ = fn.readers.file(files=files)
        moved = fn.permute_batch(data, indices=[2, 0, 0])
        return moved, fn.get_property(moved, key="source_info")

    p = pipe()
    moved, info = p.run()
    p.close()
    assert [int(moved.at(i)[0]) for i in range(3)] == [2, 0, 0]
    assert [bytes(info.at(i)).decode() for i in range(3)] == [files[2], files[0], files[0]]


def test_batch_permutation_is_deterministic_and_resumes():
    def make(**kwargs):
        @pipeline_def(batch_size=6, num_threads=1, device_id=None, seed=11, enable_checkpointing=True, **kwargs)
        def pipe():
            return fn.batch_permutation(no_fixed_points=True)

        return pipe()

    def batches(p, count):
        return [np.asarray(p.run()[0].as_array()).tolist() for _ in range(count)]

    first = make()
    head = batches(first, 3)
    checkpoint = first.checkpoint()
    tail = batches(first, 2)
    assert batches(make(), 3) == head
    assert batches(make(checkpoint=checkpoint), 2) == tail
    assert len({tuple(r) for r in head + tail}) > 1


def test_permute_batch_takes_one_index_per_sample():
    with pytest.raises(ValueError, match="fn.permute_batch: argument input 'indices' must have samples of shape"):
        run(lambda: fn.permute_batch(feed(np.zeros(6), np.zeros(6)), indices=feed([0, 1], [1, 0])))


@pytest.mark.parametrize("make", [
    lambda **kw: fn.random.coin_flip(probability=0.3, shape=[50], **kw),
    lambda **kw: fn.random.uniform(range=[2.0, 3.0], shape=[50], **kw),
    lambda **kw: fn.random.normal(mean=1.0, shape=[50], **kw),
])
def test_random_operators_run_on_the_device_with_the_host_values(make):
    @pipeline_def(batch_size=3, num_threads=1, device_id=0, seed=7)
    def pipe():
        return make(seed=5), make(seed=5, device="gpu")

    p = pipe()
    host, device = p.run()
    p.close()
    assert type(device).__name__ == "TensorListGPU"
    assert np.array_equal(host.as_array(), np.asarray(device.as_cpu().as_array()))


def test_beta_is_deterministic_and_follows_alpha_and_beta_per_sample():
    alphas = [np.float32(a) for a in (0.5, 2.0, 8.0)]

    @pipeline_def(batch_size=3, num_threads=1, device_id=None, seed=7)
    def pipe():
        return fn.random.beta(alpha=feed(*alphas), beta=2.0, shape=[4000])

    first, second = pipe().run()[0], pipe().run()[0]
    means = [float(np.asarray(first.at(i)).mean()) for i in range(3)]
    assert np.array_equal(first.as_array(), second.as_array())
    assert np.allclose(means, [a / (a + 2.0) for a in (0.5, 2.0, 8.0)], atol=0.02)
    assert all(((np.asarray(first.at(i)) >= 0) & (np.asarray(first.at(i)) <= 1)).all() for i in range(3))


def test_file_read_names_the_missing_file(tmp_path):
    missing = str(tmp_path / "missing.bin")
    (tmp_path / "there.bin").write_bytes(b"abc")
    names = [np.frombuffer(str(tmp_path / "there.bin").encode(), np.uint8), np.frombuffer(missing.encode(), np.uint8)]
    with pytest.raises(FileNotFoundError, match=f"fn.io.file.read: sample 1: cannot read '{missing}'"):
        run(lambda: fn.io.file.read(feed(*names)))


def test_peek_image_shape_names_the_bad_sample(flowers_root):
    import pathlib

    photo = np.fromfile(sorted(pathlib.Path(flowers_root).rglob("*.jpg"))[0], np.uint8)
    with pytest.raises(Exception, match="fn.peek_image_shape: sample 1: not a decodable image"):
        run(lambda: fn.peek_image_shape(feed(photo, np.frombuffer(b"hello world", np.uint8))))


@pytest.mark.parametrize("make,message", [
    (lambda x: fn.decoders.image_crop(x, crop=(1000, 120)),
     r"fn.decoders.image_crop: sample 0: the window rows -\d+..\d+, columns \d+..\d+ is not inside the"),
    (lambda x: fn.decoders.image_crop(x, crop_h=10), "fn.decoders.image_crop: `crop_w` and `crop_h` arguments must be"),
    (lambda x: fn.decoders.image_slice(x, start=[-10, 20], shape=[50, 60], axes=[0, 1]),
     "fn.decoders.image_slice: 'sample 0': Slice can't be placed out of bounds"),
])
def test_window_decoders_refuse_windows_outside_the_image(flowers_root, make, message):
    import pathlib

    photos = [np.fromfile(p, np.uint8) for p in sorted(pathlib.Path(flowers_root).rglob("*.jpg"))[:2]]
    with pytest.raises((OpArgumentError, ValueError), match=message):
        run(lambda: make(feed(*photos)))
