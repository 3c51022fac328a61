"""DALI's import paths and ``types`` module: enums numbered as in DALI, module-level aliases, helpers."""

from __future__ import annotations

import importlib

import numpy as np
import pytest


def test_dali_import_paths():
    from jaxdali import Pipeline, fn, pipeline_def, types

    import jaxdali.fn as fn_module
    import jaxdali.types as types_module

    assert fn_module is fn and types_module is types
    assert callable(pipeline_def) and isinstance(Pipeline, type)
    readers = importlib.import_module("jaxdali.fn.readers")  # `import jaxdali.fn.readers` works too
    assert readers.file is fn.readers.file
    for path in ("readers.file", "decoders.image", "random.coin_flip", "random.uniform", "random.normal",
                 "external_source", "crop_mirror_normalize", "resize"):
        obj = fn
        for part in path.split("."):
            obj = getattr(obj, part)
        assert callable(obj), path


# DALI 2.4's numbering (nvidia.dali.types): checkpoints, serialized graphs and user code compare these.
DALI_NUMBERS = {
    "DALIDataType": {"NO_TYPE": -1, "UINT8": 0, "UINT16": 1, "UINT32": 2, "UINT64": 3, "INT8": 4, "INT16": 5,
                     "INT32": 6, "INT64": 7, "FLOAT16": 8, "FLOAT": 9, "FLOAT64": 10, "BOOL": 11, "STRING": 12,
                     "FEATURE": 17, "IMAGE_TYPE": 20, "DATA_TYPE": 21, "INTERP_TYPE": 22, "TENSOR_LAYOUT": 23,
                     "PYTHON_OBJECT": 24},
    "DALIImageType": {"RGB": 0, "BGR": 1, "GRAY": 2, "YCbCr": 3, "ANY_DATA": 4},
    "DALIInterpType": {"INTERP_NN": 0, "INTERP_LINEAR": 1, "INTERP_CUBIC": 2, "INTERP_LANCZOS3": 3,
                       "INTERP_TRIANGULAR": 4, "INTERP_GAUSSIAN": 5},
}


@pytest.mark.parametrize("enum_name", sorted(DALI_NUMBERS))
def test_enums_are_numbered_as_in_dali_and_aliased_at_module_level(enum_name):
    from jaxdali import types

    enum_type = getattr(types, enum_name)
    assert {m.name: int(m) for m in enum_type} == DALI_NUMBERS[enum_name]
    for name in DALI_NUMBERS[enum_name]:
        assert getattr(types, name) is enum_type[name]  # types.RGB, types.FLOAT, types.INTERP_LINEAR, ...
        assert name in types.__all__


def test_legacy_layout_aliases():
    from jaxdali import types

    assert (types.NHWC, types.NCHW, types.NFHWC, types.NFCHW, types.SAME) == ("HWC", "CHW", "FHWC", "FCHW", "")


def test_sample_and_batch_info_fields():
    from jaxdali import types

    info = types.SampleInfo(10, 2, 4, 1)
    assert (info.idx_in_epoch, info.idx_in_batch, info.iteration, info.epoch_idx) == (10, 2, 4, 1)
    batch = types.BatchInfo(iteration=3, epoch_idx=0)
    assert (batch.iteration, batch.epoch_idx) == (3, 0)


def test_type_conversions_round_trip_and_reject_non_numeric_types():
    from jaxdali import types

    for dali_type in (types.UINT8, types.INT16, types.INT32, types.INT64, types.FLOAT16, types.FLOAT,
                      types.FLOAT64, types.BOOL):
        assert types.to_dali_type(types.to_numpy_type(dali_type)) is dali_type
    assert types.to_numpy_type(types.FLOAT) is np.float32 and types.to_dali_type(np.dtype("uint8")) is types.UINT8
    with pytest.raises(TypeError, match="has no NumPy equivalent"):
        types.to_numpy_type(types.STRING)
    with pytest.raises(TypeError, match="has no DALI equivalent"):
        types.to_dali_type(np.complex64)
