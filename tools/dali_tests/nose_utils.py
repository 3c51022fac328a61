"""Stand-in for DALI's test helper module ``nose_utils``: the assertion helpers its tests import."""

from __future__ import annotations

import fnmatch
import functools
import re
import unittest

SkipTest = unittest.SkipTest


def _check_message(exc: BaseException, glob: str | None, regex: str | None) -> None:
    message = str(exc)
    if glob is not None and not fnmatch.fnmatchcase(message, f"*{glob}*"):
        raise AssertionError(f"message {message!r} does not match the pattern {glob!r}") from exc
    if regex is not None and not re.search(regex, message):
        raise AssertionError(f"message {message!r} does not match the regex {regex!r}") from exc


def assert_raises(exception, fn, *args, glob: str | None = None, regex: str | None = None, **kwargs):
    """Calls ``fn(*args, **kwargs)``; it must raise ``exception`` whose message matches."""
    try:
        fn(*args, **kwargs)
    except exception as e:
        _check_message(e, glob, regex)
        return
    raise AssertionError(f"{getattr(fn, '__name__', fn)} did not raise {exception}")


def raises(exception, glob: str | None = None, regex: str | None = None):
    """Decorator form of ``assert_raises``."""

    def decorate(fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            assert_raises(exception, fn, *args, glob=glob, regex=regex, **kwargs)

        return wrapped

    return decorate


def assert_warns(warning=Warning, fn=None, *args, glob: str | None = None, regex: str | None = None, **kwargs):
    """Calls ``fn``; it must emit ``warning`` whose message matches."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn(*args, **kwargs)
    for w in caught:
        if issubclass(w.category, warning):
            _check_message(w.message, glob, regex)
            return
    raise AssertionError(f"{getattr(fn, '__name__', fn)} did not warn {warning}")


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
