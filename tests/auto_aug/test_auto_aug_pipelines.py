"""jaxdali.auto_aug in pipelines: per-sample choices that are reproducible and resume exactly from a
checkpoint, the errors of bad arguments, and a training pipeline through data_iterator."""

from __future__ import annotations

import numpy as np
import pytest

from jaxdali import fn, pipeline_def, types
from jaxdali.auto_aug import augmentations as a
from jaxdali.auto_aug import auto_augment, rand_augment, trivial_augment
from jaxdali.auto_aug.core import Policy, augmentation, select, signed_bin


def _photos_pipeline(flowers_root, augment, batch_size=6, **pipe_kwargs):
    @pipeline_def(batch_size=batch_size, num_threads=2, device_id=None, seed=13, **pipe_kwargs)
    def pipe():
        jpegs, labels = fn.readers.file(file_root=flowers_root, random_shuffle=True, seed=2, name="Reader")
        images = fn.resize(fn.decoders.image(jpegs), size=[48, 48])
        return augment(images), images, labels

    return pipe


def _arrays(outputs):
    return [[np.asarray(s) for s in out] for out in outputs]


def test_rand_augment_is_reproducible_and_resumes_exactly(flowers_root):
    pipe = _photos_pipeline(flowers_root, lambda x: rand_augment.rand_augment(x, n=2, m=9, seed=4),
                            enable_conditionals=True, enable_checkpointing=True)
    p = pipe()
    first = [_arrays(p.run()) for _ in range(2)]
    checkpoint = p.checkpoint()
    rest = [_arrays(p.run()) for _ in range(2)]
    p.close()
    changed = [not np.array_equal(out, img) for b in first + rest for out, img in zip(b[0], b[1])]
    assert sum(changed) >= len(changed) // 2  # most samples are augmented (identity is 1 of 14)

    again = pipe()
    for expected in first + rest:
        for got, want in zip(_arrays(again.run()), expected):
            for g, w in zip(got, want):
                np.testing.assert_array_equal(g, w)
    again.close()

    restored = pipe(checkpoint=checkpoint)
    for expected in rest:
        for got, want in zip(_arrays(restored.run()), expected):
            for g, w in zip(got, want):
                np.testing.assert_array_equal(g, w)
    restored.close()


def _run_small(body, batch_size=8, **pipe_kwargs):
    images = [np.full((6, 5, 3), 10 * k, np.uint8) for k in range(batch_size)]

    @pipeline_def(batch_size=batch_size, num_threads=1, device_id=None, seed=3, **pipe_kwargs)
    def pipe():
        return body(fn.external_source(source=lambda: images, layout="HWC"))

    p = pipe()
    try:
        return [np.asarray(s) for s in p.run()[0]], images
    finally:
        p.close()


def test_select_applies_the_chosen_augmentation_per_sample():
    ops = [a.invert, a.identity, a.solarize_add.augmentation(mag_range=(0, 110))]
    ids = np.array([0, 1, 2, 2, 1, 0, 0, 1], np.int32)

    def body(images):
        chosen = fn.external_source(source=lambda: list(ids))
        return select(ops, chosen, images, magnitude_bin=10, num_magnitude_bins=11)

    out, images = _run_small(body, enable_conditionals=True)
    expected = {0: lambda x: 255 - x, 1: lambda x: x, 2: lambda x: np.where(x < 128, x + 110, x).astype(np.uint8)}
    for o, img, k in zip(out, images, ids):
        np.testing.assert_array_equal(o, expected[k](img))


def test_custom_augmentation_with_signed_bins():
    @augmentation(mag_range=(0, 40), randomly_negate=True, mag_to_param=lambda m: np.uint8(abs(m)) if m >= 0
                  else np.uint8(0))
    def add(data, amount):
        return data + amount

    signs = np.array([0, 1] * 4, np.int32)

    def body(images):
        return add(images, magnitude_bin=signed_bin(4, random_sign=fn.external_source(source=lambda: list(signs))),
                   num_magnitude_bins=5)

    out, images = _run_small(body, enable_conditionals=True)
    for o, img, sign in zip(out, images, signs):
        np.testing.assert_array_equal(o, img + (0 if sign else 40))
    assert add.augmentation(name="plus").name == "plus" and add.augmentation(name="plus").mag_range == (0, 40)


@pytest.mark.parametrize("call", [
    lambda x: rand_augment.rand_augment(x, n=2, m=9),
    lambda x: trivial_augment.trivial_augment_wide(x),
    lambda x: auto_augment.auto_augment_image_net(x),
    lambda x: select([a.invert, a.identity], fn.random.uniform(values=[0, 1], dtype=types.INT32), x),
])
def test_automatic_augmentations_need_enable_conditionals(call):
    with pytest.raises(RuntimeError, match="enable_conditionals=True"):
        _run_small(call)


