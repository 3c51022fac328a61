"""Turns the runner's result records into a markdown report.

Usage on saved results: ``python benchmarks/report.py benchmarks/results/<run>.json``.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Iterable

PIPELINE_TITLES = {
    "train": "train: file reader with shuffle → random-resized-crop decode → 224×224 → random flip "
             "→ normalise",
    "val": "val: decode → shorter side 256 → centre crop 224×224 → normalise",
}
# Report order; the first is the reference of the ratio column.
REFERENCE = "jaxdali"
ORDER = ("jaxdali", "jaxdali-run", "dali", "dali-run", "grain", "torch", "jaxdali-rrc", "dali-rrc")


def label(record: dict) -> str:
    """How a system's row is named, with its version and the way batches were delivered."""
    v = record.get("versions", {})
    system = record["system"]
    if system == "jaxdali":
        return f"**jaxdali** {v.get('jaxdali', '')} `@data_iterator` → sharded `jax.Array`"
    if system.startswith("jaxdali-") and system != "jaxdali-run":
        form = v.get("form", "data_iterator")
        if form == "torch":
            return (f"jaxdali {v.get('jaxdali', '')} PyTorch adapter `DALIGenericIterator` → torch.Tensor "
                    "(host outputs)")
        how = "`@data_iterator`" if form == "data_iterator" else "`@data_iterator(devices=...)`, pmap-style" \
            if form == "data_iterator-devices" else (
            "`DALIGenericIterator` over " + ("a built" if form == "generic-built" else "an unbuilt") + " pipeline")
        processes = v.get("processes", 1)
        devices = (f"{processes} processes × {v.get('local_devices')} devices" if processes > 1
                   else f"{v.get('devices', 1)} device(s)")
        return (f"jaxdali {how}, {devices}, {v.get('layout', 'CHW')}, "
                f"`{v.get('source', 'file_root')}=`" + (", explicit `interp_type`" if v.get("explicit_interp") else "")
                + _crop_note(v))
    if system == "jaxdali-run":
        return "jaxdali `Pipeline.run()` (host TensorList, reference)"
    if system in ("dali", "dali-run", "dali-rrc"):
        if record.get("mode") == "pipe.run":
            return f"DALI {v.get('nvidia-dali', '')} CPU, `pipe.run()` (host TensorList)"
        return f"DALI {v.get('nvidia-dali', '')} CPU, JAX `DALIGenericIterator` → sharded `jax.Array`" + _crop_note(v)
    if system == "grain":
        return f"Grain {v.get('grain', '')}, {record['threads']} threads + OpenCV {v.get('opencv', '')} → NumPy"
    if system == "torch":
        return (f"PyTorch {v.get('torch', '')} DataLoader, {record['threads']} workers, torchvision "
                f"{v.get('torchvision', '')} → torch.Tensor")
    return system


def _crop_note(versions: dict) -> str:
    """The train crop, where it is not the decoder's (``dali_api.CROPS``)."""
    if versions.get("crop", "decoder") == "decoder":
        return ""
    return ", `decoders.image` + `random_resized_crop`"


def _median_range(values: list[float], fmt: str) -> str:
    if not values:
        return "—"
    med = statistics.median(values)
    if len(values) == 1:
        return format(med, fmt)
    return f"{format(med, fmt)} ({format(min(values), fmt)}–{format(max(values), fmt)})"


def _group(records: Iterable[dict]) -> dict[tuple[str, str], list[dict]]:
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in records:
        groups.setdefault((r["pipeline"], r["system"]), []).append(r)
    return groups


def _per_cpu_second(records: list[dict]) -> str:
    """Images per CPU-second; "—" where a run was too short for the CPU clock's tick to count it."""
    measured = [100 * r["images_per_s"] / r["cpu_percent"] for r in records if r["cpu_percent"] > 0]
    return f"{statistics.median(measured):.0f}" if measured else "—"


