"""What an operator does with a sample it cannot read or decode: raise, or replace it (jaxdali only).

``error_policy="raise"`` (the default) is DALI's behaviour: the batch fails with an error naming the
file. ``error_policy="replace"`` keeps going: the bad row becomes a copy of the next good row of the
same batch (cyclically; a pure function of which rows failed, so every run and every resume from a
checkpoint replaces it the same way), the runner copies that row into every other batch of the
iteration (labels included, so image and label still belong together), the row's ``replaced_rows``
entry marks it as not real (the JAX iterators' ``is_nonpadding`` is False there), and the file is
reported once: a ``SkippedSampleWarning`` and an entry in ``Pipeline.skipped_samples()``.
"""

from __future__ import annotations

import threading
import warnings
from typing import TYPE_CHECKING, Iterable, Mapping, Sequence

from jaxdali.ops.schema import Arg

if TYPE_CHECKING:
    from jaxdali.ops.operator import RunContext

__all__ = ["ERROR_POLICY_ARG", "ERROR_POLICIES", "SkippedSampleWarning", "SkipLog", "replace_failed",
           "replacement_rows"]

ERROR_POLICIES = ("raise", "replace")

ERROR_POLICY_ARG = Arg(
    "error_policy", "str", "raise",
    "(jaxdali only) What a sample that cannot be read or decoded does: 'raise' (DALI's behaviour) fails the "
    "batch with an error naming the file; 'replace' copies the next good sample of the batch into its row (the "
    "same replacement on every run and resume), marks the row not real in the iterators' padding mask, warns once "
    "per file (SkippedSampleWarning) and lists it in Pipeline.skipped_samples().",
    choices=ERROR_POLICIES)


class SkippedSampleWarning(UserWarning):
    """A sample was replaced under ``error_policy="replace"``; the message names the file and the error."""


def replacement_rows(failed: Iterable[int], n: int) -> dict[int, int]:
    """Row -> the row that replaces it: the next row after it (cyclically) that did not fail.

    At least one of the ``n`` rows must not have failed.
    """
    bad = set(failed)
    out = {}
    for row in sorted(bad):
        k = (row + 1) % n
        while k in bad:
            k = (k + 1) % n
        out[row] = k
    return out


class SkipLog:
    """The samples an operator replaced, each warned about once (thread-safe; workers report here)."""

    def __init__(self, operator: str):
        self._operator = operator
        self._lock = threading.Lock()
        self._entries: dict[str, str] = {}

    def report(self, source: str, error: str) -> None:
        """Records that ``source`` (a file name, or a description of the sample) was replaced."""
        with self._lock:
            if source in self._entries:
                return
            self._entries[source] = error
        warnings.warn(f"{self._operator}: replaced {source!r} (error_policy='replace'): {error}",
                      SkippedSampleWarning, stacklevel=2)

    def entries(self) -> list[dict]:
        """``[{"operator", "source", "error"}]`` in the order the samples were first replaced."""
        with self._lock:
            return [{"operator": self._operator, "source": s, "error": e} for s, e in self._entries.items()]


def replace_failed(ctx: "RunContext", failures: Mapping[int, BaseException], sources: Sequence[str | None],
                   log: SkipLog) -> None:
    """Applies ``error_policy="replace"`` to one batch: reports each failed row (row -> its error) and
    asks the runner to copy the replacing rows (``RunContext.replace_samples``).

    Raises:
      the first row's error, when every row of the batch failed (there is no good sample to copy).
    """
    if not failures:
        return
    n = ctx.batch_size
    if len(failures) >= n:
        first = failures[min(failures)]
        first.add_note(f"jaxdali: all {n} samples of the batch failed; error_policy='replace' needs at least one "
                       "good sample per batch to copy")
        raise first
    for row in sorted(failures):
        source = sources[row] if row < len(sources) and sources[row] else f"sample {row} of iteration {ctx.iteration}"
        log.report(source, str(failures[row]))
    ctx.replace_samples(replacement_rows(failures, n))
