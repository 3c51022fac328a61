"""Operator schemas: each operator declares its DALI name, arguments, devices and outputs once.

Build-time argument checks, the ``fn.*`` function's signature and docstring, the graph fingerprint
and the contract-test table are all derived from the declaration; there is no second list.

Example::

    RESIZE = register(OpSchema(
        name="resize", impl=Resize, doc="Resizes images.",
        devices=("cpu", "gpu"),
        args=(Arg("resize_x", "float", 0.0, "Output width.", tensor=True, min=0), ...),
    ))
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import numbers
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from jaxdali.types import DALIDataType, DALIImageType, DALIInterpType, to_dali_type

__all__ = ["Arg", "OpSchema", "OpArgumentError", "REQUIRED", "register", "on_register", "registry", "COMMON_ARGS"]


class _Marker:
    def __init__(self, name: str):
        self._name = name

    def __repr__(self) -> str:
        return self._name


#: Default of an argument that must be given.
REQUIRED = _Marker("REQUIRED")


class OpArgumentError(ValueError, TypeError):
    """A bad operator argument; the message names the operator, the argument and the value."""


_KINDS = ("int", "float", "bool", "str", "ints", "floats", "strs", "dtype", "image_type", "interp_type",
          "any", "callable")


@dataclasses.dataclass(frozen=True)
class Arg:
    """One operator argument.

    Attributes:
      name: DALI's argument name.
      kind: value type: int, float, bool, str, ints, floats, strs (lists; a scalar is accepted as a
        one-element list), dtype, image_type, interp_type, callable or any.
      default: value when not given; ``REQUIRED`` when it must be given; None for "optional, unset".
      doc: one-line meaning, shown in the ``fn.*`` docstring.
      tensor: whether a ``DataNode`` may be passed (per-sample "argument input").
      min, max: inclusive bounds checked for numbers (each element for lists).
      choices: the allowed values for strings.
      hint: a DALI performance hint that is accepted and has no effect here.
      placement: describes where in a sharded run the operator sits (shard_id, num_shards) rather
        than what it computes; left out of the graph fingerprint so checkpoints can move between
        layouts (the operator checks its own layout when restoring).
    """

    name: str
    kind: str
    default: Any = None
    doc: str = ""
    tensor: bool = False
    min: float | None = None
    max: float | None = None
    choices: tuple | None = None
    hint: bool = False
    placement: bool = False

    def __post_init__(self):
        if self.kind not in _KINDS:
            raise ValueError(f"Arg {self.name!r}: unknown kind {self.kind!r}; expected one of {_KINDS}")

    def convert(self, op: str, value: Any) -> Any:
        """Checks and normalises a constant value; raises OpArgumentError naming ``op`` and the argument."""
        if value is None:
            return None
        try:
            out = _CONVERTERS[self.kind](value)
        except (TypeError, ValueError) as e:
            raise OpArgumentError(
                f"fn.{op}: argument '{self.name}' expects {_KIND_TEXT[self.kind]}, got {value!r} ({e})") from None
        self._check_range(op, out)
        if self.choices is not None and out not in self.choices:
            raise OpArgumentError(
                f"fn.{op}: argument '{self.name}' must be one of {list(self.choices)}, got {value!r}")
        return out

    def _check_range(self, op: str, out: Any) -> None:
        if self.min is None and self.max is None:
            return
        values = out if isinstance(out, tuple) else (out,)
        for v in values:
            if not isinstance(v, numbers.Number):
                continue
            if self.min is not None and v < self.min:
                raise OpArgumentError(f"fn.{op}: argument '{self.name}' must be >= {self.min}, got {out!r}")
            if self.max is not None and v > self.max:
                raise OpArgumentError(f"fn.{op}: argument '{self.name}' must be <= {self.max}, got {out!r}")


def _to_int(v: Any) -> int:
    if isinstance(v, enum.Enum):
        return int(v.value)
    if isinstance(v, (bool, np.bool_)):
        return int(v)
    if isinstance(v, (numbers.Integral, np.integer)):
        return int(v)
    if isinstance(v, (numbers.Real, np.floating)) and float(v).is_integer():
        return int(v)
    if isinstance(v, np.ndarray) and v.size == 1:
        return _to_int(v.reshape(()).item())
    raise TypeError("not an integer")


def _to_float(v: Any) -> float:
    if isinstance(v, (bool, np.bool_)):
        return float(v)
    if isinstance(v, (numbers.Real, np.integer, np.floating)):
        return float(v)
    if isinstance(v, np.ndarray) and v.size == 1:
        return float(v.reshape(()).item())
    raise TypeError("not a number")


def _to_bool(v: Any) -> bool:
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (numbers.Integral, np.integer)) and int(v) in (0, 1):
        return bool(v)
    raise TypeError("not a boolean")


def _to_str(v: Any) -> str:
    if isinstance(v, str):
        return v
    raise TypeError("not a string")


def _listify(v: Any) -> list:
    if isinstance(v, np.ndarray):
        return v.reshape(-1).tolist()
    if isinstance(v, (list, tuple)):
        return list(v)
    return [v]


def _to_dtype(v: Any) -> DALIDataType:
    return to_dali_type(v)


def _to_enum(enum_type: type) -> Callable[[Any], Any]:
    def convert(v: Any):
        if isinstance(v, enum_type):
            return v
        if isinstance(v, enum.Enum):
            raise TypeError(f"{v!r} is not a {enum_type.__name__}")
        return enum_type(_to_int(v))

    return convert


_CONVERTERS: dict[str, Callable[[Any], Any]] = {
    "int": _to_int,
    "float": _to_float,
    "bool": _to_bool,
    "str": _to_str,
    "ints": lambda v: tuple(_to_int(x) for x in _listify(v)),
    "floats": lambda v: tuple(_to_float(x) for x in _listify(v)),
    "strs": lambda v: tuple(_to_str(x) for x in _listify(v)),
    "dtype": _to_dtype,
    "image_type": _to_enum(DALIImageType),
    "interp_type": _to_enum(DALIInterpType),
    "any": lambda v: v,
    "callable": lambda v: v if callable(v) else (_ for _ in ()).throw(TypeError("not callable")),
}
_KIND_TEXT = {
    "int": "an integer", "float": "a number", "bool": "a boolean", "str": "a string",
    "ints": "an integer or a list of integers", "floats": "a number or a list of numbers",
    "strs": "a string or a list of strings", "dtype": "a DALIDataType or NumPy dtype",
    "image_type": "a DALIImageType", "interp_type": "a DALIInterpType", "any": "any value",
    "callable": "a callable",
}

#: Arguments every operator accepts (as in DALI).
COMMON_ARGS: tuple[Arg, ...] = (
    Arg("seed", "int", None, "Random seed; derived from the pipeline seed and the operator's position when unset."),
    Arg("preserve", "bool", False, "Keep the operator even if its outputs are unused."),
    Arg("bytes_per_sample_hint", "ints", None, "Output buffer size hint.", hint=True),
)


@dataclasses.dataclass(frozen=True)
class OpSchema:
    """Declaration of one operator.

    Attributes:
      name: the ``fn`` path without ``fn.``, e.g. ``"readers.file"``.
      impl: the runtime class (``jaxdali.ops.operator.Operator`` subclass), built once per pipeline.
      doc: summary for the docstring.
      args: the operator's own arguments (``COMMON_ARGS`` are added automatically).
      devices: the placements it supports, among "cpu", "mixed" and "gpu".
      min_inputs, max_inputs: number of positional (data) inputs.
      num_outputs: a number, or a function of the converted arguments (or of the arguments and the
        number of data inputs, when it takes two parameters).
      rejected: DALI argument names that are deliberately not supported, each with the reason and
        the alternative.
      is_source: produces the batch (readers, external_source): it decides the batch size.
      output_device: where outputs live when that is not implied by the placement ("cpu" for
        the device-to-host copy).
      output_names: for operators whose ``fn`` function returns a dict of outputs (as
        ``fn.readers.tfrecord`` does), the output names, as a function of the call's arguments.
      seeded: takes a place in the pipeline's sequence of operator seeds. False for the implicit
        copies (``node.gpu()``, ``node.cpu()``), so moving data between host and device does not
        change the random streams of the operators defined after the move.
    """

    name: str
    impl: Any
    doc: str
    args: tuple[Arg, ...] = ()
    devices: tuple[str, ...] = ("cpu",)
    min_inputs: int = 1
    max_inputs: int = 1
    num_outputs: int | Callable[..., int] = 1
    rejected: Mapping[str, str] = dataclasses.field(default_factory=dict)
    is_source: bool = False
    output_device: str | None = None
    output_names: Callable[[Mapping[str, Any]], Sequence[str]] | None = None
    seeded: bool = True

    def __post_init__(self):
        names = [a.name for a in self.all_args]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"OpSchema {self.name!r}: duplicated arguments {sorted(dup)}")

    @property
    def all_args(self) -> tuple[Arg, ...]:
        own = {a.name for a in self.args}
        return self.args + tuple(a for a in COMMON_ARGS if a.name not in own)

    @property
    def arg_map(self) -> dict[str, Arg]:
        return {a.name: a for a in self.all_args}

    def outputs_for(self, args: Mapping[str, Any], num_inputs: int = 0) -> int:
        if not callable(self.num_outputs):
            return self.num_outputs
        if len(inspect.signature(self.num_outputs).parameters) == 2:
            return self.num_outputs(args, num_inputs)
        return self.num_outputs(args)

    def docstring(self) -> str:
        lines = [self.doc.strip(), "", f"Supported devices: {', '.join(self.devices)}.", "", "Args:"]
        for a in self.all_args:
            default = "required" if a.default is REQUIRED else f"default {a.default!r}"
            extra = "; per-sample DataNode accepted" if a.tensor else ""
            extra += "; accepted and ignored (performance hint)" if a.hint else ""
            lines.append(f"  {a.name} ({a.kind}, {default}{extra}): {a.doc}")
        if self.rejected:
            lines += ["", "Not supported:"]
            lines += [f"  {k}: {v}" for k, v in self.rejected.items()]
        return "\n".join(lines)


_REGISTRY: dict[str, OpSchema] = {}
#: Called with each schema registered after them (``jaxdali.fn`` publishes late registrations).
_LISTENERS: list[Callable[[OpSchema], None]] = []


def register(schema: OpSchema) -> OpSchema:
    """Adds an operator to the ``fn`` namespace (``fn.<schema.name>``, also after ``jaxdali.fn`` was
    imported: this is how users add their own operators); returns the schema."""
    if schema.name in _REGISTRY:
        raise ValueError(f"operator {schema.name!r} registered twice: fn.{schema.name} already exists; "
                         "give your operator another name")
    _REGISTRY[schema.name] = schema
    for listener in _LISTENERS:
        listener(schema)
    return schema


def on_register(listener: Callable[[OpSchema], None]) -> None:
    """Calls ``listener(schema)`` for every operator registered from now on."""
    _LISTENERS.append(listener)


def registry() -> Mapping[str, OpSchema]:
    """All registered operator schemas by name (importing ``jaxdali.ops`` fills it)."""
    return _REGISTRY
