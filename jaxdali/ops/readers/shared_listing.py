"""One listing for the pipelines an iterator builds together (one pipeline per device).

Each of an iterator's pipelines has its own reader, and each reader lists its data set when it is
built. Over 8 devices that listed a folder of 1.28M files 8 times and kept 8 copies of its names
(about 2 GB and 15 s more than one device); on object storage it is 8 times the list requests.
While ``shared_listings()`` is active (the iterators wrap the building of their pipelines in it),
readers with the same listing arguments share one listing; outside it every reader lists for itself,
as DALI's do, so a pipeline built later sees the files as they are then.
"""

from __future__ import annotations

import contextlib
import contextvars
from typing import Any, Callable, Iterator, TypeVar

__all__ = ["shared_listings", "listing"]

T = TypeVar("T")

_SCOPE: contextvars.ContextVar[dict | None] = contextvars.ContextVar("jaxdali_shared_listings", default=None)


@contextlib.contextmanager
def shared_listings() -> Iterator[None]:
    """Readers built inside share the listings they compute with the same arguments (nested: the
    outermost scope's)."""
    token = _SCOPE.set({}) if _SCOPE.get() is None else None
    try:
        yield
    finally:
        if token is not None:
            _SCOPE.reset(token)


def listing(key: tuple, compute: Callable[[], T]) -> T:
    """``compute()``, or what it returned for an equal ``key`` earlier in the same ``shared_listings``
    scope. ``key`` must name every argument the listing depends on (lists as tuples)."""
    cache = _SCOPE.get()
    if cache is None:
        return compute()
    try:
        return cache[key]
    except KeyError:
        value = cache[key] = compute()
        return value
    except TypeError:  # an unhashable argument: no sharing
        return compute()


def frozen(value: Any) -> Any:
    """``value`` as part of a key: lists and tuples (nested) become tuples."""
    if isinstance(value, (list, tuple)):
        return tuple(frozen(v) for v in value)
    return value
