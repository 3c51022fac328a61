"""``fn.readers.caffe`` and ``fn.readers.caffe2``: samples from Caffe (``Datum``) and Caffe2
(``TensorProtos``) LMDBs.

Each LMDB value is one serialized protobuf message; ``protowire`` parses a whole batch of them at
once, and images are returned as read-only views of the batch's buffer (encoded bytes for the
decoders, or raw HWC uint8), not copies.
"""

from __future__ import annotations

import numpy as np

from jaxdali.ops.readers.base import LOADER_ARGS
from jaxdali.ops.readers.lmdb_records import LmdbReader
from jaxdali.ops.readers import protowire
from jaxdali.ops.readers.protowire import ProtoError
from jaxdali.tensors import TensorListCPU
from jaxdali.ops.schema import REQUIRED, Arg, OpSchema, register

__all__ = ["CAFFE_READER", "CAFFE2_READER", "encode_datum", "encode_tensor", "encode_tensor_protos"]

# caffe.Datum field numbers.
_DATUM_CHANNELS, _DATUM_HEIGHT, _DATUM_WIDTH, _DATUM_DATA, _DATUM_LABEL, _DATUM_ENCODED = 1, 2, 3, 4, 5, 7
# caffe2.TensorProto field numbers and data types.
_T_DIMS, _T_DATA_TYPE, _T_FLOAT, _T_INT32, _T_BYTE, _T_STRING, _T_INT64 = 1, 2, 3, 4, 5, 6, 10
FLOAT, INT32, BYTE, STRING, INT64 = 1, 2, 3, 4, 10
_TYPE_NAMES = {0: "UNDEFINED", 1: "FLOAT", 2: "INT32", 3: "BYTE", 4: "STRING", 5: "BOOL", 6: "UINT8", 7: "INT8",
               8: "UINT16", 9: "INT16", 10: "INT64", 12: "FLOAT16", 13: "DOUBLE"}
SINGLE_LABEL, MULTI_LABEL_SPARSE, MULTI_LABEL_DENSE, MULTI_LABEL_WEIGHTED_SPARSE, NO_LABEL = range(5)


def _slices(buf: np.ndarray, start: np.ndarray, length: np.ndarray) -> list[np.ndarray]:
    """Views of ``buf`` (the payloads of a batch: encoded images are not copied)."""
    return [buf[s:s + n] for s, n in zip(start.tolist(), length.tolist())]


def _first_bad(mask: np.ndarray) -> int:
    """The first record where ``mask`` is set."""
    return int(np.argmax(mask))


def _as_int32(values: np.ndarray) -> np.ndarray:
    """uint64 varints as int32, wrapping as protobuf's int32 does."""
    return values.astype(np.int64).astype(np.int32)


# -- Caffe -------------------------------------------------------------------------------------------------

class CaffeReader(LmdbReader):
    def __init__(self, node, build):
        super().__init__(node, build)
        self.image, self.label = self.args["image_available"], self.args["label_available"]

    def decode(self, records):
        buf, starts, ends = protowire.join_records(records)
        datum = protowire.parse_batch(buf, starts, ends)
        out = []
        if self.image:
            start, length, present = datum.bytes_field(_DATUM_DATA)
            if not present.all():
                raise ProtoError("the Datum has no image data (field 'data'); set image_available=False",
                                 _first_bad(~present))
            raw = datum.has(_DATUM_ENCODED) & (datum.last_varint(_DATUM_ENCODED, 1) == 0)
            images = _slices(buf, start, length)
            if raw.any():
                shape = np.stack([_as_int32(datum.last_varint(f)) for f in (_DATUM_HEIGHT, _DATUM_WIDTH,
                                                                            _DATUM_CHANNELS)], axis=1)
                wrong = raw & (shape.astype(np.int64).prod(axis=1) != length)
                if wrong.any():
                    i = _first_bad(wrong)
                    raise ProtoError(f"raw Datum of height, width, channels {shape[i].tolist()} holds "
                                     f"{int(length[i])} bytes", i)
                for i in np.flatnonzero(raw).tolist():
                    images[i] = images[i].reshape(shape[i])
            out.append(TensorListCPU(images, layout="HWC" if raw.all() else ""))
        if self.label:
            present = datum.has(_DATUM_LABEL)
            if not present.all():
                raise ProtoError("the Datum has no label; set label_available=False", _first_bad(~present))
            out.append(TensorListCPU(_as_int32(datum.last_varint(_DATUM_LABEL)).reshape(-1, 1)))
        return out


