"""Per-operator cost cases of fn.decoders.numpy (run by ``benchmarks/op_cost.py``): the bytes of .npy files,
read by fn.readers.file, decoded whole and converted to float. The files (photo-sized uint8 arrays) are
written once per process to a temporary folder."""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile

import numpy as np
from op_cost import types_of


@functools.lru_cache(maxsize=None)
def npy_files(count: int = 32) -> list[str]:
    folder = tempfile.mkdtemp(prefix="jaxdali-op-cost-npy-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    rng = np.random.default_rng(0)
    paths = []
    for k in range(count):
        paths.append(f"{folder}/{k:03d}.npy")
        np.save(paths[-1], rng.integers(0, 256, (224, 224, 3), dtype=np.uint8))
    return paths


CASES = {
    "decoders.numpy": lambda fn, images: fn.decoders.numpy(fn.readers.file(files=npy_files())[0]),
    "decoders.numpy_to_float": lambda fn, images: fn.decoders.numpy(fn.readers.file(files=npy_files())[0],
                                                                    dtype=types_of(fn).FLOAT),
}
