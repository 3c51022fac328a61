"""``data_iterator``: one pipeline per device from a graph function, wrapped in an iterator."""

from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

from jaxdali.ops.readers.shared_listing import shared_listings
from jaxdali.pipeline.decorator import pipeline_def
from jaxdali.core import checkpoint as state_codec
from jaxdali.core.checkpoint import CheckpointCountError, ReshardError
from jaxdali.plugin.epoch_counter import LastBatchPolicy
from jaxdali.plugin.jax.iterator import DALIGenericIterator, default_num_threads_value

__all__ = ["data_iterator", "make_data_iterator"]

BOTH_SHARDING_AND_DEVICES_MSG = "Only one of `sharding` and `devices` arguments can be provided."  # E25
MULTIPROCESS_PMAP_MSG = (  # E28
    "Iterator compatible with pmapped JAX functions does not support running in multiprocess mode. "
    "Use `sharding` argument instead.")


def _reject_duplicates(func_name: str, kwargs: dict, names: Sequence[str]) -> None:
    for name in names:
        if name in kwargs:
            raise TypeError(f"{func_name}() got multiple values for keyword argument '{name}'")


def make_data_iterator(iterator_type: type) -> Callable:
    """The ``data_iterator`` decorator for an iterator class (the plain and the peekable one)."""

    def data_iterator(pipeline_fn: Callable | None = None, output_map: Sequence[str] = (), size: int = -1,
                      reader_name: str | None = None, auto_reset: bool | str | None = False,
                      last_batch_padded: bool = False, last_batch_policy: LastBatchPolicy = LastBatchPolicy.FILL,
                      prepare_first_batch: bool = True, sharding=None, devices: Sequence | None = None,
                      pmap_compatible: bool | None = None):
        return _decorate(iterator_type, pipeline_fn, sharding, devices, pmap_compatible,
                         dict(output_map=list(output_map), size=size, reader_name=reader_name, auto_reset=auto_reset,
                              last_batch_padded=last_batch_padded, last_batch_policy=last_batch_policy,
                              prepare_first_batch=prepare_first_batch))

    data_iterator.__doc__ = _DOC.replace("<iterator arguments>\n", _iterator_argument_docs())
    return data_iterator


def _iterator_argument_docs() -> str:
    """The ``Args`` entries of ``DALIGenericIterator`` after ``pipelines``, so that the decorator documents
    the arguments it forwards with the iterator's own words."""
    lines = DALIGenericIterator.__doc__.split("    Args:\n", 1)[1].split("\n\n", 1)[0].splitlines(keepends=True)
    first = next(i for i, line in enumerate(lines) if line.lstrip().startswith("output_map:"))
    return "".join(lines[first:]) + "\n"