CAFFE_READER = register(OpSchema(
    name="readers.caffe", impl=CaffeReader, min_inputs=0, max_inputs=0, is_source=True,
    num_outputs=lambda a: int(a["image_available"]) + int(a["label_available"]),
    doc=("Reads (image, label) pairs from Caffe LMDBs of ``Datum`` records, in key order. The image is the "
         "encoded bytes (1-D uint8) or, for a Datum with ``encoded=False``, raw uint8 of shape "
         "(height, width, channels); the label is int32 of shape (1,). LMDBs are opened from local paths."),
    args=(
        Arg("path", "strs", REQUIRED, "LMDB directories (or data files), read one after the other."),
        Arg("image_available", "bool", True, "Whether the records hold an image (the first output)."),
        Arg("label_available", "bool", True, "Whether the records hold a label."),
    ) + LOADER_ARGS))


# -- Caffe2 ------------------------------------------------------------------------------------------------

class Caffe2Reader(LmdbReader):
    def __init__(self, node, build):
        super().__init__(node, build)
        a = self.args
        self.image, self.label_type, self.num_labels = a["image_available"], a["label_type"], a["num_labels"]
        self.additional, self.bbox = a["additional_inputs"], a["bbox"]

    def decode(self, records):
        buf, starts, ends = protowire.join_records(records)
        n = len(records)
        protos = protowire.parse_batch(buf, starts, ends)
        msg, start, length = protos.repeated_bytes(1)
        counts, first = protowire.values_per_message(start, msg, n)
        needed = int(self.image) + _label_protos(self.label_type) + self.additional + int(self.bbox)
        short = counts < needed
        if short.any():
            i = _first_bad(short)
            raise ProtoError(f"the TensorProtos holds {int(counts[i])} tensors, the arguments (image_available, "
                             f"label_type, additional_inputs, bbox) need {needed}", i)
        # The tensors of every record parsed together: message k * n + i is tensor k of record i.
        slots = np.concatenate([first + k for k in range(needed)])
        try:
            every = protowire.parse_batch(buf, start[slots], start[slots] + length[slots])
        except ProtoError as e:
            raise ProtoError(str(e), e.message % n) from None
        tensors = [every.part(k * n, n) for k in range(needed)]
        out, k = [], 0
        if self.image:
            out.append(_images(buf, tensors[0]))
            k = 1
        if self.label_type != NO_LABEL:
            out.append(self._labels(tensors, k))
            k += _label_protos(self.label_type)
        for j in range(self.additional):
            out.append(_batch(*_numbers(tensors[k], f"additional input {j}", (FLOAT, INT32, INT64)), n))
            k += 1
        if self.bbox:
            dtype, values, msg = _numbers(tensors[k], "bbox", (INT32,))
            counts, _ = protowire.values_per_message(values, msg, n)
            if np.any(counts != 4):
                i = _first_bad(counts != 4)
                raise ProtoError(f"the bbox tensor has {int(counts[i])} values, expected 4", i)
            out.append(TensorListCPU(values.reshape(n, 4)))
        return out

    def _labels(self, tensors, k):
        dtype, values, msg = _numbers(tensors[k], "label", (FLOAT, INT32))
        n = tensors[k].n
        counts, first = protowire.values_per_message(values, msg, n)
        if self.label_type == SINGLE_LABEL:
            if np.any(counts != 1):
                i = _first_bad(counts != 1)
                raise ProtoError(f"label_type=0 (single label) needs exactly one label value, got {int(counts[i])}", i)
            return TensorListCPU(values.reshape(n, 1))
        if self.label_type == MULTI_LABEL_DENSE:
            return _batch(dtype, values, msg, n)
        indices = values.astype(np.int64)
        outside = (indices < 0) | (indices >= self.num_labels)
        if outside.any():
            j = _first_bad(outside)
            raise ProtoError(f"sparse label index {int(indices[j])} is outside [0, num_labels={self.num_labels})",
                             int(msg[j]))
        if self.label_type == MULTI_LABEL_SPARSE:
            dense = np.zeros((n, self.num_labels), dtype)
            dense[msg, indices] = 1
            return TensorListCPU(dense)
        _, weights, weight_msg = _numbers(tensors[k + 1], "label weights", (FLOAT,))
        weight_counts, weight_first = protowire.values_per_message(weights, weight_msg, n)
        missing = weight_counts < counts
        if missing.any():
            i = _first_bad(missing)
            raise ProtoError(f"{int(counts[i])} sparse label indices but {int(weight_counts[i])} weights", i)
        rank = np.arange(len(values)) - first[msg]
        dense = np.zeros((n, self.num_labels), np.float32)
        dense[msg, indices] = weights[weight_first[msg] + rank]
        return TensorListCPU(dense)


