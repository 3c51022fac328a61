"""jaxdali.pickling: local functions, lambdas and closures survive a round trip by value."""

import math
import pickle

import numpy as np
import pytest

from jaxdali import pickling


def module_level(x):
    return x + 1


def test_local_function_with_closure_defaults_and_recursion():
    base = 10

    def fact(n, *, scale=2):
        return scale if n <= 1 else n * fact(n - 1, scale=scale)  # reaches itself through its cell

    def use(n, extra=(1, 2)):
        return fact(n) + base + sum(extra) + math.floor(np.float64(0.5)) + module_level(0)

    restored = pickling.loads(pickling.dumps(use))
    assert restored is not use
    assert restored(4) == use(4) == 4 * 3 * 2 * 2 + 10 + 3 + 0 + 1
    assert restored.__defaults__ == ((1, 2),) and restored.__qualname__ == use.__qualname__


def test_lambda_and_nested_code_read_only_their_own_globals():
    f = lambda xs: [math.sqrt(x) for x in xs]  # noqa: E731 - the comprehension's code reads 'math'
    restored = pickling.loads(pickling.dumps(f))
    assert restored([4.0, 9.0]) == [2.0, 3.0]
    assert set(restored.__globals__) <= {"math", "__builtins__"}


def test_importable_functions_stay_references_unless_marked():
    assert pickling.loads(pickling.dumps(module_level)) is module_level
    marked = pickling.pickle_by_value(lambda: 1)
    assert pickling.loads(pickling.dumps(marked))() == 1


def test_unpicklable_contents_fail_like_pickle():
    import threading

    lock = threading.Lock()
    with pytest.raises(TypeError, match="lock"):
        pickling.dumps(lambda: lock)


def test_resolve_pickler_forms():
    assert pickling.resolve_pickler(None) == (pickling, {}, {})
    assert pickling.resolve_pickler((pickle, {"protocol": 4})) == (pickle, {"protocol": 4}, {})
    with pytest.raises(ValueError, match="dumps_kwargs, loads_kwargs"):
        pickling.resolve_pickler((pickle, {}, {}, {}))
    with pytest.raises(TypeError, match="'dumps' and 'loads'"):
        pickling.resolve_pickler(42)