@pytest.mark.parametrize("kwargs,error,message", [
    ({"n": -1, "m": 3}, ValueError, "`n` .* non-negative integer, got -1"),
    ({"n": 1.5, "m": 3}, ValueError, "`n` .* non-negative integer"),
    ({"n": 2, "m": 31}, ValueError, r"`m` must be an integer in \[0, 30\], got 31"),
    ({"n": 2, "m": -1}, ValueError, r"`m` must be an integer in \[0, 30\]"),
    ({"n": 2, "m": 5, "num_magnitude_bins": 0}, ValueError, "`num_magnitude_bins` must be a positive integer"),
    ({"n": 2, "m": 5, "excluded": ["rotate", "blur"]}, ValueError, "'blur'.*does not contain"),
    ({"n": 2, "m": 5, "max_translate_rel": 0.5}, ValueError, "`max_translate_rel` needs the image shapes"),
])
def test_rand_augment_argument_errors(kwargs, error, message):
    with pytest.raises(error, match=message):
        _run_small(lambda x: rand_augment.rand_augment(x, **kwargs), enable_conditionals=True)


def test_other_argument_errors():
    with pytest.raises(ValueError, match="'shear_z'.*does not contain"):
        _run_small(lambda x: trivial_augment.trivial_augment_wide(x, excluded=["shear_z"]), enable_conditionals=True)
    with pytest.raises(ValueError, match="`policy_name` must be one of"):
        _run_small(lambda x: auto_augment.auto_augment(x, policy_name="cifar"), enable_conditionals=True)
    with pytest.raises(ValueError, match="has no translation, so `shape` must not be given"):
        _run_small(lambda x: auto_augment.auto_augment(x, "reduced_image_net", shape=(6, 5)),
                   enable_conditionals=True)
    with pytest.raises(ValueError, match="needs the images' HWC shape"):
        _run_small(lambda x: rand_augment.apply_rand_augment(rand_augment.get_rand_augment_suite(use_shape=True),
                                                             x, n=1, m=3), enable_conditionals=True)
    with pytest.raises(Exception, match="unexpected kwarg `colour`"):
        _run_small(lambda x: rand_augment.apply_rand_augment([a.invert], x, n=1, m=0, colour=3),
                   enable_conditionals=True)
    with pytest.raises(ValueError, match="must be an integer in"):
        Policy("bad", 11, [[(a.rotate.augmentation((0, 30)), 0.5, 11)]])
    with pytest.raises(ValueError, match="probability of `invert` must be in"):
        Policy("bad", 11, [[(a.invert, 1.5, None)]])
    with pytest.raises(TypeError, match="already is one"):
        augmentation(a.invert)


def test_rand_augment_with_shape_translates_relative_to_the_size(flowers_root):
    """Translations relative to the shape (from fn.peek_image_shape) run through the whole suite."""
    @pipeline_def(batch_size=8, num_threads=2, device_id=None, seed=1, enable_conditionals=True)
    def pipe():
        jpegs, _ = fn.readers.file(file_root=flowers_root)
        shapes = fn.peek_image_shape(jpegs)
        images = fn.decoders.image(jpegs)
        return rand_augment.rand_augment(images, n=1, m=15, shape=shapes, excluded=["identity"]), images

    p = pipe()
    out, images = p.run()
    p.close()
    for o, img in zip(out, images):
        assert np.asarray(o).shape == np.asarray(img).shape
        assert not np.array_equal(np.asarray(o), np.asarray(img))


def test_apply_auto_augment_runs_one_sub_policy_per_sample():
    """Each sample gets one sub-policy, stages in order; probability 0 stages never run."""
    posterize = a.posterize.augmentation(mag_range=(0, 4))
    with pytest.warns(UserWarning, match="probability 0"):
        policy = Policy("two", 5, [[(a.invert, 1.0, None), (posterize, 1.0, 2)],
                                   [(posterize, 1.0, 4), (a.invert, 0.0, None)]])
    images = [np.full((4, 3, 3), (37 * k + 5) % 256, np.uint8) for k in range(16)]

    @pipeline_def(batch_size=16, num_threads=1, device_id=None, seed=8, enable_conditionals=True)
    def pipe():
        x = fn.external_source(source=lambda: images, layout="HWC")
        return auto_augment.apply_auto_augment(policy, x, seed=3)

    p = pipe()
    out = [np.asarray(s) for s in p.run()[0]]
    p.close()
    first = [(255 - img) & np.uint8(0b11000000) for img in images]  # invert, then keep 2 bits
    second = [img & np.uint8(0b11110000) for img in images]  # keep 4 bits, never inverted
    took = [np.array_equal(o, f) for o, f in zip(out, first)]
    assert all(t or np.array_equal(o, s) for t, o, s in zip(took, out, second))
    assert 0 < sum(took) < len(took)  # both sub-policies drawn


def test_a_branch_no_sample_takes_runs_nothing():
    """select over more augmentations than samples leaves branches empty; their operators (which
    could not infer shapes from zero samples) do not run, and the merge keeps every sample."""
    ops = [a.shear_x, a.rotate, a.brightness, a.invert]

    def body(images):
        chosen = fn.external_source(source=lambda: [np.int32(3)] * 4)
        return select(ops, chosen, images, magnitude_bin=signed_bin(2), num_magnitude_bins=11)

    out, images = _run_small(body, batch_size=4, enable_conditionals=True)
    for o, img in zip(out, images):
        np.testing.assert_array_equal(o, 255 - img)
