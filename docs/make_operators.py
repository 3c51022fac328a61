"""Writes docs/operators.md, the coverage table of DALI 2.4's operators, from the operator registry.

    python docs/make_operators.py              # after registering an operator or adding a test
    python docs/make_operators.py --refresh    # re-read DALI's operator list (needs nvidia.dali)

DALI's public ``fn`` operators are recorded in ``docs/dali_operators.json`` (read from an installed
DALI by ``--refresh``), so the page can be generated without DALI. Public means: reachable under
``nvidia.dali.fn`` outside its ``hidden`` namespaces and not a legacy alias (an operator DALI
deprecates in favour of another, such as ``image_decoder`` for ``decoders.image``); aliases are
recorded separately. The differential tests are found by reading the ``COVERED_OPERATORS`` tuple of
each ``tests/differential/*.py`` module (and of the ``tests/ops/`` modules that compare readers with
DALI). ``tests/test_operator_coverage.py`` fails while the page is
out of date, or when a registered operator has no differential test and is in neither ``NOT_IN_DALI``
nor ``AWAITING_DIFFERENTIAL_TEST``.
"""

from __future__ import annotations

import ast
import json
import pathlib
import sys
import types as pytypes

REPO = pathlib.Path(__file__).resolve().parents[1]
OUT = REPO / "docs" / "operators.md"
DALI_LIST = REPO / "docs" / "dali_operators.json"
DIFFERENTIAL = REPO / "tests" / "differential"

#: Registered operators DALI does not have, with the reason they exist; they need no differential test.
NOT_IN_DALI = {
    "readers.array_record": "Reads ArrayRecord files (Grain's format); DALI has no such reader.",
}

#: Registered DALI operators no test compares with DALI yet, and why; the table says so.
AWAITING_DIFFERENTIAL_TEST = {
    "readers.video": "DALI 2.4 runs fn.readers.video on the GPU only, so there is no CPU oracle; "
                     "experimental.readers.video, which shares the code, is checked",
    "experimental.decoders.video": "legacy name of decoders.video (same implementation), which is checked",
    "readers.video_resize": "DALI 2.4 runs it on the GPU only; tests/ops/test_video_resize.py checks it equals "
                            "readers.video followed by resize, which are checked",
}

#: DALI operators jaxdali does not implement, and why; the table says so.
NOT_IMPLEMENTED = {
    "optical_flow": "Not implemented: DALI computes it with the optical-flow engine of NVIDIA GPUs (NVOF), which "
                    "has no CPU or JAX counterpart giving the same flow fields.",
}

