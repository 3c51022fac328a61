"""Pipeline state <-> checkpoint bytes: versioned JSON with a fingerprint of the graph.

A checkpoint is plain JSON (no pickle: loading one never executes code). It holds the pipeline
state after the last batch the consumer took (iteration counters and each stateful operator's
state), optional iterator data, and a fingerprint of the graph and its arguments. Restoring into
a pipeline whose fingerprint differs fails with an error that lists what differs.

Compatibility promise: a checkpoint restores with the same jaxdali format version (``VERSION``).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

__all__ = ["VERSION", "CheckpointError", "ReshardError", "encode", "decode", "fingerprint", "describe_differences"]

FORMAT = "jaxdali-checkpoint"
VERSION = 1


class CheckpointError(ValueError):
    """A checkpoint that cannot be restored into this pipeline; the message says why."""


class ReshardError(CheckpointError):
    """A checkpoint from another shard layout that this pipeline cannot resume from."""


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def fingerprint(max_batch_size: int, op_descriptions: list[dict], output_names: list[str]) -> dict:
    """A compact description of a graph: its overall hash plus one short hash per operator."""
    texts = [_canonical(d) for d in op_descriptions]
    ops = {d["name"]: _hash(t) for d, t in zip(op_descriptions, texts)}
    # The canonical JSON of {"ops": op_descriptions, "outputs": output_names}, with each operator
    # encoded once (a reader's argument can list a million files).
    graph = '{"ops":[' + ",".join(texts) + '],"outputs":' + _canonical(output_names) + "}"
    return {
        # The batch size is compared separately: readers can resume on another layout.
        "graph": _hash(graph),
        "batch_size": max_batch_size,
        "outputs": output_names,
        "ops": ops,
        "op_types": {d["name"]: d["op"] for d in op_descriptions},
    }


def encode(fp: dict, pipeline_state: dict, iterator_data: Any = None, extra: dict | None = None) -> bytes:
    doc = {"format": FORMAT, "version": VERSION, "fingerprint": fp, "pipeline": pipeline_state,
           "iterator": iterator_data}
    if extra:
        doc.update(extra)
    return json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()


def decode(data: bytes | str) -> dict:
    """Parses checkpoint bytes; CheckpointError for anything that is not a jaxdali checkpoint."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        try:
            text = bytes(data).decode()
        except UnicodeDecodeError:
            raise CheckpointError(
                "Pipeline checkpoint data is not a valid JSON string. Please make sure that the checkpoint "
                "was created with the same version of jaxdali (it is not UTF-8 text).") from None
    elif isinstance(data, str):
        text = data
    else:
        raise CheckpointError(f"a checkpoint must be bytes or str, got {type(data).__name__}")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise CheckpointError(
            "Pipeline checkpoint data is not a valid JSON string. Please make sure that the checkpoint was "
            f"created with the same version of jaxdali and is complete ({e.msg} at character {e.pos} of "
            f"{len(text)}).") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise CheckpointError("the data is JSON but not a jaxdali pipeline checkpoint (no 'format' marker)")
    if doc.get("version") != VERSION:
        raise CheckpointError(
            f"checkpoint format version {doc.get('version')!r} is not supported by this jaxdali "
            f"(supports version {VERSION})")
    for key in ("fingerprint", "pipeline"):
        if not isinstance(doc.get(key), dict):
            raise CheckpointError(f"checkpoint is missing its {key!r} section (truncated or edited?)")
    return doc


def describe_differences(saved: dict, current: dict) -> str:
    """Human-readable list of what differs between two fingerprints ('' when they match)."""
    if saved.get("graph") == current.get("graph"):
        return ""
    lines = []
    if saved.get("outputs") != current.get("outputs"):
        lines.append(f"outputs: in checkpoint {saved.get('outputs')}, in pipeline {current.get('outputs')}")
    s_ops, c_ops = saved.get("ops", {}), current.get("ops", {})
    s_types, c_types = saved.get("op_types", {}), current.get("op_types", {})
    for name in sorted(set(s_ops) - set(c_ops)):
        lines.append(f"operator {name!r} (fn.{s_types.get(name)}) is in the checkpoint but not in the pipeline")
    for name in sorted(set(c_ops) - set(s_ops)):
        lines.append(f"operator {name!r} (fn.{c_types.get(name)}) is in the pipeline but not in the checkpoint")
    for name in sorted(set(s_ops) & set(c_ops)):
        if s_ops[name] != c_ops[name]:
            if s_types.get(name) != c_types.get(name):
                lines.append(f"operator {name!r}: fn.{s_types.get(name)} in checkpoint, fn.{c_types.get(name)} in pipeline")
            else:
                lines.append(f"operator {name!r} (fn.{c_types.get(name)}): its arguments or inputs differ")
    if not lines:
        lines.append("the graph structure differs")
    return "\n".join("  - " + line for line in lines)
