"""Stand-in for DALI's test helper module ``test_utils`` (run.sh links it under that name).

Only what the fetched tests import, written for this project.
"""

from __future__ import annotations

import inspect
import os
import types as pytypes

import numpy as np


def get_dali_extra_path() -> str:
    """The stand-in DALI_extra tree that run.sh builds from the project's shared photos."""
    return os.environ["DALI_EXTRA_PATH"]


def _host_samples(batch) -> list[np.ndarray]:
    if hasattr(batch, "as_cpu"):
        batch = batch.as_cpu()
    return [np.asarray(batch[i]) for i in range(len(batch))]


def compare_pipelines(pipe1, pipe2, batch_size: int, N_iterations: int, eps: float = 1e-7,
                      max_allowed_error=None, expected_layout=None, compare_layouts: bool = True) -> None:
    """Runs both pipelines ``N_iterations`` times; every output sample must match (within ``eps``)."""
    for it in range(N_iterations):
        out1, out2 = pipe1.run(), pipe2.run()
        assert len(out1) == len(out2), f"iteration {it}: {len(out1)} vs {len(out2)} outputs"
        for o, (b1, b2) in enumerate(zip(out1, out2)):
            if compare_layouts:
                assert b1.layout() == b2.layout(), f"iteration {it}, output {o}: layouts differ"
            s1, s2 = _host_samples(b1), _host_samples(b2)
            assert len(s1) == len(s2) == batch_size, f"iteration {it}, output {o}: batch sizes differ"
            for i, (a, b) in enumerate(zip(s1, s2)):
                assert a.shape == b.shape, f"iteration {it}, output {o}, sample {i}: {a.shape} vs {b.shape}"
                diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
                limit = eps if max_allowed_error is None else max_allowed_error
                assert diff.size == 0 or diff.max() <= limit, (
                    f"iteration {it}, output {o}, sample {i}: max difference {diff.max()}")


class _SignOff:
    """``@decorator("op.name", ...)`` records the operator names a test covers in ``tested_ops``."""

    def __init__(self):
        self.tested_ops: set[str] = set()

    def __call__(self, *op_names: str):
        self.tested_ops.update(op_names)
        return lambda test: test


def create_sign_off_decorator() -> _SignOff:
    return _SignOff()


def module_functions(module, prefix: str = "", remove_prefix: str = "", check_non_module: bool = False,
                     allowed_private_modules=()) -> list[str]:
    """Dotted names of the functions reachable from ``module`` (e.g. ``readers.file``)."""
    names: list[str] = []
    seen: set[int] = set()

    def walk(mod, dotted: str) -> None:
        if id(mod) in seen:
            return
        seen.add(id(mod))
        for attr, value in vars(mod).items():
            if attr.startswith("_") and attr not in allowed_private_modules:
                continue
            name = f"{dotted}.{attr}" if dotted else attr
            if isinstance(value, pytypes.ModuleType):
                if value.__name__.startswith(mod.__name__ + "."):
                    walk(value, name)
            elif inspect.isfunction(value) or inspect.isbuiltin(value):
                names.append(name)

    walk(module, prefix)
    return names
