"""Epochs that an external source ends with StopIteration, iterated with ``size=`` (issue 22).

The source ends every epoch after ``BATCHES`` batches. DALI 2.4 gives every epoch those batches again
(4, 4, 4, 4); jaxdali used to give 4, 0, 0, 0, and a ``while done < n: for b in it`` loop spun forever.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from jaxdali import fn, pipeline_def
from jaxdali.plugin.jax import DALIGenericIterator as JaxIterator
from jaxdali.plugin.pytorch import DALIGenericIterator as TorchIterator

BATCH = 2
BATCHES = 4  # per source epoch
EPOCH = BATCH * BATCHES


def _batch(value: int) -> list[np.ndarray]:
    return [np.full((2,), value, np.int32) for _ in range(BATCH)]


def _callable_source(info):
    if info.iteration >= BATCHES:
        raise StopIteration
    return _batch(info.iteration)


class _Iterable:
    def __iter__(self):
        self.i = 0
        return self

    def __next__(self):
        if self.i >= BATCHES:
            raise StopIteration
        self.i += 1
        return _batch(self.i - 1)


def _generator():
    for i in range(BATCHES):
        yield _batch(i)


SOURCES = {
    "callable": dict(source=_callable_source, batch_info=True),
    "iterable": dict(source=_Iterable(), cycle="raise"),
    "generator": dict(source=_generator, cycle="raise"),
}


def _first_values(batch) -> int:
    out = batch["x"] if isinstance(batch, dict) else batch[0]["x"]
    return int(np.asarray(out)[0, 0])


def _make_iterator(pipeline_def_, fn_, iterator_cls, source_args: dict, size: int, auto_reset: bool):
    @pipeline_def_(batch_size=BATCH, num_threads=1, device_id=None, prefetch_queue_depth=2)
    def pipe():
        return fn_.external_source(**source_args)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "set reader_name ... whenever possible" (size mode)
        return iterator_cls([pipe()], ["x"], size=size, auto_reset=auto_reset)


def _epochs(it, epochs: int, auto_reset: bool) -> list[list[int]]:
    """The first value of each batch, per epoch; ``reset()`` between epochs without auto_reset."""
    seen = []
    for _ in range(epochs):
        seen.append([_first_values(b) for b in it])
        if not auto_reset:
            it.reset()
    return seen


@pytest.mark.parametrize("iterator_cls", [JaxIterator, TorchIterator], ids=["jax", "torch"])
@pytest.mark.parametrize("kind", sorted(SOURCES))
@pytest.mark.parametrize("auto_reset", [True, False], ids=["auto_reset", "reset"])
def test_every_epoch_ended_by_the_source_repeats_its_batches(iterator_cls, kind, auto_reset):
    it = _make_iterator(pipeline_def, fn, iterator_cls, SOURCES[kind], EPOCH, auto_reset)
    try:
        assert _epochs(it, 4, auto_reset) == [list(range(BATCHES))] * 4
    finally:
        it.close()


@pytest.mark.parametrize("iterator_cls", [JaxIterator, TorchIterator], ids=["jax", "torch"])
def test_a_fixed_count_loop_over_epochs_ends(iterator_cls):
    it = _make_iterator(pipeline_def, fn, iterator_cls, SOURCES["callable"], EPOCH, True)
    done = passes = 0
    with it:
        while done < 3 * BATCHES + 1 and passes < 100:  # the cap only keeps a regression from hanging
            passes += 1
            for _ in it:
                done += 1
    assert (done, passes) == (4 * BATCHES, 4)


@pytest.mark.parametrize("iterator_cls", [JaxIterator, TorchIterator], ids=["jax", "torch"])
def test_a_source_shorter_than_size_is_an_error_not_endless_empty_epochs(iterator_cls):
    # DALI ignores the reset ("Ignoring...") and every later epoch is empty: the loop never ends.
    it = _make_iterator(pipeline_def, fn, iterator_cls, SOURCES["callable"], 100, True)
    done = passes = 0
    with it, pytest.raises(RuntimeError, match=r"ended after 8 samples of an epoch of size=100.*size=-1"):
        while done < 2 * BATCHES and passes < 100:
            passes += 1
            for _ in it:
                done += 1
    assert (done, passes) == (BATCHES, 2)


@pytest.mark.parametrize("framework", ["jax", "pytorch"])
@pytest.mark.parametrize("size", [EPOCH, EPOCH - BATCH, -1])
def test_epochs_match_dali(framework, size):
    dali = pytest.importorskip("nvidia.dali")
    import importlib

    dali_iterator = importlib.import_module(f"nvidia.dali.plugin.{framework}").DALIGenericIterator
    ours_iterator = JaxIterator if framework == "jax" else TorchIterator
    dali_it = _make_iterator(dali.pipeline_def, dali.fn, dali_iterator, SOURCES["callable"], size, True)
    ours = _make_iterator(pipeline_def, fn, ours_iterator, SOURCES["callable"], size, True)
    # With size=6 the iterator's epochs straddle the source's: [0 1 2] [3 0 1] [2 3]; then the source
    # ends before size is reached, where DALI goes on with empty epochs and jaxdali raises.
    epochs = 3
    with ours:
        assert _epochs(ours, epochs, True) == _epochs(dali_it, epochs, True)


def _checkpointed_iterator(iterator_cls, auto_reset: bool, checkpoint=None):
    @pipeline_def(batch_size=BATCH, num_threads=1, device_id=None, enable_checkpointing=True, checkpoint=checkpoint)
    def pipe():
        return fn.external_source(source=_callable_source, batch=True, batch_info=True)

    return iterator_cls(pipe(), ["x"], size=EPOCH, auto_reset=auto_reset, last_batch_padded=True)


@pytest.mark.parametrize("iterator_cls", [JaxIterator, TorchIterator], ids=["jax", "torch"])
@pytest.mark.parametrize("auto_reset", [True, False], ids=["auto_reset", "reset"])
def test_a_loop_over_an_iterator_restored_after_the_last_batch_starts_the_next_epoch(iterator_cls, auto_reset):
    # The checkpoint is taken after the epoch's last batch, before its StopIteration: a new `for` loop
    # over the original starts the next epoch, and so must one over the restored iterator (as in DALI;
    # it gave nothing here before).
    original = _checkpointed_iterator(iterator_cls, auto_reset)
    assert [_first_values(next(original)) for _ in range(BATCHES)] == list(range(BATCHES))
    restored = _checkpointed_iterator(iterator_cls, auto_reset, original.checkpoints()[0])
    assert [_first_values(b) for b in original] == [_first_values(b) for b in restored] == list(range(BATCHES))


@pytest.mark.parametrize("auto_reset", [True, False], ids=["auto_reset", "reset"])
def test_next_on_an_iterator_restored_after_the_last_batch_reports_the_epoch_end_first(auto_reset):
    # Deliberately exact (DALI hands out the next epoch's first batch): the original's next() would
    # raise StopIteration here too.
    original = _checkpointed_iterator(TorchIterator, auto_reset)
    for _ in range(BATCHES):
        next(original)
    restored = _checkpointed_iterator(TorchIterator, auto_reset, original.checkpoints()[0])
    for it in (original, restored):
        with pytest.raises(StopIteration):
            next(it)
        if not auto_reset:
            it.reset()
        assert _first_values(next(it)) == 0
