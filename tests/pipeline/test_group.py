"""Pipelines of one definition computed in rounds (``jaxdali.pipeline.group``): one group for an
iterator's pipelines, every shard's batches equal to its pipeline run alone (random draws
included, whatever each pipeline's seed), exact resume, and errors that name their file."""

from __future__ import annotations

import pathlib
import shutil

import numpy as np
import pytest

import jax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from jaxdali import fn, pipeline_def, types
from jaxdali.ops.decoders import ImageDecodeError
from jaxdali.pipeline.group import GroupMember
from jaxdali.pipeline.pipeline import share_host_threads
from jaxdali.plugin.jax import data_iterator

needs8 = pytest.mark.skipif(len(jax.devices()) < 8, reason="needs XLA_FLAGS=--xla_force_host_platform_device_count=8")


def _graph(root, shard_id=0, num_shards=1):
    """A training graph whose operators after the sources are all row_wise (random crops and flips)."""
    jpegs, labels = fn.readers.file(file_root=root, random_shuffle=True, shard_id=shard_id, num_shards=num_shards,
                                    name="Reader")
    images = fn.decoders.image_random_crop(jpegs, output_type=types.RGB, random_area=[0.3, 1.0])
    images = fn.resize(images, resize_x=12, resize_y=10)
    images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, mean=[100.0, 110.0, 120.0], std=[50.0, 60.0, 70.0],
                                      mirror=fn.random.coin_flip(probability=0.5))
    return images, labels, fn.random.uniform(range=(0.0, 1.0))


def _alone(root, shard_id, num_shards, seed, batch_size):
    return pipeline_def(_graph, batch_size=batch_size, num_threads=1, device_id=None, seed=seed)(
        root=root, shard_id=shard_id, num_shards=num_shards)


def _shards_alone(root, seed, steps, shards=8, batch_size=4):
    """Per step: each output, the shards' batches of their own pipelines concatenated."""
    pipes = [_alone(root, k, shards, seed, batch_size) for k in range(shards)]
    try:
        out = []
        for _ in range(steps):
            runs = [pipe.run() for pipe in pipes]
            out.append([np.concatenate([np.asarray(r[j].as_array()) for r in runs]) for j in range(3)])
        return out
    finally:
        for pipe in pipes:
            pipe.close()


def _loader():
    sharding = NamedSharding(Mesh(jax.devices(), ("batch",)), P("batch"))
    return data_iterator(_graph, output_map=["images", "labels", "u"], reader_name="Reader", sharding=sharding)


def _take(it, steps):
    return [[np.asarray(b[k]) for k in ("images", "labels", "u")] for b in (next(it) for _ in range(steps))]


@needs8
def test_data_iterator_over_8_devices_runs_one_group_and_each_shard_equals_its_pipeline_alone(digits_root):
    it = _loader()(root=digits_root, batch_size=32, num_threads=2, seed=5)
    members = [pipe._prefetcher for pipe in it._pipes]
    assert all(isinstance(m, GroupMember) for m in members)
    assert len({id(m._group) for m in members}) == 1
    got = _take(it, 3)
    assert members[0].group.fallbacks == 0  # the shared steps ran shared
    expected = _shards_alone(digits_root, seed=5, steps=3)
    for step, (g, e) in enumerate(zip(got, expected)):
        for j in range(3):
            np.testing.assert_array_equal(g[j], e[j], err_msg=f"step {step}, output {j}")
    it.close()


def _gpu_graph(root, shard_id=0, num_shards=1):
    """``_graph`` written for a GPU: a mixed decoder, then "gpu" operators."""
    jpegs, labels = fn.readers.file(file_root=root, random_shuffle=True, shard_id=shard_id, num_shards=num_shards,
                                    name="Reader")
    images = fn.decoders.image_random_crop(jpegs, device="mixed", output_type=types.RGB, random_area=[0.3, 1.0])
    images = fn.resize(images, resize_x=12, resize_y=10)
    images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, mean=[100.0, 110.0, 120.0], std=[50.0, 60.0, 70.0],
                                      mirror=fn.random.coin_flip(probability=0.5))
    return images, labels, fn.random.uniform(range=(0.0, 1.0))


@needs8
def test_a_gpu_pipeline_on_cpu_devices_shares_the_same_steps_and_values(digits_root):
    """On CPU devices the "mixed" and "gpu" operators run on the host (RunPlan.on_host): the group computes
    them together as it does the CPU-written graph's, with the same values."""
    sharding = NamedSharding(Mesh(jax.devices(), ("batch",)), P("batch"))
    runs = []
    for graph in (_gpu_graph, _graph):
        it = data_iterator(graph, output_map=["images", "labels", "u"], reader_name="Reader", sharding=sharding)(
            root=digits_root, batch_size=32, num_threads=2, seed=5)
        try:
            got = _take(it, 2)
            group = it._pipes[0]._prefetcher.group
            runs.append((got, len(group._shared), group.fallbacks))
        finally:
            it.close()
    (gpu, gpu_shared, gpu_fallbacks), (cpu, cpu_shared, _) = runs
    assert gpu_shared == cpu_shared and gpu_fallbacks == 0
    for g, c in zip(gpu, cpu):
        for a, b in zip(g, c):
            np.testing.assert_array_equal(a, b)


