"""``fn.io.file.read``: the bytes of the files whose names the input holds."""

from __future__ import annotations

import numpy as np

from jaxdali.ops.operator import Operator
from jaxdali.ops.readers import storage
from jaxdali.ops.schema import Arg, OpArgumentError, OpSchema, register
from jaxdali.tensors import TensorListCPU

__all__ = ["FILE_READ"]


def file_name(sample: np.ndarray, i: int) -> str:
    """A file name stored as UTF-8 bytes in a 1-D uint8 or int8 sample."""
    if sample.dtype not in (np.uint8, np.int8) or sample.ndim != 1:
        raise OpArgumentError(f"fn.io.file.read: sample {i} must hold a file name as 1-D uint8 bytes, got "
                              f"{sample.dtype} of shape {list(sample.shape)}")
    return sample.tobytes().decode()


class FileRead(Operator):
    """Reads whole files (local paths or fsspec URLs) on the worker pool: one uint8 sample per file."""

    def run(self, ctx, inputs, args):
        samples = inputs[0].samples()
        names = [file_name(np.asarray(s), i) for i, s in enumerate(samples)]
        out: list = [None] * len(names)

        def work(lo: int, hi: int) -> None:
            for i in range(lo, hi):
                try:
                    out[i] = np.frombuffer(storage.read_file(names[i]), np.uint8)
                except OSError as e:
                    raise FileNotFoundError(f"fn.io.file.read: sample {i}: cannot read {names[i]!r}: {e}") from e

        ctx.parallel_for(work, len(names))
        return TensorListCPU(out, "", names)


FILE_READ = register(OpSchema(
    name="io.file.read", impl=FileRead,
    doc="Reads the files named by the input (one UTF-8 file name per sample, as 1-D uint8, e.g. from "
        "`get_property(key='source_info')`): each output sample holds a file's bytes; its source info is "
        "the file name. Local paths and fsspec URLs are read.",
    args=(Arg("dont_use_mmap", "bool", False, "DALI reads through mmap unless set; jaxdali always reads.",
              hint=True),
          Arg("use_o_direct", "bool", False, "Read with O_DIRECT (DALI); accepted, no effect.", hint=True))))
