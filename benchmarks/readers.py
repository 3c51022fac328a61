"""A small harness for reader benchmarks: records/s of several loaders, measured in one process, interleaved.

Each loader is a zero-argument function that returns one batch and the number of records in it. After a
warm-up, the loaders take turns: every repetition times ``batches`` batches of each, in a rotating order,
so a change of machine load hits all of them alike. The report gives each loader's median records/s
(min-max over the repetitions) and its ratio to a reference loader, both of the medians and paired
per repetition.

Used by ``bench_readers_numpy.py`` and ``bench_remote_read.py``; another reader's benchmark only needs to
build its loaders and call ``compare``.
"""

from __future__ import annotations

import statistics
import time
from typing import Callable

__all__ = ["Loader", "compare", "report"]

#: A loader: one call returns one batch's number of records.
Loader = Callable[[], int]


def compare(loaders: dict[str, Loader], *, batches: int, reps: int, warmup: int,
            cpu_rates: dict[str, list[float]] | None = None) -> dict[str, list[float]]:
    """Records/s of each loader in each repetition, measured interleaved. ``cpu_rates``, when given, is
    filled with each repetition's records per CPU-second of the whole process (all its threads: the
    steadier measure on a loaded machine)."""
    for load in loaders.values():
        for _ in range(warmup):
            load()
    rates: dict[str, list[float]] = {name: [] for name in loaders}
    names = list(loaders)
    for rep in range(reps):
        for name in names[rep % len(names):] + names[:rep % len(names)]:
            load = loaders[name]
            records = 0
            start, cpu = time.perf_counter(), time.process_time()
            for _ in range(batches):
                records += load()
            rates[name].append(records / (time.perf_counter() - start))
            if cpu_rates is not None:
                cpu_rates.setdefault(name, []).append(records / max(time.process_time() - cpu, 1e-9))
    return rates


def report(title: str, rates: dict[str, list[float]], reference: str,
           cpu_rates: dict[str, list[float]] | None = None) -> str:
    """A markdown table: each loader's median records/s (min-max), the ratio of its median to
    ``reference``'s, and the median of the per-repetition ratios (the two were measured back to back,
    so this one is less sensitive to changes of machine load); with ``cpu_rates``, also the median
    records per CPU-second and its paired ratio."""
    ref = statistics.median(rates[reference])
    cpu_head = f" records per CPU-s (median) | ÷ {reference}, per CPU-s, paired |" if cpu_rates else ""
    lines = [f"### {title}", "", f"| loader | records/s (median) | min-max | ÷ {reference} | ÷ {reference}, "
             f"paired repetitions (median) |{cpu_head}", "|---|---|---|---|---|" + ("---|---|" if cpu_rates else "")]
    for name, values in rates.items():
        med = statistics.median(values)
        paired = statistics.median(v / r for v, r in zip(values, rates[reference]))
        row = f"| {name} | {med:,.0f} | {min(values):,.0f}-{max(values):,.0f} | {med / ref:.2f}x | {paired:.2f}x |"
        if cpu_rates:
            cpu = cpu_rates[name]
            cpu_paired = statistics.median(v / r for v, r in zip(cpu, cpu_rates[reference]))
            row += f" {statistics.median(cpu):,.0f} | {cpu_paired:.2f}x |"
        lines.append(row)
    return "\n".join(lines)