def _label_protos(label_type: int) -> int:
    return {NO_LABEL: 0, MULTI_LABEL_WEIGHTED_SPARSE: 2}.get(label_type, 1)


def _images(buf: np.ndarray, tensor: protowire.Messages) -> TensorListCPU:
    kind = tensor.last_varint(_T_DATA_TYPE, FLOAT)
    wrong = (kind != STRING) & (kind != BYTE)
    if wrong.any():
        i = _first_bad(wrong)
        raise ProtoError(f"the image tensor has data type {_TYPE_NAMES.get(int(kind[i]), int(kind[i]))}, expected "
                         "STRING (encoded) or BYTE (raw)", i)
    start, length, present = tensor.bytes_field(_T_STRING, first=True)
    missing = (kind == STRING) & ~present
    if missing.any():
        raise ProtoError("the image tensor (STRING) has no string_data", _first_bad(missing))
    raw = kind == BYTE
    if raw.any():
        byte_start, byte_length, _ = tensor.bytes_field(_T_BYTE)
        start, length = np.where(raw, byte_start, start), np.where(raw, byte_length, length)
    images = _slices(buf, start, length)
    if raw.any():
        dims, dims_msg = tensor.varints(_T_DIMS)
        dims = dims.astype(np.int64)
        counts, first = protowire.values_per_message(dims, dims_msg, tensor.n)
        for i in np.flatnonzero(raw).tolist():
            d = dims[first[i]:first[i] + counts[i]].tolist()
            if len(d) not in (2, 3):
                raise ProtoError(f"the raw image tensor (BYTE) has dims {d}, expected [H, W] or [H, W, C]", i)
            shape = (d[0], d[1], d[2] if len(d) == 3 else 1)
            if images[i].size != shape[0] * shape[1] * shape[2]:
                raise ProtoError(f"the raw image tensor (BYTE) of dims {list(shape)} holds {images[i].size} bytes", i)
            images[i] = images[i].reshape(shape)
    return TensorListCPU(images, layout="HWC" if raw.all() else "")


def _numbers(tensor: protowire.Messages, what: str, allowed: tuple[int, ...]):
    """(dtype, values, message of each value) of a numeric tensor in every record; one data type per batch."""
    kinds = tensor.last_varint(_T_DATA_TYPE, FLOAT)
    wrong = kinds != allowed[0]
    for k in allowed[1:]:
        wrong &= kinds != k
    if wrong.any():
        i = _first_bad(wrong)
        names = " or ".join(_TYPE_NAMES[k] for k in allowed)
        raise ProtoError(f"the {what} tensor has data type {_TYPE_NAMES.get(int(kinds[i]), int(kinds[i]))}, "
                         f"expected {names}", i)
    kind = int(kinds[0])
    if np.any(kinds != kind):
        raise ProtoError(f"the {what} tensor has data type {_TYPE_NAMES[int(kinds[_first_bad(kinds != kind)])]} "
                         f"here and {_TYPE_NAMES[kind]} in the first record of the batch", _first_bad(kinds != kind))
    if kind == FLOAT:
        values, msg = tensor.fixed(_T_FLOAT, np.float32)
        return np.dtype(np.float32), values, msg
    number, dtype = (_T_INT32, np.int32) if kind == INT32 else (_T_INT64, np.int64)
    values, msg = tensor.varints(number)
    return np.dtype(dtype), values.astype(np.int64).astype(dtype), msg