@needs8
def test_a_group_resumes_from_its_checkpoints_exactly(digits_root):
    kwargs = dict(root=digits_root, batch_size=16, num_threads=2, seed=9, enable_checkpointing=True)
    first = _loader()(**kwargs)
    _take(first, 2)
    checkpoints = first.checkpoints()
    expected = _take(first, 3)
    first.close()
    restored = _loader()(**kwargs, checkpoints=checkpoints)
    assert isinstance(restored._pipes[0]._prefetcher, GroupMember)
    for g, e in zip(_take(restored, 3), expected):
        for j in range(3):
            np.testing.assert_array_equal(g[j], e[j])
    restored.close()


def _assert_grouped_pipelines_equal_alone(make, seeds, steps):
    """Pipelines ``make(shard_id, seed)`` (one per seed) joined by ``share_host_threads`` and driven one
    by one with ``run()`` (so each round holds the one pipeline that asked: a partial round) must form
    a group and give, batch after batch, every sample their own pipelines give alone."""
    pipes = [make(k, seed) for k, seed in enumerate(seeds)]
    share_host_threads(pipes)
    assert all(isinstance(pipe._prefetcher, GroupMember) for pipe in pipes), "not grouped"
    alone = [make(k, seed) for k, seed in enumerate(seeds)]
    try:
        for _ in range(steps):
            for grouped, single in zip(pipes, alone):
                got, want = grouped.run(), single.run()
                assert len(got) == len(want)
                for g, e in zip(got, want):
                    g, e = g.as_cpu().samples(), e.as_cpu().samples()
                    assert len(g) == len(e)
                    for a, b in zip(g, e):
                        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    finally:
        for pipe in pipes + alone:
            pipe.close()


def test_pipelines_with_their_own_seeds_draw_their_own_numbers_when_run_one_by_one(digits_root):
    _assert_grouped_pipelines_equal_alone(lambda k, seed: _alone(digits_root, k, 2, seed, 4), (11, 12), steps=3)