_DOC = """Decorator: a graph function becomes a factory of iterators over one pipeline per device.

    The decorator takes the iterator's arguments (below); how the factory routes its own arguments
    and builds the pipelines follows them.

    Args:
      pipeline_fn: the graph function; left out when the decorator is called with arguments only.
<iterator arguments>
      devices: JAX devices for pmap-style outputs (one pipeline per device, outputs stacked along a
        leading device axis). Mutually exclusive with ``sharding``.

    Use as ``@data_iterator(output_map=[...], reader_name=..., sharding=...)`` or functionally as
    ``data_iterator(fn, output_map=[...])``. The factory's signature is
    ``factory(*args, checkpoints=None, **kwargs)``; ``kwargs`` mixes Pipeline arguments
    (``batch_size``, ``num_threads`` (default 4), ``seed``, ``prefetch_queue_depth``,
    ``enable_checkpointing``, ...) and the function's own parameters, routed by name.

    Without ``sharding``/``devices``: one pipeline (``device_id`` defaults to 0; pass ``device_id=None``
    for a CPU-only pipeline) and ``batch_size`` is its batch.

    With ``sharding`` (global ``jax.Array``s) or ``devices`` (pmap-style stacks): ``batch_size`` is the
    **global** batch; each device gets ``batch_size // device count``. One pipeline is built per
    local device that the sharding spans (per entry of ``devices``), with ``device_id`` = the
    device's local index, ``shard_id`` = its position among the spanned devices in ``jax.devices()``
    order (in ``devices``) and ``num_shards`` = the number of spanned devices, so the graph function
    must take ``shard_id`` and ``num_shards`` and pass them to its reader. ``checkpoints`` gives one
    checkpoint per device (from ``iterator.checkpoints()``). A list saved with another device count
    is accepted when the readers have a global sample order and ``pad_last_batch=True`` and there is
    no ``external_source`` (elastic resume): the new devices first share what is left of the
    interrupted epoch, each remaining sample exactly once, then continue with whole epochs on the new
    layout.

    .. note::
       Deliberate differences from DALI: shard ids are positions in ``jax.devices()``, not
       ``device.id`` (they differ in multi-process CPU runs); a global batch that the device count
       does not divide raises ValueError instead of silently dropping samples; ``device_id`` is the
       device's real local index, also for a ``devices`` subset; a sharding over a subset of the
       devices builds pipelines for that subset only; checkpoints from another device count can
       be restored (see above).

    Example::

        @data_iterator(output_map=["images", "labels"], reader_name="Reader",
                       sharding=NamedSharding(mesh, PartitionSpec("batch")))
        def loader(root, shard_id, num_shards):
            jpegs, labels = fn.readers.file(file_root=root, shard_id=shard_id, num_shards=num_shards,
                                            name="Reader")
            return fn.decoders.image(jpegs), labels

        it = loader(root="/data", batch_size=256)   # 256 = global batch
    """


def _iterator_over(pipes: list, make: Callable[[], Any]) -> Any:
    """``make()``; if it raises, the pipelines built for it are closed (the caller never sees them)."""
    try:
        return make()
    except BaseException:
        for pipe in pipes:
            pipe.close()
        raise


