"""Pipeline state <-> checkpoint bytes: versioned JSON with a fingerprint of the graph.

A checkpoint is plain JSON (no pickle: loading one never executes code). It holds the pipeline
state after the last batch the consumer took (iteration counters and each stateful operator's
state), optional iterator data, and a fingerprint of the graph and its arguments. Restoring into
a pipeline whose fingerprint differs fails with an error that lists what differs, down to the
argument.

Every field is validated before it is used (type, range, and for operator states each operator's
own checks): an edited or damaged checkpoint raises ``CheckpointError`` naming the field, never a
bare ``TypeError``/``OverflowError`` and never a silent restore into other data.

Compatibility promise: a checkpoint restores with the same jaxdali format version (``VERSION``).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

__all__ = ["VERSION", "CheckpointError", "CheckpointCountError", "ReshardError", "encode", "decode", "fingerprint",
           "describe_differences", "check_int", "check_bool", "check_dict", "check_int_list"]

FORMAT = "jaxdali-checkpoint"
VERSION = 2  # 2: readers record a fingerprint of their listing


class CheckpointError(ValueError):
    """A checkpoint that cannot be restored into this pipeline; the message says why."""


class ReshardError(CheckpointError):
    """A checkpoint from another shard layout that this pipeline cannot resume from."""


class CheckpointCountError(CheckpointError, RuntimeError):
    """A list of checkpoints whose length does not match the pipelines to restore (also a
    ``RuntimeError``, the type DALI raises for a wrong count)."""


#: Containers nested deeper than this are refused (a checkpoint is at most a few levels deep).
MAX_DEPTH = 32


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_int(value: Any, field: str, minimum: int | None = 0, maximum: int | None = None) -> int:
    """``value`` as an int if it is a JSON integer in ``[minimum, maximum]``; CheckpointError naming ``field``."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise CheckpointError(f"checkpoint field {field!r} must be an integer, got {_shown(value)}")
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        bounds = f"[{minimum if minimum is not None else '-inf'}, {maximum if maximum is not None else 'inf'}]"
        raise CheckpointError(f"checkpoint field {field!r} is {value}, outside {bounds}")
    return value


def check_bool(value: Any, field: str) -> bool:
    if not isinstance(value, bool):
        raise CheckpointError(f"checkpoint field {field!r} must be true or false, got {_shown(value)}")
    return value


def check_dict(value: Any, field: str, keys: tuple[str, ...] = ()) -> dict:
    """``value`` if it is an object holding at least ``keys``; CheckpointError naming the field or key."""
    if not isinstance(value, dict):
        raise CheckpointError(f"checkpoint field {field!r} must be an object, got {_shown(value)}")
    for key in keys:
        if key not in value:
            raise CheckpointError(f"checkpoint field {field + '.' + key!r} is missing (truncated or edited?)")
    return value


