"""``fn.readers.nemo_asr``: speech samples (audio and transcript) listed in NVIDIA NeMo manifests.

A manifest is JSON lines, one object per sample: ``audio_filepath`` (required; a relative path is
read from the working directory, as DALI does), ``offset`` and ``duration`` in seconds (the part of
the file to read; no duration: to its end) and ``text``. Blank lines are skipped, and so are lines
that are not JSON objects with an ``audio_filepath``, with a warning (as DALI). Entries whose
duration is outside ``min_duration``/``max_duration`` are dropped when the manifests are read, so
sharding and ``read_idxs`` count the kept entries only (``read_idxs`` from 0 in each
manifest file, as DALI). The files are read on the worker pool (or
ahead, see ``Reader``) and decoded by ``jaxdali.ops.audio.decoder.decode_audio``.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass

import numpy as np

from jaxdali.ops.audio import sinc
from jaxdali.ops.audio.decoder import decode_audio
from jaxdali.ops.readers import storage
from jaxdali.ops.readers.base import LOADER_ARGS, Reader, listing_fingerprint
from jaxdali.ops.readers.shared_listing import frozen, listing
from jaxdali.ops.schema import REQUIRED, Arg, OpArgumentError, OpSchema, register
from jaxdali.tensors import TensorListCPU
from jaxdali.types import DALIDataType, to_numpy_type

__all__ = ["ManifestEntry", "NEMO_ASR", "parse_manifest"]

_OP = "readers.nemo_asr"
_OUTPUT_TYPES = (DALIDataType.INT16, DALIDataType.INT32, DALIDataType.FLOAT)


@dataclass(frozen=True)
class ManifestEntry:
    """One sample of a manifest: where its audio is and which part of it, and its transcript."""

    audio_filepath: str
    offset: float
    duration: float
    text: str


def _number(entry: dict, key: str, where: str) -> float:
    value = entry.get(key, 0.0)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ValueError(f"fn.{_OP}: {where}: {key!r} must be a number >= 0, got {value!r}")
    return float(value)


def parse_manifest(path: str) -> list[ManifestEntry]:
    """The entries of one manifest file, in order. Lines that are not JSON objects with an ``audio_filepath``
    are skipped with a warning (as DALI); a bad ``offset``, ``duration`` or ``text`` is a ValueError naming
    the file and line."""
    try:
        lines = storage.read_file(path).decode("utf-8").splitlines()
    except FileNotFoundError:
        raise FileNotFoundError(f"fn.{_OP}: manifest file {path!r} does not exist") from None
    entries = []
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"line {lineno} of manifest {path!r}"
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as e:
            entry = e.msg
        if not isinstance(entry, dict) or not isinstance(entry.get("audio_filepath"), str):
            # DALI skips such lines with a warning; so does jaxdali, naming the line.
            why = f"is not JSON ({entry})" if isinstance(entry, str) else "has no 'audio_filepath' string"
            warnings.warn(f"fn.{_OP}: skipping {where}: it {why}", stacklevel=2)
            continue
        text = entry.get("text", "")
        if not isinstance(text, str):
            raise ValueError(f"fn.{_OP}: {where}: 'text' must be a string, got {text!r}")
        entries.append(ManifestEntry(entry["audio_filepath"], _number(entry, "offset", where),
                                     _number(entry, "duration", where), text))
    return entries


def _list_entries(manifests: list[str], low: float, high: float) -> tuple:
    """(entries, each one's index among the kept entries of its manifest, transcripts as UTF-8 bytes,
    listing fingerprint, where) of the entries of ``manifests`` whose duration is within [low, high] (a bound
    <= 0: none); the arrays are read-only (shared by the readers of one iterator's pipelines)."""
    entries, manifest_idxs = [], []
    for manifest in manifests:
        kept = [e for e in parse_manifest(manifest)
                if not (low > 0 and e.duration < low) and not (high > 0 and e.duration > high)]
        entries += kept
        manifest_idxs += range(len(kept))
    source = f"manifests {manifests}"
    if not entries:
        raise RuntimeError(f"fn.{_OP}: no samples in {source} (after min_duration={low}, max_duration={high})")
    # DALI's read_idxs counts the kept entries of each manifest file from 0.
    idxs = np.asarray(manifest_idxs, np.int64).reshape(-1, 1)
    texts = [np.frombuffer(e.text.encode("utf-8"), np.uint8) for e in entries]  # bytes: read-only already
    idxs.flags.writeable = False
    names = [f"{e.audio_filepath}@{e.offset}+{e.duration}:{e.text}" for e in entries]
    return entries, idxs, texts, listing_fingerprint(names), source


def _num_outputs(a) -> int:
    return 1 + bool(a["read_sample_rate"]) + bool(a["read_text"]) + bool(a["read_idxs"])


class NemoAsrReader(Reader):
    """Lists the kept manifest entries once; each batch reads and decodes their files in parallel."""

    def __init__(self, node, build):
        super().__init__(node, build)
        a = self.args
        manifests = a["manifest_filepaths"]
        if not manifests:
            raise OpArgumentError(f"fn.{_OP}: argument 'manifest_filepaths' must name at least one manifest file")
        if a["sample_rate"] < 0 and a["sample_rate"] != -1:
            raise OpArgumentError(f"fn.{_OP}: argument 'sample_rate' must be > 0 (or -1: keep each file's rate), "
                                  f"got {a['sample_rate']}")
        low, high = a["min_duration"], a["max_duration"]
        key = (_OP, frozen(manifests), low, high)
        self.entries, self._idxs, self._texts, self.listing, self.listing_source = listing(
            key, lambda: _list_entries(list(manifests), low, high))
        self.num_samples = len(self.entries)
        self._dtype = np.dtype(to_numpy_type(a["dtype"]))
        self._lobes = sinc.lobes_for_quality(a["quality"])
        self._init_sampling(a["shuffle_after_epoch"], a["shuffle_after_epoch_seed"])
        self._init_read_ahead([e.audio_filepath for e in self.entries])

    def _mapped(self, path: str) -> bool:
        """Whether ``fetch`` memory-maps the file (and the decoder may then open it by its path)."""
        return not self.args["dont_use_mmap"] and not storage.is_remote(path)

    def fetch(self, index: int) -> np.ndarray:
        """The audio file's bytes: memory-mapped where local (a window of a long WAV file then touches only its
        own pages, as DALI reads it), read whole where remote or with ``dont_use_mmap``."""
        path = self.entries[index].audio_filepath
        try:
            if self._mapped(path):
                return storage.map_file(path)
            return np.frombuffer(storage.read_file(path), dtype=np.uint8)
        except OSError as e:
            e.add_note(f"fn.{_OP}: reading the audio of manifest entry {index} ({path!r})")
            raise

    def load(self, ctx, indices):
        a = self.args
        contents = self.fetch_all(ctx, indices)
        n = len(indices)
        audio: list = [None] * n
        rates = np.empty(n, np.float32)
        target = float(a["sample_rate"])

        def work(lo: int, hi: int) -> None:
            for k in range(lo, hi):
                entry = self.entries[indices[k]]
                path = entry.audio_filepath if self._mapped(entry.audio_filepath) else None
                audio[k], rates[k] = decode_audio(contents[k], self._dtype, target, a["downmix"], self._lobes,
                                                  f"fn.{_OP}: {entry.audio_filepath!r}", (entry.offset, entry.duration),
                                                  path)

        ctx.parallel_for(work, n)
        paths = [self.entries[i].audio_filepath for i in indices]
        outputs = [TensorListCPU(audio, "", source_info=paths)]
        if a["read_sample_rate"]:
            outputs.append(TensorListCPU(rates, ""))
        if a["read_text"]:
            outputs.append(TensorListCPU([self._texts[i] for i in indices], ""))
        if a["read_idxs"]:
            outputs.append(TensorListCPU(self._idxs[indices], ""))
        return outputs


NEMO_ASR = register(OpSchema(
    name=_OP, impl=NemoAsrReader, min_inputs=0, max_inputs=0, num_outputs=_num_outputs, is_source=True,
    doc=("Reads speech samples from NVIDIA NeMo manifests (JSON lines with `audio_filepath`, optional `offset`, "
         "`duration` and `text`). Outputs the decoded audio ((length,) with `downmix`, else (length, channels)), "
         "then, as asked, the file's sample rate (float32 scalar; the file's own rate even when `sample_rate` "
         "resamples, as in DALI), the transcript as UTF-8 bytes (uint8, no terminator) and the entry's index "
         "among the kept entries of its manifest file (int64 of shape (1,)).\n\n.. note:: Bit-exact with DALI 2.4 "
         "on PCM and FLAC files (downmixing 6 channels: within 1e-7); when resampling, within 1e-4 of full scale "
         "(see fn.decoders.audio)."),
    args=(
        Arg("manifest_filepaths", "strs", REQUIRED, "Paths of the NeMo manifest files (read in this order)."),
        Arg("sample_rate", "float", -1.0, "Rate in Hz to resample the audio to (-1: keep each file's rate)."),
        Arg("downmix", "bool", True, "Average all channels into one (1-D output)."),
        Arg("dtype", "dtype", DALIDataType.FLOAT, "Output type: INT16, INT32 or FLOAT.", choices=_OUTPUT_TYPES),
        Arg("quality", "float", 50.0, "Resampling quality, 0 (3 sinc lobes) to 100 (64 lobes).", min=0, max=100),
        Arg("min_duration", "float", 0.0, "If > 0, drop entries whose duration is shorter (seconds)."),
        Arg("max_duration", "float", 0.0, "If > 0, drop entries whose duration is longer (seconds)."),
        Arg("read_sample_rate", "bool", True, "Output each sample's sample rate."),
        Arg("read_text", "bool", True, "Output each sample's transcript."),
        Arg("read_idxs", "bool", False, "Output each sample's index among the kept entries of its manifest file."),
        Arg("normalize_text", "bool", None, "Unused, as in DALI (deprecated there).", hint=True),
        Arg("shuffle_after_epoch", "bool", False,
            "Reshuffle all entries every epoch, identically on all shards (implies stick_to_shard)."),
        Arg("shuffle_after_epoch_seed", "int", None, "Base seed of the shuffle_after_epoch orders."),
    ) + LOADER_ARGS))