def _decorate(iterator_type: type, pipeline_fn, sharding, devices, pmap_compatible, iterator_args: dict):
    if sharding is not None and devices is not None:
        raise ValueError(BOTH_SHARDING_AND_DEVICES_MSG)

    def decorate(func: Callable):
        make_pipeline = pipeline_def(func)

        @functools.wraps(func)
        def create_iterator(*args: Any, checkpoints: Sequence[bytes] | None = None, **kwargs: Any):
            kwargs.setdefault("num_threads", default_num_threads_value())
            if checkpoints is not None:
                checkpoints = _checked_list(checkpoints)
            if sharding is None and devices is None:
                _reject_duplicates(func.__name__, kwargs, ("checkpoint",))
                kwargs.setdefault("device_id", 0)
                if checkpoints is not None and len(checkpoints) != 1:
                    # DALI ignores the extra entries; a list from another layout is a mistake here
                    raise CheckpointCountError(
                        f"The number of checkpoints provided ({len(checkpoints)}) should match the number of "
                        f"devices to use (1): without `sharding` or `devices` the iterator builds one pipeline")
                pipe = make_pipeline(*args, checkpoint=checkpoints[0] if checkpoints else None, **kwargs)
                return _iterator_over([pipe], lambda: iterator_type(pipe, **iterator_args,
                                                                    pmap_compatible=pmap_compatible))
            _reject_duplicates(func.__name__, kwargs, ("device_id", "shard_id", "num_shards", "checkpoint"))
            pipes = _pipelines_per_device(make_pipeline, func, args, kwargs, checkpoints)
            if sharding is not None:
                return _iterator_over(pipes, lambda: iterator_type(pipes, **iterator_args, sharding=sharding))
            return _iterator_over(pipes, lambda: iterator_type(
                pipes, **iterator_args, pmap_compatible=True if pmap_compatible is None else pmap_compatible))

        return create_iterator

    def _pipelines_per_device(make_pipeline, func, args, kwargs, checkpoints):
        import jax
        from jax.sharding import Sharding

        global_batch = kwargs.pop("batch_size")  # KeyError 'batch_size' when missing (as in DALI)
        local = jax.local_devices()
        order = {d: i for i, d in enumerate(jax.devices())}
        if devices is not None:
            if jax.local_device_count() != jax.device_count():
                raise RuntimeError(MULTIPROCESS_PMAP_MSG)
            spanned = list(devices)
        else:
            first = sharding if isinstance(sharding, Sharding) else next(iter(sharding.values()))
            spanned = sorted(first.device_set, key=lambda d: order[d])
        positions = {d: i for i, d in enumerate(spanned)}
        use = [d for d in spanned if d in local]
        num_shards = len(spanned)
        if global_batch % num_shards or global_batch < num_shards:
            raise ValueError(f"{func.__name__}: the global batch_size={global_batch} must be a positive multiple of "
                             f"the {num_shards} devices it is split over")
        elastic = checkpoints is not None and len(checkpoints) != len(use)
        if elastic:
            _check_same_run(checkpoints)

        def build(i: int, device):
            checkpoint = (checkpoints[0] if elastic else checkpoints[i]) if checkpoints else None
            return make_pipeline(*args, batch_size=global_batch // num_shards, device_id=local.index(device),
                                 shard_id=positions[device], num_shards=num_shards, checkpoint=checkpoint, **kwargs)

        pipes = [build(i, d) for i, d in enumerate(use)]
        if elastic:
            # A checkpoint list from another device count: readers with a global sample order resume
            # the unfinished epoch on this layout (DESIGN "Elastic resume"); others cannot.
            try:
                with shared_listings():
                    for pipe in pipes:
                        pipe.build()
                        if not pipe.resumed_readers():
                            raise ReshardError("the pipeline has no reader that resumes on another shard layout "
                                               "(one with pad_last_batch=True and a global sample order); its "
                                               "state is only valid on the layout it was saved on")
            except ReshardError as e:
                for pipe in pipes:
                    pipe.close()
                raise CheckpointCountError(f"The number of checkpoints provided ({len(checkpoints)}) should match "
                                           f"the number of devices to use ({len(use)}).") from e
        return pipes

    if pipeline_fn is not None:
        return decorate(pipeline_fn)
    return decorate


def _checked_list(checkpoints: Sequence[bytes]) -> list:
    """``checkpoints`` as a list; an empty one is refused (DALI starts afresh: an empty list is
    what a failed load returns, and silently restarting a resumed job hides that)."""
    if isinstance(checkpoints, (bytes, bytearray, str)):
        raise state_codec.CheckpointError("`checkpoints` must be the list that iterator.checkpoints() returns, "
                                          "not a single checkpoint")
    checkpoints = list(checkpoints)
    if not checkpoints:
        raise CheckpointCountError("`checkpoints` is an empty list: pass the list that iterator.checkpoints() "
                                   "returned, or None to start afresh")
    return checkpoints


def _check_same_run(checkpoints: list) -> None:
    """Entries of a list saved on another device count: every one must be a checkpoint of the same
    pipeline at the same iteration (only the first is restored from)."""
    docs = [state_codec.decode(c) for c in checkpoints]
    first = docs[0]
    for i, doc in enumerate(docs[1:], 1):
        if doc["fingerprint"]["graph"] != first["fingerprint"]["graph"]:
            raise state_codec.CheckpointError(f"checkpoints[{i}] was taken from another pipeline than checkpoints[0]")
        if doc["pipeline"]["runner"]["iteration"] != first["pipeline"]["runner"]["iteration"]:
            raise state_codec.CheckpointError(
                f"checkpoints[{i}] was taken at another iteration (field 'pipeline.runner.iteration': "
                f"{doc['pipeline']['runner']['iteration']}) than checkpoints[0] "
                f"({first['pipeline']['runner']['iteration']})")


data_iterator = make_data_iterator(DALIGenericIterator)

