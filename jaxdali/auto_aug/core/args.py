"""Which keyword arguments an augmentation's function takes, and the errors about them."""

from __future__ import annotations

import inspect
from typing import Any, Callable, Iterable, Mapping

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
_NAMED = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


class MissingArgException(Exception):
    """An augmentation was called without a keyword argument its function requires."""

    def __init__(self, message: str, augmentation: Any, missing_args: list[str]):
        super().__init__(message)
        self.augmentation = augmentation
        self.missing_args = missing_args


class UnusedArgException(Exception):
    """A keyword argument given to an automatic augmentation that none of its augmentations takes."""

    def __init__(self, message: str, unused_args: list[str]):
        super().__init__(message)
        self.unused_args = unused_args


def _extra_params(func: Callable, skip_positional: int) -> list[inspect.Parameter]:
    """``func``'s parameters after its first ``skip_positional`` positional ones, by name only."""
    params = list(inspect.signature(func).parameters.values())
    return [p for i, p in enumerate(params) if (i >= skip_positional or p.kind not in _POSITIONAL) and p.kind in _NAMED]


def num_positional_args(func: Callable) -> int:
    return sum(p.kind in _POSITIONAL for p in inspect.signature(func).parameters.values())


def accepted_kwargs(func: Callable, kwargs: Mapping[str, Any], skip_positional: int) -> dict[str, Any]:
    """The entries of ``kwargs`` that ``func`` takes by name."""
    names = {p.name for p in _extra_params(func, skip_positional)}
    return {k: v for k, v in kwargs.items() if k in names}


def missing_kwargs(func: Callable, kwargs: Mapping[str, Any], skip_positional: int) -> list[str]:
    """``func``'s required named parameters that ``kwargs`` lacks."""
    return [p.name for p in _extra_params(func, skip_positional)
            if p.default is inspect.Parameter.empty and p.name not in kwargs]


def forbid_unused_kwargs(augmentations: Iterable[Any], kwargs: Mapping[str, Any], call_name: str) -> None:
    """Raises UnusedArgException naming the ``kwargs`` that no augmentation's function takes."""
    used = {name for aug in augmentations for name in accepted_kwargs(aug.op, kwargs, 2)}
    unused = [name for name in kwargs if name not in used]
    if unused:
        noun, verb = ("kwarg", "is") if len(unused) == 1 else ("kwargs", "are")
        raise UnusedArgException(f"{call_name} got unexpected {noun} `{', '.join(unused)}`: it {verb} taken by none "
                                 "of the augmentations", unused_args=unused)
