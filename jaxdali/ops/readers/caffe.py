"""``fn.readers.caffe`` and ``fn.readers.caffe2``: samples from Caffe (``Datum``) and Caffe2
(``TensorProtos``) LMDBs.

Each LMDB value is one serialized protobuf message, parsed by ``protowire``; images are returned
as views of the record (encoded bytes for the decoders, or raw HWC uint8).
"""

from __future__ import annotations

import numpy as np

from jaxdali.ops.readers.base import LOADER_ARGS
from jaxdali.ops.readers.lmdb_records import LmdbReader
from jaxdali.ops.readers import protowire
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


def _bytes_array(view: memoryview) -> np.ndarray:
    return np.frombuffer(view, dtype=np.uint8)


# -- Caffe -------------------------------------------------------------------------------------------------

class CaffeReader(LmdbReader):
    def __init__(self, node, build):
        super().__init__(node, build)
        self.image, self.label = self.args["image_available"], self.args["label_available"]

    def parse(self, value):
        datum = protowire.parse(value)
        out = []
        if self.image:
            data = datum.bytes_field(_DATUM_DATA)
            if data is None:
                raise ValueError("the Datum has no image data (field 'data'); set image_available=False")
            image = _bytes_array(data)
            if datum.has(_DATUM_ENCODED) and not datum.varint(_DATUM_ENCODED):
                shape = (datum.int32(_DATUM_HEIGHT), datum.int32(_DATUM_WIDTH), datum.int32(_DATUM_CHANNELS))
                if int(np.prod(shape)) != image.size:
                    raise ValueError(f"raw Datum of height, width, channels {shape} holds {image.size} bytes")
                image = image.reshape(shape)
            out.append(image)
        if self.label:
            if not datum.has(_DATUM_LABEL):
                raise ValueError("the Datum has no label; set label_available=False")
            out.append(np.array([datum.int32(_DATUM_LABEL)], dtype=np.int32))
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

    def parse(self, value):
        protos = [protowire.parse(p) for p in protowire.parse(value).repeated_bytes(1)]
        needed = (int(self.image) + _label_protos(self.label_type) + self.additional + int(self.bbox))
        if len(protos) < needed:
            raise ValueError(f"the TensorProtos holds {len(protos)} tensors, the arguments (image_available, "
                             f"label_type, additional_inputs, bbox) need {needed}")
        out, i = [], 0
        if self.image:
            out.append(_image(protos[0]))
            i = 1
        if self.label_type != NO_LABEL:
            out.append(self._label(protos, i))
            i += _label_protos(self.label_type)
        for k in range(self.additional):
            out.append(_numbers(protos[i], f"additional input {k}", (FLOAT, INT32, INT64)))
            i += 1
        if self.bbox:
            box = _numbers(protos[i], "bbox", (INT32,))
            if box.size != 4:
                raise ValueError(f"the bbox tensor has {box.size} values, expected 4")
            out.append(box)
        return out

    def _label(self, protos, i):
        proto = protos[i]
        kind = proto.varint(_T_DATA_TYPE, FLOAT)
        if kind not in (FLOAT, INT32):
            raise ValueError(f"the label tensor has data type {_TYPE_NAMES.get(kind, kind)}, expected FLOAT or INT32")
        values = _numbers(proto, "label", (FLOAT, INT32))
        if self.label_type == SINGLE_LABEL:
            if values.size != 1:
                raise ValueError(f"label_type=0 (single label) needs exactly one label value, got {values.size}")
            return values
        if self.label_type == MULTI_LABEL_DENSE:
            return values
        indices = values.astype(np.int64)
        if indices.size and (indices.min() < 0 or indices.max() >= self.num_labels):
            bad = indices[(indices < 0) | (indices >= self.num_labels)][0]
            raise ValueError(f"sparse label index {int(bad)} is outside [0, num_labels={self.num_labels})")
        if self.label_type == MULTI_LABEL_SPARSE:
            dense = np.zeros(self.num_labels, values.dtype)
            dense[indices] = 1
            return dense
        weights = _numbers(protos[i + 1], "label weights", (FLOAT,))
        if weights.size < indices.size:
            raise ValueError(f"{indices.size} sparse label indices but {weights.size} weights")
        dense = np.zeros(self.num_labels, np.float32)
        dense[indices] = weights[:indices.size]
        return dense


def _label_protos(label_type: int) -> int:
    return {NO_LABEL: 0, MULTI_LABEL_WEIGHTED_SPARSE: 2}.get(label_type, 1)


def _image(proto: protowire.Message) -> np.ndarray:
    kind = proto.varint(_T_DATA_TYPE, FLOAT)
    if kind == STRING:
        strings = proto.repeated_bytes(_T_STRING)
        if not strings:
            raise ValueError("the image tensor (STRING) has no string_data")
        return _bytes_array(strings[0])
    if kind == BYTE:
        dims = proto.repeated_varint(_T_DIMS, np.int64)
        if dims.size not in (2, 3):
            raise ValueError(f"the raw image tensor (BYTE) has dims {dims.tolist()}, expected [H, W] or [H, W, C]")
        shape = (int(dims[0]), int(dims[1]), int(dims[2]) if dims.size == 3 else 1)
        data = proto.bytes_field(_T_BYTE)
        data = _bytes_array(data) if data is not None else np.zeros(0, np.uint8)
        if data.size != int(np.prod(shape)):
            raise ValueError(f"the raw image tensor (BYTE) of dims {list(shape)} holds {data.size} bytes")
        return data.reshape(shape)
    raise ValueError(f"the image tensor has data type {_TYPE_NAMES.get(kind, kind)}, expected STRING (encoded) "
                     "or BYTE (raw)")


def _numbers(proto: protowire.Message, what: str, allowed: tuple[int, ...]) -> np.ndarray:
    kind = proto.varint(_T_DATA_TYPE, FLOAT)
    if kind not in allowed:
        names = " or ".join(_TYPE_NAMES[k] for k in allowed)
        raise ValueError(f"the {what} tensor has data type {_TYPE_NAMES.get(kind, kind)}, expected {names}")
    if kind == FLOAT:
        return proto.repeated_fixed(_T_FLOAT, np.float32)
    if kind == INT32:
        return proto.repeated_varint(_T_INT32, np.int32)
    return proto.repeated_varint(_T_INT64, np.int64)


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
