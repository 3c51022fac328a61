"""Orbax integration: save the loader's state next to the model state, restore both together.

One ``CheckpointManager.save`` stores model and loader; each process writes the checkpoints of its
own pipelines, so multi-host runs work unchanged::

    import orbax.checkpoint as ocp
    from jaxdali.plugin.jax.orbax import LoaderSave, LoaderRestore

    mngr.save(step, args=ocp.args.Composite(state=ocp.args.StandardSave(state),
                                            loader=LoaderSave(iterator)))
    restored = mngr.restore(step, args=ocp.args.Composite(
        state=ocp.args.StandardRestore(abstract_state),
        loader=LoaderRestore(make_iterator, kwargs=dict(batch_size=256))))
    state, iterator = restored.state, restored.loader

``LoaderRestore`` without a factory returns the list of checkpoints (``bytes``) instead, for
``data_iterator(...)(checkpoints=...)`` or ``Pipeline(checkpoint=...)``. Needs ``orbax-checkpoint``;
``jaxdali.plugin.jax`` does not import this module.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Callable

import orbax.checkpoint as ocp
from etils import epath

from jaxdali.core.checkpoint import CheckpointError

__all__ = ["LoaderCheckpointHandler", "LoaderSave", "LoaderRestore"]

_FORMAT = "jaxdali-loader"


def _process_file(directory: epath.Path) -> epath.Path:
    import jax

    return epath.Path(directory) / f"jaxdali_loader_process_{jax.process_index()}.json"


class LoaderCheckpointHandler(ocp.CheckpointHandler):
    """Writes and reads one JSON file per process with its iterator's ``checkpoints()``."""

    def save(self, directory: epath.Path, args: "LoaderSave") -> None:
        checkpoints = args.iterator.checkpoints() if args.iterator is not None else list(args.checkpoints)
        doc = {"format": _FORMAT, "version": 1, "checkpoints": [bytes(c).decode() for c in checkpoints]}
        path = _process_file(directory)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc))

    def restore(self, directory: epath.Path, args: "LoaderRestore | None" = None) -> Any:
        path = _process_file(directory)
        if not path.exists():
            # A process that the saving run did not have (it ran on fewer hosts). The readers of an
            # elastic loader are in lock step, so any process's state resumes it on the new layout;
            # other loaders check it as in any restore (another layout is refused with the reason).
            saved = sorted(epath.Path(directory).glob("jaxdali_loader_process_*.json"),
                           key=lambda p: (len(p.name), p.name))
            if not saved:
                raise FileNotFoundError(f"no jaxdali loader state in {directory}")
            path = saved[0]
        try:
            doc = json.loads(path.read_text())
        except (ValueError, RecursionError):
            raise CheckpointError(f"{path} is not a jaxdali loader checkpoint (not JSON)") from None
        if not isinstance(doc, dict) or doc.get("format") != _FORMAT:
            raise CheckpointError(f"{path} is not a jaxdali loader checkpoint")
        saved = doc.get("checkpoints")
        if not isinstance(saved, list) or not all(isinstance(c, str) for c in saved):
            raise CheckpointError(f"{path}: field 'checkpoints' must be a list of checkpoint strings")
        checkpoints = [c.encode() for c in saved]
        if args is None or args.factory is None:
            return checkpoints
        return args.factory(*args.args, checkpoints=checkpoints, **args.kwargs)


@ocp.args.register_with_handler(LoaderCheckpointHandler, for_save=True)
@dataclasses.dataclass
class LoaderSave(ocp.args.CheckpointArgs):
    """Save the state of ``iterator`` (anything with ``checkpoints()``), or explicit ``checkpoints``."""

    iterator: Any = None
    checkpoints: list = dataclasses.field(default_factory=list)


@ocp.args.register_with_handler(LoaderCheckpointHandler, for_restore=True)
@dataclasses.dataclass
class LoaderRestore(ocp.args.CheckpointArgs):
    """Restore: calls ``factory(*args, checkpoints=..., **kwargs)`` (e.g. a ``data_iterator`` factory)
    and returns the iterator; without a factory returns the checkpoints."""

    factory: Callable | None = None
    args: tuple = ()
    kwargs: dict = dataclasses.field(default_factory=dict)