def median_rate(records: list[dict]) -> float | None:
    rates = [r["images_per_s"] for r in records if "error" not in r]
    return statistics.median(rates) if rates else None


def median_raw(records: list[dict]) -> dict:
    """The raw-work records of one pipeline, merged: medians of every number, value lists of the
    limits (for their ranges), the decoder that was fastest most often."""
    merged = dict(records[0])
    for key in ("crop_resize_us", "normalize_us", "one_thread_images_per_s", "sum_images_per_s",
                "measured_images_per_s"):
        merged[key] = statistics.median(r[key] for r in records)
        merged[key + "_all"] = [r[key] for r in records]
    decoders = list(dict.fromkeys(d for r in records for d in r["decode_us"]))
    merged["decode_us"] = {}
    for d in decoders:
        values = [r["decode_us"][d] for r in records if isinstance(r["decode_us"].get(d), (int, float))]
        merged["decode_us"][d] = statistics.median(values) if values else records[0]["decode_us"].get(d, "—")
    for key in ("region_decode_us", "one_thread_region_images_per_s", "measured_region_images_per_s",
                "nvimgcodec_measured_images_per_s", "nvimgcodec_measured_region_images_per_s"):
        values = [r[key] for r in records if r.get(key) is not None]
        merged[key] = statistics.median(values) if values else None
    region_decoders = list(dict.fromkeys(d for r in records for d in r.get("region_decode_us_by_decoder", {})))
    merged["region_decode_us_by_decoder"] = {
        d: statistics.median(r["region_decode_us_by_decoder"][d] for r in records
                             if d in r.get("region_decode_us_by_decoder", {})) for d in region_decoders}
    best = [r["best_decoder"] for r in records]
    merged["best_decoder"] = max(set(best), key=best.count)
    return merged


def _import_pss(records: list[dict]) -> str:
    """Median PSS at the end of the imports, MB ("—" in results saved before it was measured)."""
    values = [r["pss_import_bytes"] / 1e6 for r in records if "pss_import_bytes" in r]
    return f"{statistics.median(values):.0f}" if values else "—"


def _paired_ratios(records: list[dict], references: list[dict]) -> str:
    """The reference's images/s over this system's, repetition by repetition (runs of one repetition are
    neighbours in time, so the machine's drift between repetitions cancels): median (min–max)."""
    by_rep = {r["rep"]: r["images_per_s"] for r in references if "rep" in r}
    ratios = [by_rep[r["rep"]] / r["images_per_s"] for r in records if r.get("rep") in by_rep]
    return _median_range(ratios, ".2f")


