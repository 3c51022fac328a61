"""enable_conditionals=True: per-sample `if`/`elif`/`else`, logical operators and conditional expressions."""

from __future__ import annotations

import numpy as np
import pytest

from jaxdali import fn, pipeline_def, types


def index(info):
    return np.array(info.idx_in_batch, np.int32)


def run(body, batch_size=6, **kwargs):
    @pipeline_def(batch_size=batch_size, num_threads=1, device_id=None, enable_conditionals=True, seed=3, **kwargs)
    def pipe():
        return body(fn.external_source(index, batch=False))

    p = pipe()
    try:
        out = p.run()
        return [[np.asarray(t.at(i)).tolist() for i in range(len(t))] for t in out]
    finally:
        p.close()


def test_if_elif_else_and_branch_local_variables():
    def body(x):
        base = x + 1000
        if x < 2:
            y = x
        elif x < 4:
            tmp = x * 10  # defined in one branch only, never used after the `if`
            y = tmp
        else:
            y, z = x * 100, x  # tuple targets
            y += 1  # augmented assignment
        return y, base

    assert run(body) == [[0, 1, 20, 30, 401, 501], [1000, 1001, 1002, 1003, 1004, 1005]]


def test_if_without_else_keeps_the_previous_value_elsewhere():
    def body(x):
        y = x
        if x % 2 == 0:
            y = x * 10
        return y

    assert run(body) == [[0, 1, 20, 3, 40, 5]]


def test_python_values_that_differ_become_per_sample_constants():
    def body(x):
        scale = 1
        if x < 3:
            scale = 2
        return x * scale

    assert run(body) == [[0, 2, 4, 3, 4, 5]]


def test_logical_operators_and_conditional_expression():
    def body(x):
        both = x > 0 and x < 3
        either = x < 1 or x > 4
        negated = not (x < 3)
        chosen = x * 10 if x > 3 else -x
        return both, either, negated, chosen

    assert run(body) == [[False, True, True, False, False, False], [True, False, False, False, False, True],
                         [False, False, False, True, True, True], [0, -1, -2, -3, 40, 50]]


def test_and_computes_its_right_side_only_for_the_samples_that_need_it():
    def body(x):
        # 10 // x fails for x == 0 on the host, but `and` never evaluates it there.
        return x > 0 and 10 // x > 2

    assert run(body) == [[False, True, True, True, False, False]]


def test_python_conditions_take_the_ordinary_path():
    def body(x, flag=True):
        if flag and len([1, 2]) == 2:
            y = x + 1
        else:
            y = x
        return y

    assert run(body) == [[1, 2, 3, 4, 5, 6]]


def helper(x):
    """A module-level function called from the pipeline: converted too."""
    if x >= 3:
        return_value = x - 3
    else:
        return_value = x + 3
    return return_value


def test_called_user_functions_are_converted():
    def body(x):
        return helper(x)

    assert run(body) == [[3, 4, 5, 0, 1, 2]]


def test_random_operators_in_branches_get_the_branch_batch_and_resume_exactly():
    @pipeline_def(batch_size=5, num_threads=1, device_id=None, enable_conditionals=True, seed=11,
                  enable_checkpointing=True)
    def pipe():
        x = fn.external_source(index, batch=False)
        if fn.random.coin_flip(probability=0.5) == 1:
            y = fn.random.uniform(range=[0.0, 1.0])
        else:
            y = fn.random.uniform(range=[5.0, 6.0]) + fn.cast(x, dtype=types.FLOAT) * 0
        return y

    p = pipe()
    first = p.run()[0].as_array()
    checkpoint = p.checkpoint()
    rest = [p.run()[0].as_array() for _ in range(3)]
    p.close()
    assert first.shape == (5,) and all(0 <= v < 1 or 5 <= v < 6 for v in first)
    assert {v < 1 for b in [first, *rest] for v in b} == {True, False}  # both branches taken
    restored = pipe(checkpoint=checkpoint)
    again = [restored.run()[0].as_array() for _ in range(3)]
    restored.close()
    for a, b in zip(rest, again):
        np.testing.assert_array_equal(a, b)


def test_images_on_the_device_branch_per_sample(flowers_root):
    @pipeline_def(batch_size=4, num_threads=1, device_id=0, enable_conditionals=True, seed=2)
    def pipe():
        jpegs, labels = fn.readers.file(file_root=flowers_root)
        images = fn.resize(fn.decoders.image(jpegs), size=(32, 48)).gpu()
        plain = images
        if fn.external_source(lambda info: np.array(info.idx_in_batch % 2 == 0), batch=False):
            images = fn.flip(images, horizontal=1)
        return images, plain

    p = pipe()
    images, plain = (np.asarray(t.as_cpu().as_array()) for t in p.run())
    p.close()
    np.testing.assert_array_equal(images[0::2], plain[0::2, :, ::-1])
    np.testing.assert_array_equal(images[1::2], plain[1::2])


def test_errors_name_the_variable_and_the_if():
    def one_branch(x):
        if x < 3:
            y = x
        return y

    with pytest.raises(NameError, match=r"variable 'y' is assigned in only one branch of the `if` at .*"
                                        r"test_conditionals.py:\d+"):
        run(one_branch)

    def types_differ(x):
        if x < 3:
            y = fn.cast(x, dtype=types.FLOAT)
        else:
            y = x
        return y

    with pytest.raises(TypeError, match=r"variable 'y' is float32 in the `if` branch and int32 in the `else` branch"):
        run(types_differ)

    def vector_condition(x):
        if fn.cast(x, dtype=types.FLOAT) * np.ones(2, np.float32) > 1:
            y = x
        else:
            y = -x
        return y

    with pytest.raises(ValueError, match=r"the condition must be a scalar per sample .* sample 0 has shape \(2,\)"):
        run(vector_condition)

    def returns_early(x):
        if x < 3:
            return x
        return -x

    with pytest.raises(NotImplementedError, match="returns, breaks or continues"):
        run(returns_early)


def test_without_enable_conditionals_the_message_says_how():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        x = fn.external_source(index, batch=False)
        if x > 0:
            x = x + 1
        return x

    with pytest.raises(TypeError, match=r"enable_conditionals=True"):
        pipe()
