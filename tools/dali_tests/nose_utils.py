"""Stand-in for DALI's test helper module ``nose_utils``: the assertion helpers its tests import."""

from __future__ import annotations

import contextlib
import fnmatch
import functools
import re
import unittest
import warnings

SkipTest = unittest.SkipTest


def _check_message(exc, glob: str | None, regex: str | None) -> None:
    message = str(exc)
    if glob is not None and not fnmatch.fnmatchcase(message, f"*{glob}*"):
        raise AssertionError(f"message {message!r} does not match the pattern {glob!r}")
    if regex is not None and not re.search(regex, message):
        raise AssertionError(f"message {message!r} does not match the regex {regex!r}")


@contextlib.contextmanager
def _raising(exception, glob, regex):
    try:
        yield
    except exception as e:
        _check_message(e, glob, regex)
        return
    raise AssertionError(f"{exception} was not raised")


@contextlib.contextmanager
def _warning(category, glob, regex):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    for w in caught:
        if issubclass(w.category, category):
            _check_message(w.message, glob, regex)
            return
    raise AssertionError(f"no {category.__name__} was emitted; got {[str(w.message) for w in caught]}")


def assert_raises(exception, fn=None, *args, glob: str | None = None, regex: str | None = None, **kwargs):
    """``fn(*args, **kwargs)`` must raise ``exception`` with a matching message; without ``fn``, a
    context manager that checks its block the same way."""
    if fn is None:
        return _raising(exception, glob, regex)
    with _raising(exception, glob, regex):
        fn(*args, **kwargs)


def raises(exception, glob: str | None = None, regex: str | None = None):
    """Decorator form of ``assert_raises``."""

    def decorate(fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            assert_raises(exception, fn, *args, glob=glob, regex=regex, **kwargs)

        return wrapped

    return decorate


def assert_warns(warning=Warning, fn=None, *args, glob: str | None = None, regex: str | None = None, **kwargs):
    """``fn`` must emit ``warning`` with a matching message; without ``fn``, a context manager."""
    if fn is None:
        return _warning(warning, glob, regex)
    with _warning(warning, glob, regex):
        fn(*args, **kwargs)


def assert_equals(a, b):
    assert a == b, f"{a!r} != {b!r}"


def attr(*tags):
    """Marks a test with tags (kept on the function, as nose's ``attr`` does)."""

    def decorate(fn):
        fn.tags = tags
        return fn

    return decorate


def nottest(fn):
    fn.__test__ = False
    return fn