#: Deliberate differences from DALI, shown in the notes column.
NOTES = {
    "decoders.image_crop": "`crop_d` and `crop_pos_z` are refused (images have no depth axis).",
    "image_decoder_crop": "`crop_d` and `crop_pos_z` are refused (images have no depth axis).",
    "permute_batch": "A one-entry constant `indices` applies to every sample.",
    "readers.video_resize": "The resize arguments are constants (DALI also takes them per sample).",
    "per_frame": "Sets the layout only: jaxdali's operators do not yet apply per-frame argument inputs.",
    "batch_permutation": "Counter-based generator: same kind of permutation as DALI, different values.",
    "reductions.mean": "An integer `dtype` gives the truncated true mean; DALI accumulates in that type and "
                       "wraps around when the sum overflows it.",
    "reductions.rms": "An integer `dtype` gives the truncated true value; DALI accumulates the squares in that "
                      "type and wraps around.",
    "reductions.std_dev": "The mean must have the reduced shape (DALI reads its first element when it does not).",
    "reductions.variance": "The mean must have the reduced shape (DALI reads its first element when it does not).",
    "squeeze": "A negative axis is an error (DALI silently squeezes nothing); per-sample `axes` work (DALI 2.4 "
               "refuses them at build time).",
    "random.coin_flip": "Counter-based generator: same distribution as DALI, different values.",
    "random.uniform": "Counter-based generator: same distribution as DALI, different values.",
    "random.normal": "Counter-based generator: same distribution as DALI, different values.",
    "random.choice": "Counter-based generator: same distribution as DALI, different values.",
    "jitter": "DALI 2.4 runs it on the GPU only (no CPU oracle): checked against DALI's schema and the semantics of "
              "its displacement filter (offsets, clamping, whole pixels moved); also accepts device='cpu'. "
              "Per-sample PCG64 generator: same distribution as DALI, different values.",
    "experimental.median_blur": "DALI 2.4 runs it on the GPU only (no CPU oracle): checked against DALI's schema "
                                "and SciPy's median filter (replicated edges, as CV-CUDA); also accepts "
                                "device='cpu'.",
    "experimental.dilate": "DALI 2.4 runs it on the GPU only (no CPU oracle): checked against DALI's schema and a "
                           "NumPy sliding-window maximum (CV-CUDA's borders); also accepts device='cpu'.",
    "experimental.erode": "DALI 2.4 runs it on the GPU only (no CPU oracle): checked against DALI's schema and a "
                          "NumPy sliding-window minimum (CV-CUDA's borders); also accepts device='cpu'.",
    "experimental.remap": "DALI 2.4 runs it on the GPU only (no CPU oracle): checked against DALI's schema and NumPy "
                          "nearest/bilinear interpolation with a zero border (linear within OpenCV's 1/32-pixel "
                          "weights); also accepts device='cpu'.",
    "resize_crop_mirror": "`mirror` flips the spatial axes of sequences too (DALI 2.4 flips H for bit 1 and "
                          "nothing for bits 2 and 4 on FHWC input).",
    "fast_resize_crop_mirror": "As `resize_crop_mirror`.",
    "experimental.resize": "DALI runs it on the GPU only; here both placements run `fn.resize`'s host code.",
    "segmentation.random_object_bbox": "Counter-based generator: same distribution as DALI, different values.",
    "ssd_random_crop": "Counter-based generator: same distribution as DALI, different values. [N, 1] labels keep "
                       "their shape (DALI 2.4 returns [K] after a crop and fails on such batches). HW and non-uint8 "
                       "images are cropped too (DALI 2.4 passes them through uncropped but fails on a crop); a "
                       "cropped sample needs one label per box (DALI reads past the labels).",
    "experimental.readers.fits": "DALI 2.4's CPU reader needs a CUDA driver (no CPU oracle): checked against astropy "
                                 "writing and reading the same files, and DALI's schema. A declared `dtypes` entry "
                                 "that differs from the file's type is an error (DALI returns the file's type); "
                                 "checkpoints work (DALI refuses them for this reader).",
    "experimental.inputs.video": "Checked against DALI on VP9 (DALI's CPU backend decodes VP8, VP9 and MJPEG only); "
                                 "here every codec FFmpeg decodes. `no_copy` is a hint: the fed bytes are copied "
                                 "once.",
    "decoders.inflate": "DALI runs it on the GPU only (nvCOMP), so it is checked against the compressed data, not "
                        "DALI; jaxdali inflates LZ4 blocks on the host wherever it is placed.",
    "decoders.numpy": "Also reads .npy versions 2.0/3.0 and big-endian data (DALI refuses them).",
    "readers.mxnet": "`shuffle_after_epoch` reshuffles all records (DALI: the order of whole files).",
    "readers.sequence": "Each sample's source info is its first frame's path (DALI gives none).",
    "decoders.audio": "Resampled outputs sit at exact input positions (DALI steps them in float32: within 1e-4 "
                      "of full scale); files libsndfile cannot read (AAC, MP4) are decoded with FFmpeg.",
    "audio_decoder": "As decoders.audio.",
    "audio_resample": "Exact input positions (DALI steps them in float32: within 3e-4 of the peak).",
    "preemphasis_filter": "A one-sample signal with border='reflect' uses clamp (DALI reads past the sample).",
    "nonsilent_region": "Short-term power summed in float64 (`reset_interval` is validated only).",
}


def dali_operators_from_dali() -> dict:
    """DALI's public operators and legacy aliases, read from the installed ``nvidia.dali``."""
    import nvidia.dali
    import nvidia.dali.fn as dali_fn
    from nvidia.dali import backend

    found: dict[str, str] = {}  # fn path -> schema name

    def walk(module: pytypes.ModuleType, prefix: str) -> None:
        for name in sorted(dir(module)):
            obj = getattr(module, name)
            if name.startswith("_") or name == "hidden":
                continue
            if isinstance(obj, pytypes.ModuleType):
                if obj.__name__.startswith("nvidia.dali.fn") and "hidden" not in obj.__name__.split("."):
                    walk(obj, f"{prefix}{name}.")
            elif callable(obj) and getattr(obj, "_schema_name", None):
                found[prefix + name] = obj._schema_name

    walk(dali_fn, "")
    by_schema = {}
    for path, schema in found.items():
        by_schema.setdefault(schema, path)
    operators, aliases = [], {}
    for path, schema_name in sorted(found.items()):
        schema = backend.GetSchema(schema_name)
        target = schema.DeprecatedInFavorOf() if schema.IsDeprecated() else ""
        if target:
            aliases[path] = by_schema.get(target, target)
        else:
            operators.append(path)
    return {"dali_version": nvidia.dali.__version__, "operators": operators, "aliases": aliases}