def _batch(dtype, values: np.ndarray, msg: np.ndarray, n: int) -> TensorListCPU:
    """Per-record runs of ``values`` as a batch of ``n``: dense when all records hold as many values."""
    counts, first = protowire.values_per_message(values, msg, n)
    if counts.size and np.all(counts == counts[0]):
        return TensorListCPU(values.reshape(len(counts), int(counts[0])))
    return TensorListCPU([values[f:f + c] for f, c in zip(first.tolist(), counts.tolist())])


CAFFE2_READER = register(OpSchema(
    name="readers.caffe2", impl=Caffe2Reader, min_inputs=0, max_inputs=0, is_source=True,
    num_outputs=lambda a: (int(a["image_available"]) + int(a["label_type"] != NO_LABEL) + a["additional_inputs"]
                           + int(a["bbox"])),
    doc=("Reads samples from Caffe2 LMDBs of ``TensorProtos`` records, in key order. Outputs, in order: the "
         "image (``image_available``: encoded bytes as 1-D uint8 for a STRING tensor, raw HWC uint8 for a BYTE "
         "tensor), the label (unless ``label_type=4``), ``additional_inputs`` tensors, and the bbox (4 int32). "
         "LMDBs are opened from local paths.\n\n"
         "label_type: 0 single label (int32 or float, shape (1,)); 1 sparse indices -> multi-hot vector of "
         "``num_labels``; 2 dense vector as stored; 3 sparse indices followed by a FLOAT tensor of weights -> "
         "float vector of ``num_labels``; 4 no label. DALI 2.4 declares a second, never-filled label output for "
         "types 1 and 3 and fails when run; here they give one label output."),
    args=(
        Arg("path", "strs", REQUIRED, "LMDB directories (or data files), read one after the other."),
        Arg("label_type", "int", 0, "0 single, 1 sparse multi-label, 2 dense multi-label, 3 weighted sparse, "
            "4 no label.", min=0, max=4),
        Arg("num_labels", "int", 1, "Number of classes (length of the label vector for sparse labels).", min=1),
        Arg("image_available", "bool", True, "Whether the first tensor of each record is an image."),
        Arg("additional_inputs", "int", 0, "Number of extra FLOAT/INT32/INT64 tensors after the label.", min=0),
        Arg("bbox", "bool", False, "Whether a 4-value INT32 bounding box follows the additional tensors."),
    ) + LOADER_ARGS))


# -- writing records ---------------------------------------------------------------------------------------

def encode_tensor(data_type: int, *, dims=(), floats=None, ints=None, int64s=None, byte_data=None,
                  strings=()) -> bytes:
    """One serialized Caffe2 ``TensorProto`` (``data_type``: 1 FLOAT, 2 INT32, 3 BYTE, 4 STRING, 10 INT64)."""
    out = protowire.encode_packed(_T_DIMS, dims, "varint") if len(dims) else b""
    out += protowire.encode_field(_T_DATA_TYPE, data_type)
    if floats is not None:
        out += protowire.encode_packed(_T_FLOAT, floats, "float")
    if ints is not None:
        out += protowire.encode_packed(_T_INT32, ints, "varint")
    if byte_data is not None:
        out += protowire.encode_field(_T_BYTE, byte_data)
    for s in strings:
        out += protowire.encode_field(_T_STRING, s)
    if int64s is not None:
        out += protowire.encode_packed(_T_INT64, int64s, "varint")
    return out


def encode_tensor_protos(tensors) -> bytes:
    """A serialized Caffe2 ``TensorProtos`` holding the given serialized tensors (one LMDB value)."""
    return b"".join(protowire.encode_field(1, t) for t in tensors)


def encode_datum(data: bytes, label: int | None = None, *, encoded: bool = True, shape=None) -> bytes:
    """A serialized Caffe ``Datum``: an encoded image (or raw bytes with ``shape`` = (H, W, C) and
    ``encoded=False``) and an optional label."""
    out = b""
    if shape is not None:
        h, w, c = shape
        out += (protowire.encode_field(_DATUM_CHANNELS, c) + protowire.encode_field(_DATUM_HEIGHT, h)
                + protowire.encode_field(_DATUM_WIDTH, w))
    out += protowire.encode_field(_DATUM_DATA, data)
    if label is not None:
        out += protowire.encode_field(_DATUM_LABEL, label)
    return out + protowire.encode_field(_DATUM_ENCODED, int(encoded))