def check_int_list(value: Any, field: str, length: int | None = None, minimum: int | None = 0,
                   maximum: int | None = None) -> tuple[int, ...]:
    if not isinstance(value, list):
        raise CheckpointError(f"checkpoint field {field!r} must be a list of integers, got {_shown(value)}")
    if length is not None and len(value) != length:
        raise CheckpointError(f"checkpoint field {field!r} has {len(value)} entries, expected {length}")
    return tuple(check_int(v, f"{field}[{i}]", minimum, maximum) for i, v in enumerate(value))


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def fingerprint(max_batch_size: int, op_descriptions: list[dict], output_names: list[str]) -> dict:
    """A compact description of a graph: its overall hash, one hash per operator, and a short hash
    of each operator's arguments and connections (so that a difference is reported by name)."""
    # Each argument is encoded once (a reader's argument can list a million files); the operator's
    # hash covers the full hashes of its parts, the graph's those of its operators, in order.
    parts = {d["name"]: {**{key: _hash(_canonical(d[key])) for key in ("device", "inputs", "arg_inputs")},
                         **{f"arg:{k}": _hash(_canonical(v)) for k, v in d["args"].items()}}
             for d in op_descriptions}
    ops = {d["name"]: _hash(_canonical([d["op"], d["name"], parts[d["name"]]])) for d in op_descriptions}
    return {
        # The batch size is compared separately: readers can resume on another layout.
        "graph": _hash(_canonical([[ops[d["name"]] for d in op_descriptions], output_names])),
        "batch_size": max_batch_size,
        "outputs": output_names,
        "ops": ops,
        "op_types": {d["name"]: d["op"] for d in op_descriptions},
        "op_parts": {name: {k: h[:8] for k, h in p.items()} for name, p in parts.items()},
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
        doc = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as e:
        raise CheckpointError(
            "Pipeline checkpoint data is not a valid JSON string. Please make sure that the checkpoint was "
            f"created with the same version of jaxdali and is complete ({e.msg} at character {e.pos} of "
            f"{len(text)}).") from None
    except RecursionError:
        raise CheckpointError(f"the checkpoint nests containers deeper than {MAX_DEPTH} levels") from None
    except ValueError as e:  # NaN/Infinity, or an integer with thousands of digits
        raise CheckpointError(f"the checkpoint holds a value no checkpoint has: {e}") from None
    if _depth(doc) > MAX_DEPTH:
        raise CheckpointError(f"the checkpoint nests containers deeper than {MAX_DEPTH} levels")
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise CheckpointError("the data is JSON but not a jaxdali pipeline checkpoint (no 'format' marker)")
    if doc.get("version") != VERSION:
        raise CheckpointError(
            f"checkpoint format version {doc.get('version')!r} is not supported by this jaxdali "
            f"(supports version {VERSION})")
    for key in ("fingerprint", "pipeline"):
        if not isinstance(doc.get(key), dict):
            raise CheckpointError(f"checkpoint is missing its {key!r} section (truncated or edited?)")
    _check_fingerprint(doc["fingerprint"])
    _check_pipeline(doc["pipeline"])
    return doc


#: Upper bound of every counter (iterations, positions): far beyond any run, and safe for int64.
MAX_COUNT = 2**62


def _reject_constant(name: str):
    raise ValueError(f"{name} is not a number a checkpoint can hold")


def _depth(obj: Any) -> int:
    """Nesting depth of a parsed JSON value, without recursion."""
    deepest, stack = 0, [(obj, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (dict, list)):
            deepest = max(deepest, depth)
            if depth > MAX_DEPTH:
                return depth
            stack.extend((v, depth + 1) for v in (value.values() if isinstance(value, dict) else value))
    return deepest


def _check_str_map(value: Any, field: str) -> dict:
    check_dict(value, field)
    for k, v in value.items():
        if not isinstance(v, str):
            raise CheckpointError(f"checkpoint field {field + '.' + k!r} must be a string, got {_shown(v)}")
    return value


def _check_fingerprint(fp: dict) -> None:
    check_dict(fp, "fingerprint", ("graph", "batch_size", "outputs", "ops", "op_types"))
    if not isinstance(fp["graph"], str):
        raise CheckpointError(f"checkpoint field 'fingerprint.graph' must be a string, got {_shown(fp['graph'])}")
    check_int(fp["batch_size"], "fingerprint.batch_size", 1)
    if not isinstance(fp["outputs"], list) or not all(isinstance(o, str) for o in fp["outputs"]):
        raise CheckpointError(f"checkpoint field 'fingerprint.outputs' must be a list of names, got "
                              f"{_shown(fp['outputs'])}")
    _check_str_map(fp["ops"], "fingerprint.ops")
    _check_str_map(fp["op_types"], "fingerprint.op_types")
    for name, parts in check_dict(fp.get("op_parts", {}), "fingerprint.op_parts").items():
        _check_str_map(parts, f"fingerprint.op_parts.{name}")


def _check_pipeline(pipeline: dict) -> None:
    check_dict(pipeline, "pipeline", ("seed", "runner"))
    check_int(pipeline["seed"], "pipeline.seed", 0, 2**64 - 1)
    check_bool(pipeline.get("last_iter", False), "pipeline.last_iter")
    runner = check_dict(pipeline["runner"], "pipeline.runner", ("iteration", "epoch", "iteration_in_epoch", "ops"))
    iteration = check_int(runner["iteration"], "pipeline.runner.iteration", 0, MAX_COUNT)
    check_int(runner["epoch"], "pipeline.runner.epoch", 0, MAX_COUNT)
    check_int(runner["iteration_in_epoch"], "pipeline.runner.iteration_in_epoch", 0, iteration)
    for name, state in check_dict(runner["ops"], "pipeline.runner.ops").items():
        check_dict(state, f"pipeline.runner.ops.{name}")


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
    s_parts, c_parts = saved.get("op_parts", {}), current.get("op_parts", {})
    for name in sorted(set(s_ops) & set(c_ops)):
        if s_ops[name] == c_ops[name]:
            continue
        if s_types.get(name) != c_types.get(name):
            lines.append(f"operator {name!r}: fn.{s_types.get(name)} in checkpoint, fn.{c_types.get(name)} in pipeline")
            continue
        saved_parts, parts = s_parts.get(name, {}), c_parts.get(name, {})
        differing = sorted(k for k in set(saved_parts) | set(parts) if saved_parts.get(k) != parts.get(k))
        what = ", ".join(_part_text(k) for k in differing) + (" differs" if len(differing) == 1 else " differ")
        lines.append(f"operator {name!r} (fn.{c_types.get(name)}): "
                     + (what if differing else "its arguments or inputs differ"))
    if not lines:
        lines.append("the graph structure differs")
    return "\n".join("  - " + line for line in lines)


def _part_text(key: str) -> str:
    return f"argument {key[4:]!r}" if key.startswith("arg:") else {"arg_inputs": "argument inputs"}.get(key, key)