def covered_operators() -> dict[str, list[str]]:
    """Operator name -> the test modules (``tests/differential/``, and the readers' own modules in
    ``tests/ops/`` that compare with DALI) whose ``COVERED_OPERATORS`` list it."""
    covered: dict[str, list[str]] = {}
    for path in sorted(DIFFERENTIAL.glob("*.py")) + sorted((REPO / "tests" / "ops").glob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "COVERED_OPERATORS"
                                                    for t in node.targets):
                for name in ast.literal_eval(node.value):
                    covered.setdefault(name, []).append(str(path.relative_to(REPO / "tests")))
    return covered


def public_registry() -> dict:
    """jaxdali's public operators (names not starting with ``_``) by name."""
    sys.path.insert(0, str(REPO))
    import jaxdali.ops  # noqa: F401  (registers the operators)
    from jaxdali.ops.schema import registry

    return {name: schema for name, schema in registry().items() if not name.startswith("_")}


def _devices(schema) -> str:
    """The devices column: ``gpu (host)`` when the device placement runs the host implementation."""
    if schema is None:
        return ""
    on_host = getattr(schema.impl, "run_jax", None) is None
    return ", ".join("gpu (host)" if d == "gpu" and on_host else d for d in schema.devices)


def render() -> str:
    """The text of docs/operators.md."""
    dali = json.loads(DALI_LIST.read_text())
    ours = public_registry()
    covered = covered_operators()
    names = sorted(set(dali["operators"]) | set(ours))  # DALI's aliases only where jaxdali has them
    implemented = [n for n in dali["operators"] if n in ours]
    lines = [
        "# Operators: coverage of DALI's `fn` API",
        "",
        "Generated by `python docs/make_operators.py` from the operator registry against DALI "
        f"{dali['dali_version']}'s public operator list (`docs/dali_operators.json`); do not edit by hand.",
        "",
        f"jaxdali implements **{len(implemented)} of DALI's {len(dali['operators'])}** public operators "
        f"(legacy aliases not counted), and {len([n for n in ours if n in NOT_IN_DALI])} of its own.",
        "",
        "* **DALI**: `yes` for a public DALI operator, `alias of X` for a legacy name DALI keeps for X, "
        "`no` for jaxdali's own operators.",
        "* **devices**: the `device=` values jaxdali accepts (`gpu` is the JAX device stage; `gpu (host)`: accepted, "
        "computed by the host implementation, the result placed on the device).",
        "* **checked against DALI in**: the test module (under `tests/`) that compares the operator with DALI.",
        "",
        "| operator | DALI | jaxdali | devices | checked against DALI in | notes |",
        "|---|---|---|---|---|---|",
    ]
    for name in names:
        in_dali = "yes" if name in dali["operators"] else (
            f"alias of `{dali['aliases'][name]}`" if name in dali["aliases"] else "no")
        schema = ours.get(name)
        tests = ", ".join(f"`{t}`" for t in covered.get(name, []))
        note = NOTES.get(name, NOT_IN_DALI.get(name, NOT_IMPLEMENTED.get(name, "")))
        if name in AWAITING_DIFFERENTIAL_TEST:
            note = f"Not compared with DALI: {AWAITING_DIFFERENTIAL_TEST[name]}. {note}".strip()
        lines.append(f"| `{name}` | {in_dali} | {'yes' if schema else '-'} | {_devices(schema)} | {tests} | {note} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    if "--refresh" in sys.argv[1:]:
        DALI_LIST.write_text(json.dumps(dali_operators_from_dali(), indent=1) + "\n")
        print(f"wrote {DALI_LIST}")
    OUT.write_text(render())
    print(f"wrote {OUT}")
