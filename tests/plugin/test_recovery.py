"""Recovery from a bad sample (issue 15 defect 4): catch the error, close, rebuild from the last
checkpoint, and end with exactly the samples of a run that never failed.

The data: real photos (two classes of ../shared/data/flowers, linked into a temporary folder) and one
corrupt JPEG among them. A training-style loop checkpoints every few steps; when the corrupt file
stops the loader, the loop closes the iterator (every thread and buffer is released), repairs the
file as an operator would, and rebuilds the iterator from its last checkpoint, rolling back the
steps taken since. The samples it trained on must equal those of a run over the repaired folder.
"""

from __future__ import annotations

import hashlib
import pathlib
import threading

import numpy as np
import pytest

from jaxdali import fn
from jaxdali.plugin.jax import data_iterator

CORRUPT_NAME = "zz_corrupt.jpg"
STEPS = 24  # a little over three epochs of 27 photos in batches of 4
CHECKPOINT_EVERY = 2


@data_iterator(output_map=["images", "labels"], reader_name="Reader", auto_reset=True)
def _loader(root):
    jpegs, labels = fn.readers.file(file_root=root, random_shuffle=True, name="Reader")
    images = fn.resize(fn.decoders.image(jpegs), size=(24, 24))
    images = fn.crop_mirror_normalize(images, mirror=fn.random.coin_flip(), mean=[0.0] * 3, std=[1.0] * 3)
    return images, labels


def _make(root: pathlib.Path, checkpoints):
    return _loader(root=str(root), batch_size=4, num_threads=2, device_id=None, seed=7,
                   enable_checkpointing=True, checkpoints=checkpoints)


def _dataset(flowers_root: str, folder: pathlib.Path) -> tuple[pathlib.Path, bytes]:
    """Two classes of 13 + 13 real photos (symlinks) plus one corrupt JPEG; returns (corrupt file, the
    good bytes that repair it)."""
    for cls in ("daisy", "tulips"):
        (folder / cls).mkdir(parents=True)
        for photo in sorted((pathlib.Path(flowers_root) / cls).glob("*.jpg"))[:13]:
            (folder / cls / photo.name).symlink_to(photo)
    good = next((pathlib.Path(flowers_root) / "roses").glob("*.jpg")).read_bytes()
    corrupt = folder / "daisy" / CORRUPT_NAME
    corrupt.write_bytes(good[: len(good) // 3])  # cut in the middle of the entropy-coded data
    return corrupt, good


def _digest(batch: dict) -> list[tuple[int, str]]:
    images, labels = np.asarray(batch["images"]), np.asarray(batch["labels"]).reshape(-1)
    return [(int(label), hashlib.sha1(image.tobytes()).hexdigest()[:12]) for label, image in zip(labels, images)]


def _train(root: pathlib.Path, repair=None) -> tuple[list, list[tuple[int, int, str]]]:
    """Steps of a training loop: the samples of every step kept, and the errors recovered from as
    (steps taken, step of the checkpoint resumed from, message)."""
    trained: list = []
    errors: list[tuple[int, int, str]] = []
    saved_step, saved = 0, None
    while len(trained) < STEPS:
        it = _make(root, saved)
        try:
            with it:
                while len(trained) < STEPS:
                    try:
                        batch = next(it)
                    except StopIteration:  # the end of an epoch (auto_reset starts the next one)
                        continue
                    trained.append(_digest(batch))
                    if len(trained) % CHECKPOINT_EVERY == 0:
                        saved_step, saved = len(trained), it.checkpoints()
        except Exception as e:  # noqa: BLE001 - the corrupt sample
            if repair is None:
                raise
            errors.append((len(trained), saved_step, str(e)))
            repair()
            del trained[saved_step:]  # the model goes back to the checkpoint too
    return trained, errors


@pytest.mark.slow
def test_a_loop_that_rebuilds_from_its_checkpoint_trains_on_exactly_the_samples_of_an_unfailed_run(
        flowers_root, tmp_path):
    corrupt, good = _dataset(flowers_root, tmp_path / "faulty")
    producers_after_close = []

    def repair():
        producers_after_close.append([t.name for t in threading.enumerate() if t.name.startswith("jaxdali-prefetch")])
        corrupt.write_bytes(good)

    trained, errors = _train(corrupt.parents[1], repair)

    clean = tmp_path / "clean"
    fixed, _ = _dataset(flowers_root, clean)
    fixed.write_bytes(good)
    reference, no_errors = _train(clean)

    assert no_errors == []
    [(failed_at, resumed_from, message)] = errors
    assert CORRUPT_NAME in message
    assert 0 < resumed_from < failed_at  # steps after the checkpoint were rolled back and redone
    assert producers_after_close == [[]]  # close() after the error stopped every producer thread
    assert trained == reference
    assert any(label == 0 for step in trained for label, _ in step)  # both classes were seen