def throughput_table(pipeline: str, groups: dict, raw: dict | None) -> list[str]:
    lines = [
        f"**{PIPELINE_TITLES.get(pipeline, pipeline)}**",
        "",
        ("| loader | images/s, median (min–max) | jaxdali ÷ this | same, per repetition | CPU % "
         "| images per CPU-second | time to first batch, s | import, s | PSS after imports, MB | PSS, MB |"),
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    references = [r for r in groups.get((pipeline, REFERENCE), []) if "error" not in r]
    reference = median_rate(references)
    systems = [s for s in ORDER if (pipeline, s) in groups]
    systems += sorted(s for p, s in groups if p == pipeline and s not in ORDER and s != "raw")
    for system in systems:
        records = groups[(pipeline, system)]
        ok = [r for r in records if "error" not in r]
        if not ok:
            lines.append(f"| {system} | failed: {records[0]['error'].splitlines()[-1][:100]} | | | | | | | | |")
            continue
        rate = median_rate(ok)
        ratio = f"{reference / rate:.2f}" if reference else "—"
        lines.append(
            f"| {label(ok[0])} | {_median_range([r['images_per_s'] for r in ok], '.0f')} | {ratio} "
            f"| {_paired_ratios(ok, references)} "
            f"| {statistics.median(r['cpu_percent'] for r in ok):.0f} "
            f"| {_per_cpu_second(ok)} "
            f"| {_median_range([r['ttfb_s'] for r in ok], '.2f')} "
            f"| {statistics.median(r['import_s'] for r in ok):.2f} "
            f"| {_import_pss(ok)} "
            f"| {_median_range([r['pss_bytes'] / 1e6 for r in ok], '.0f')} |")
    if raw is not None:
        ratio = (lambda x: f"{reference / x:.2f}") if reference else (lambda x: "—")
        t = raw["threads"]
        lines.append(f"| raw work ({raw['best_decoder']} full decode + crop + resize), {t} × one-thread rate "
                     f"| {_median_range(raw['sum_images_per_s_all'], '.0f')} | {ratio(raw['sum_images_per_s'])} "
                     f"| | {100 * t} | {raw['one_thread_images_per_s']:.0f} | | | | |")
        lines.append(f"| raw work, same, measured on {t} threads "
                     f"| {_median_range(raw['measured_images_per_s_all'], '.0f')} "
                     f"| {ratio(raw['measured_images_per_s'])} | | | | | | | |")
        if raw.get("one_thread_region_images_per_s"):
            region = raw["one_thread_region_images_per_s"]
            lines.append(f"| raw work, decoding only the crop window ({raw.get('region_decoder') or 'nvimgcodec'}) "
                         f"+ crop + resize, {t} × one-thread "
                         f"rate | {t * region:.0f} | {ratio(t * region)} | | {100 * t} | {region:.0f} | | | | |")
        if raw.get("measured_region_images_per_s"):
            measured = raw["measured_region_images_per_s"]
            lines.append(f"| raw work, decoding only the crop window, measured on {t} threads | {measured:.0f} "
                         f"| {ratio(measured)} | | | | | | | |")
        for key, what in (("nvimgcodec_measured_images_per_s", "nvimgcodec full decode + crop + resize"),
                          ("nvimgcodec_measured_region_images_per_s", "nvimgcodec crop-window decode + resize")):
            if raw.get(key):
                lines.append(f"| raw work with nvImageCodec's decoders only ({what}), measured on {t} threads "
                             f"| {raw[key]:.0f} | {ratio(raw[key])} | | | | | | | |")
    return lines


def operator_table(groups: dict, pipelines: list[str]) -> list[str]:
    """jaxdali's per-operator time (``Pipeline.run`` variant), medians over the repetitions."""
    columns = []
    for p in pipelines:
        records = [r for r in groups.get((p, "jaxdali-run"), []) if "op_ms_per_batch" in r]
        if records:
            names = list(records[0]["op_ms_per_batch"])
            columns.append((p, {n: statistics.median(r["op_ms_per_batch"].get(n, 0.0) for r in records)
                                for n in names}, records))
    if not columns:
        return []
    names: list[str] = []
    for _, ms, _ in columns:
        names += [n for n in ms if n not in names]
    header = "| operator | " + " | ".join(f"{p}: ms/batch | {p}: share" for p, _, _ in columns) + " |"
    lines = [header, "|---|" + "---:|---:|" * len(columns)]
    for name in names:
        cells = []
        for _, ms, _ in columns:
            total = sum(ms.values()) or 1.0
            value = ms.get(name)
            cells += ["—", "—"] if value is None else [f"{value:.1f}", f"{100 * value / total:.0f}%"]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    cells = []
    for _, ms, records in columns:
        batch = records[0]["batch_size"]
        wall = statistics.median(1000.0 * batch / r["images_per_s"] for r in records)
        cells += [f"{sum(ms.values()):.1f} (wall {wall:.1f})", ""]
    lines.append("| sum of operators (wall time per batch) | " + " | ".join(cells) + " |")
    return lines


def raw_table(raws: dict[str, dict]) -> list[str]:
    if not raws:
        return []
    decoders: list[str] = []
    for raw in raws.values():
        decoders += [d for d in raw["decode_us"] if d not in decoders]
    lines = ["| µs per image, one thread | " + " | ".join(raws) + " |", "|---|" + "---:|" * len(raws)]

    def cell(value) -> str:
        return f"{value:.0f}" if isinstance(value, (int, float)) else str(value)

    for d in decoders:
        lines.append(f"| full decode, {d} | " + " | ".join(cell(r["decode_us"].get(d, "—")) for r in raws.values())
                     + " |")
    region_decoders = list(dict.fromkeys(d for r in raws.values() for d in r.get("region_decode_us_by_decoder", {})))
    for d in region_decoders:  # results saved before the JPEG kernel have only nvImageCodec's region decode
        lines.append(f"| decode of the crop window only, {d} (not in the limit) | "
                     + " | ".join(cell(r.get("region_decode_us_by_decoder", {}).get(d, "—")) for r in raws.values())
                     + " |")
    if not region_decoders and any(r.get("region_decode_us") is not None for r in raws.values()):
        lines.append("| decode of the crop window only, nvimgcodec (not in the limit) | "
                     + " | ".join(cell(r.get("region_decode_us") or "—") for r in raws.values()) + " |")
    lines.append("| crop + resize to 224×224 (OpenCV INTER_LINEAR) | "
                 + " | ".join(cell(r["crop_resize_us"]) for r in raws.values()) + " |")
    lines.append("| normalise to float32 CHW (NumPy, not in the limit) | "
                 + " | ".join(cell(r["normalize_us"]) for r in raws.values()) + " |")
    lines.append("| one-thread images/s (fastest decode + crop + resize) | "
                 + " | ".join(f"{r['one_thread_images_per_s']:.0f}" for r in raws.values()) + " |")
    if any(r.get("one_thread_region_images_per_s") is not None for r in raws.values()):
        lines.append("| one-thread images/s, decoding only the crop window (not in the limit) | "
                     + " | ".join(cell(r.get("one_thread_region_images_per_s") or "—") for r in raws.values())
                     + " |")
    return lines


def markdown(meta: dict, records: list[dict]) -> str:
    """The whole report: settings, one throughput table per pipeline, operator times, raw work."""
    groups = _group(records)
    pipelines = [p for p in meta.get("pipelines", ["train", "val"]) if any(k[0] == p for k in groups)]
    raws = {p: [r for r in groups.get((p, "raw"), []) if "error" not in r] for p in pipelines}
    raws = {p: median_raw(r) for p, r in raws.items() if r}
    settings = (
        f"Measured {meta.get('date', '?')} on commit `{meta.get('commit', '?')}`; {meta.get('machine', '?')}. "
        f"Data: `{meta.get('data', '?')}` ({meta.get('data_summary', '?')}). Batch {meta.get('batch_size')}, "
        f"{meta.get('threads')} threads/workers per loader, {meta.get('reps')} repetitions interleaved, "
        f"{meta.get('warmup')} warm-up + {meta.get('batches')} timed batches per repetition, each in a fresh "
        f"process. Load average before/after: {meta.get('loadavg_before', '?')} / {meta.get('loadavg_after', '?')}.")
    lines = [settings, ""]
    for p in pipelines:
        lines += throughput_table(p, groups, raws.get(p)) + [""]
    ops = operator_table(groups, pipelines)
    if ops:
        lines += [("jaxdali per-operator time (`Pipeline.run()` repetitions, `executor_statistics()`, median "
                   "ms per batch; operators run one after another, each spread over the worker threads):"), ""]
        lines += ops + [""]
    if raws:
        passes = meta.get("raw_passes", 2)
        lines += [(f"Raw per-image work (bytes in memory, one thread, fastest of {passes} passes; median over the "
                   "repetitions):"), ""]
        lines += raw_table(raws) + [""]
    for note in meta.get("notes", []):
        lines.append(f"- {note}")
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        raise SystemExit("usage: python benchmarks/report.py RESULTS.json")
    with open(argv[0]) as f:
        saved = json.load(f)
    print(markdown(saved["meta"], saved["records"]), end="")


if __name__ == "__main__":
    main()