@needs8
def test_a_corrupt_file_in_one_shard_raises_an_error_naming_it(digits_root, tmp_path):
    root = tmp_path / "photos"
    for label in ("0", "1"):
        (root / label).mkdir(parents=True)
        for path in sorted(pathlib.Path(digits_root, label).iterdir())[:8]:
            shutil.copy(path, root / label / path.name)
    (root / "1" / "zz_broken.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"not an image" * 10)
    with pytest.raises(ImageDecodeError, match="zz_broken.png"):  # the iterator takes the first batch at once
        with _loader()(root=str(root), batch_size=16, num_threads=2, seed=1) as it:
            for _ in range(4):
                next(it)


def _u(lo, hi):
    return fn.random.uniform(range=(lo, hi))


#: Every row_wise operator with per-sample random arguments, after a decoder (the random operators
#: themselves are row_wise too and draw the arguments).
ROW_WISE_CASES = {
    "cast": lambda x: fn.cast(x, dtype=types.FLOAT),
    "brightness_contrast": lambda x: fn.brightness_contrast(x, brightness=_u(0.5, 1.5), contrast=_u(0.5, 1.5)),
    "brightness": lambda x: fn.brightness(x, brightness=_u(0.5, 1.5)),
    "contrast": lambda x: fn.contrast(x, contrast=_u(0.5, 1.5)),
    "hue": lambda x: fn.hue(x, hue=_u(-30, 30)),
    "saturation": lambda x: fn.saturation(x, saturation=_u(0.5, 1.5)),
    "hsv": lambda x: fn.hsv(x, hue=_u(-30, 30), saturation=_u(0.5, 1.5), value=_u(0.5, 1.5)),
    "color_twist": lambda x: fn.color_twist(x, brightness=_u(0.5, 1.5), hue=_u(-20, 20)),
    "color_space_conversion": lambda x: fn.color_space_conversion(x, image_type=types.RGB, output_type=types.BGR),
    "rotate": lambda x: fn.rotate(x, angle=_u(-30, 30), fill_value=0),
    "warp_affine": lambda x: fn.warp_affine(x, matrix=fn.transforms.rotation(angle=_u(-20, 20), center=[4, 4]),
                                            fill_value=0),
    "gaussian_blur": lambda x: fn.gaussian_blur(x, sigma=_u(0.5, 1.5)),
    "random_resized_crop": lambda x: fn.random_resized_crop(x, size=(6, 7)),
    "crop": lambda x: fn.crop(x, crop=(5, 6), crop_pos_x=_u(0, 1), crop_pos_y=_u(0, 1)),
    "flip": lambda x: fn.flip(x, horizontal=fn.random.coin_flip(), vertical=fn.random.coin_flip()),
    "transpose": lambda x: fn.transpose(x, perm=[2, 0, 1]),
    "resize": lambda x: fn.resize(x, resize_shorter=_u(6, 12)),
    "normal": lambda x: x + fn.cast(fn.random.normal(shape=[3]), dtype=types.UINT8),
}


@pytest.mark.parametrize("case", sorted(ROW_WISE_CASES))
def test_every_row_wise_operator_gives_each_pipeline_its_rows_alone(case, digits_root):
    def graph(shard_id):
        jpegs, _ = fn.readers.file(file_root=digits_root, random_shuffle=True, shard_id=shard_id, num_shards=2)
        return ROW_WISE_CASES[case](fn.decoders.image(jpegs, output_type=types.RGB))

    def make(shard_id, seed):
        return pipeline_def(graph, batch_size=3, num_threads=1, device_id=None, seed=seed)(shard_id=shard_id)

    _assert_grouped_pipelines_equal_alone(make, (21, 22), steps=2)


@pytest.mark.parametrize("how", ["gpu", "mixed"])
def test_operators_after_a_transfer_or_a_mixed_decoder_stay_with_their_pipeline(how, digits_root):
    # The shared part ends where data moves to the device (.gpu(), device="mixed" decoders on a machine
    # without a CUDA decoder decode on the host and stay shared); what follows runs per pipeline.
    def graph(shard_id):
        jpegs, labels = fn.readers.file(file_root=digits_root, random_shuffle=True, shard_id=shard_id, num_shards=2)
        if how == "mixed":
            images = fn.decoders.image_random_crop(jpegs, device="mixed", output_type=types.RGB)
        else:
            images = fn.decoders.image_random_crop(jpegs, output_type=types.RGB).gpu()
        images = fn.resize(images, resize_x=8, resize_y=9)
        return fn.crop_mirror_normalize(images, dtype=types.FLOAT, mirror=fn.random.coin_flip()), labels

    def make(shard_id, seed):
        return pipeline_def(graph, batch_size=3, num_threads=1, device_id=0, seed=seed)(shard_id=shard_id)

    _assert_grouped_pipelines_equal_alone(make, (31, 32), steps=2)


def test_an_operator_that_is_not_row_wise_runs_on_each_pipelines_batch(digits_root):
    # fn.pad pads to the longest sample of its batch: each pipeline's own batch, not the round's.
    def graph(shard_id):
        jpegs, _ = fn.readers.file(file_root=digits_root, random_shuffle=True, shard_id=shard_id, num_shards=2)
        return fn.pad(fn.decoders.image_random_crop(jpegs, output_type=types.GRAY, random_area=[0.1, 1.0]))

    def make(shard_id, seed):
        return pipeline_def(graph, batch_size=3, num_threads=1, device_id=None, seed=seed)(shard_id=shard_id)

    _assert_grouped_pipelines_equal_alone(make, (41, 41), steps=3)  # the decoder is shared


def _val_graph(root, shard_id=0, num_shards=1):
    """An evaluation graph: whole decode (fed to the resize, region decoded for the crop), resize of the
    shorter side, centre crop in the device stage."""
    jpegs, labels = fn.readers.file(file_root=root, shard_id=shard_id, num_shards=num_shards, name="Reader")
    images = fn.resize(fn.decoders.image(jpegs, output_type=types.RGB), resize_shorter=14)
    return fn.crop_mirror_normalize(images, crop=(12, 12), dtype=types.FLOAT, mean=[100.0, 110.0, 120.0]), labels


@needs8
def test_an_evaluation_graph_over_8_devices_shares_its_steps_and_equals_its_pipelines_alone(digits_root):
    sharding = NamedSharding(Mesh(jax.devices(), ("batch",)), P("batch"))
    it = data_iterator(_val_graph, output_map=["images", "labels"], reader_name="Reader", sharding=sharding)(
        root=digits_root, batch_size=32, num_threads=2, seed=1)
    got = [[np.asarray(b[k]) for k in ("images", "labels")] for b in (next(it) for _ in range(2))]
    group = it._pipes[0]._prefetcher.group
    assert group.fallbacks == 0
    it.close()
    pipes = [pipeline_def(_val_graph, batch_size=4, num_threads=1, device_id=None, seed=1)(
        root=digits_root, shard_id=k, num_shards=8) for k in range(8)]
    try:
        for g in got:
            runs = [pipe.run() for pipe in pipes]
            for j in range(2):
                np.testing.assert_array_equal(g[j], np.concatenate([np.asarray(r[j].as_array()) for r in runs]))
    finally:
        for pipe in pipes:
            pipe.close()
