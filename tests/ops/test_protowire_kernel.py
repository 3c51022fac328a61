"""The compiled protobuf parser (``_protowire_kernel.c``) builds the NumPy parser's field table, row for row,
on valid and malformed batches; a malformed batch raises the NumPy parser's error naming the same record."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from jaxdali import config
from jaxdali.ops.readers import protowire
from jaxdali.ops.readers.protowire import ProtoError

COLUMNS = ("msg", "number", "wire", "value", "start", "length")


@pytest.fixture(autouse=True)
def compiled_parser():
    if protowire.parser_status()[0] != "compiled kernel":
        pytest.skip(f"compiled parser not in use: {protowire.parser_status()[1]}")


def _fields():
    """One encoded field of any wire type, with varints of every length."""
    number = st.integers(1, 2 ** 29 - 1)
    varint = st.integers(0, 2 ** 64 - 1)
    return st.one_of(
        st.builds(lambda k, v: protowire.encode_varint(k << 3) + protowire.encode_varint(v), number, varint),
        st.builds(lambda k, b: protowire.encode_field(k, b), number, st.binary(max_size=300)),
        st.builds(lambda k, b: protowire.encode_varint(k << 3 | 5) + b, number, st.binary(min_size=4, max_size=4)),
        st.builds(lambda k, b: protowire.encode_varint(k << 3 | 1) + b, number, st.binary(min_size=8, max_size=8)))


messages = st.lists(st.lists(_fields(), max_size=6).map(b"".join), max_size=12)


@contextlib.contextmanager
def _kernel_disabled(disabled: bool):
    before = config.get("disable_kernel")
    config.update("disable_kernel", disabled)
    try:
        yield
    finally:
        config.update("disable_kernel", before)


def _both(records):
    """(compiled, numpy) parse of ``records``, or the ProtoError each raised."""
    out = []
    for disabled in (False, True):
        with _kernel_disabled(disabled):
            try:
                out.append(protowire.parse_batch(*protowire.join_records(records)))
            except ProtoError as e:
                out.append(e)
    return out


def _assert_same_table(compiled, numpy):
    assert compiled.n == numpy.n
    for column in COLUMNS:
        a, b = getattr(compiled, column), getattr(numpy, column)
        assert a.dtype == b.dtype, column
        np.testing.assert_array_equal(a, b, err_msg=column)


@settings(max_examples=100, deadline=None)
@given(messages)
def test_valid_batches_give_the_numpy_table(records):
    compiled, numpy = _both(records)
    _assert_same_table(compiled, numpy)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=24), min_size=1, max_size=8), messages)
def test_random_bytes_parse_or_fail_alike(garbage, valid):
    records = valid + garbage  # malformed or not: random bytes are often valid wire format
    compiled, numpy = _both(records)
    if isinstance(numpy, ProtoError):
        assert isinstance(compiled, ProtoError)
        assert (str(compiled), compiled.message) == (str(numpy), numpy.message)
    else:
        _assert_same_table(compiled, numpy)


def test_messages_with_more_fields_than_the_first_guess():
    records = [b"".join(protowire.encode_field(3, i) for i in range(n)) for n in (0, 100, 7, 1000)]
    compiled, numpy = _both(records)
    _assert_same_table(compiled, numpy)
    assert len(compiled.msg) == 1107


@pytest.mark.parametrize("disabled", [False, True])
def test_a_length_of_2_to_the_63_is_an_error_not_a_loop(disabled):
    huge = b"\x0a" + protowire.encode_varint(2 ** 63 + 5) + b"abc"
    with _kernel_disabled(disabled), pytest.raises(ProtoError, match=f"{2 ** 63 + 5} bytes announced") as e:
        protowire.parse_batch(*protowire.join_records([b"\x08\x01", huge]))
    assert e.value.message == 1


def test_a_record_outside_the_buffer_is_refused():
    buf = np.zeros(16, np.uint8)
    with pytest.raises(ValueError, match="message 1 spans"):
        protowire._parse_compiled(buf, np.array([0, 4], np.int64), np.array([2, 17], np.int64))
