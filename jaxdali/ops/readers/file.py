"""``fn.readers.file``: encoded files and integer labels from a class-folder tree, a list file or lists."""

from __future__ import annotations

import fnmatch
import re

import numpy as np

from jaxdali.ops.error_policy import ERROR_POLICY_ARG, SkipLog, replace_failed
from jaxdali.ops.readers import storage
from jaxdali.ops.readers.base import LOADER_ARGS, Reader, listing_fingerprint
from jaxdali.ops.readers.shared_listing import frozen, listing
from jaxdali.ops.schema import Arg, OpArgumentError, OpSchema, register
from jaxdali.tensors import TensorListCPU

__all__ = ["FILE_READER", "list_class_folders", "parse_file_list"]

DEFAULT_FILE_FILTERS = ("*.jpg", "*.jpeg", "*.png", "*.bmp", "*.tif", "*.tiff", "*.pnm", "*.ppm", "*.pgm", "*.pbm",
                        "*.jp2", "*.webp", "*.flac", "*.ogg", "*.wav")


def _matcher(patterns, case_sensitive: bool):
    regex = re.compile("|".join(fnmatch.translate(p) for p in patterns), 0 if case_sensitive else re.IGNORECASE)
    return lambda name: regex.match(name) is not None


def list_class_folders(root: str, file_filters=DEFAULT_FILE_FILTERS, dir_filters=None,
                       case_sensitive: bool = False) -> tuple[list[str], list[int]]:
    """Files one level below ``root`` as ``class/file`` paths relative to it, and their labels: class
    folders sorted by name, label = folder index.

    Files directly under ``root`` and deeper folders are ignored; files within a folder are sorted.
    """
    match_file = _matcher(file_filters, case_sensitive)
    match_dir = _matcher(dir_filters, case_sensitive) if dir_filters else (lambda _: True)
    classes = [name for name, is_dir in storage.list_dir(root) if is_dir and match_dir(name)]
    names: list[str] = []
    labels: list[int] = []
    for label, cls in enumerate(classes):
        files = [n for n, is_dir in storage.list_dir(storage.join(root, cls)) if not is_dir and match_file(n)]
        names.extend(f"{cls}/{n}" for n in files)
        labels.extend([label] * len(files))
    return names, labels


def _joined(base: str, names: list[str]) -> list[str]:
    """Each name under ``base`` unless it is absolute."""
    return [storage.join(base, n) for n in names]


_LIST_LINE = re.compile(r"^(.*\S)\s+(-?\d+)\s*$")


def parse_file_list(list_path: str) -> tuple[list[str], list[int]]:
    """Parses ``path label`` lines, reading each from its end, so paths may contain spaces.

    Everything before the whitespace that precedes the label is the path, leading spaces included
    (as in DALI); paths are returned as written. Blank lines are skipped.
    """
    paths, labels = [], []
    for lineno, line in enumerate(storage.read_file(list_path).decode("utf-8").splitlines(), 1):
        if not line.strip():
            continue
        m = _LIST_LINE.match(line)
        if m is None:
            raise ValueError(f"fn.readers.file: line {lineno} of file_list {list_path!r} is not "
                             f"'<path> <integer label>': {line.rstrip()!r}")
        paths.append(m.group(1))
        labels.append(int(m.group(2)))
    return paths, labels


def _list_samples(a) -> tuple[list[str], list[str], np.ndarray, str, str]:
    """(names, paths, labels, listing fingerprint, where) of the reader's arguments ``a``."""
    root, file_list, files, labels = a["file_root"], a["file_list"], a["files"], a["labels"]
    if labels is not None and files is None:
        raise OpArgumentError("fn.readers.file: 'labels' can only be used together with 'files'")
    if file_list is not None and files is not None:
        raise OpArgumentError("fn.readers.file: 'file_list' and 'files' are mutually exclusive")
    # names: the entries as the user wrote them (or class/file under file_root), which is what
    # DALI reports as each sample's source_info; paths: where they are read from.
    if file_list is not None:
        names, label_list = parse_file_list(file_list)
        paths = _joined(root if root is not None else storage.dirname(file_list), names)
        where = f"file_list {file_list!r}"
    elif files is not None:
        names = list(files)
        paths = names if root is None else _joined(root, names)
        if labels is not None and len(labels) != len(files):
            raise OpArgumentError(f"fn.readers.file: 'files' has {len(files)} entries but 'labels' has {len(labels)}")
        label_list = list(labels) if labels is not None else list(range(len(files)))
        where = "'files'"
    elif root is not None:
        if not storage.isdir(root):
            raise FileNotFoundError(f"fn.readers.file: file_root {root!r} is not a directory")
        names, label_list = list_class_folders(root, a["file_filters"], a["dir_filters"], a["case_sensitive_filter"])
        prefix = storage.join(root, "")  # every name is relative: plain concatenation, for long lists
        paths = [prefix + n for n in names]
        where = f"the class folders of file_root {root!r} matching {list(a['file_filters'])}"
    else:
        raise OpArgumentError("fn.readers.file: give one of 'file_root', 'file_list' or 'files'")
    if not names:
        raise RuntimeError(f"fn.readers.file: No files found in {where}")
    labels_array = np.asarray(label_list, dtype=np.int32).reshape(-1, 1)
    labels_array.flags.writeable = False  # shared by the readers of one iterator's pipelines
    return names, paths, labels_array, listing_fingerprint(names, labels_array), where


_LISTING_ARGS = ("file_root", "file_list", "files", "labels", "file_filters", "dir_filters", "case_sensitive_filter")


class FileReader(Reader):
    def __init__(self, node, build):
        super().__init__(node, build)
        a = self.args
        key = ("readers.file",) + tuple(frozen(a[name]) for name in _LISTING_ARGS)
        self.names, self.paths, self.labels, self.listing, self.listing_source = listing(key, lambda: _list_samples(a))
        self.num_samples = len(self.names)
        self._init_sampling(a["shuffle_after_epoch"], a["shuffle_after_epoch_seed"])
        self.skip_log = SkipLog("fn.readers.file")
        self._init_read_ahead(self.paths)

    def fetch(self, index: int) -> np.ndarray | OSError:
        """The file's bytes; with ``error_policy="replace"`` an unreadable file's error is returned, not raised."""
        path = self.paths[index]
        try:
            return np.frombuffer(storage.read_file(path), dtype=np.uint8)
        except OSError as e:
            e.add_note(f"fn.readers.file: reading sample {index} ({path!r})")
            if self.args["error_policy"] != "replace":
                raise
            return e

    def load(self, ctx, indices):
        contents = self.fetch_all(ctx, indices)
        failures = {k: c for k, c in enumerate(contents) if isinstance(c, OSError)}
        for k in failures:
            contents[k] = None  # the runner copies the replacing row here
        names = [self.names[i] for i in np.asarray(indices).tolist()]
        replace_failed(ctx, failures, names, self.skip_log)
        return TensorListCPU(contents, source_info=names), TensorListCPU(self.labels[indices])


FILE_READER = register(OpSchema(
    name="readers.file", impl=FileReader, min_inputs=0, max_inputs=0, num_outputs=2, is_source=True,
    doc=("Reads files and labels. Outputs the raw bytes of each file (1-D uint8) and its label "
         "(int32 of shape (1,))."),
    args=(
        Arg("file_root", "str", None, "Root folder: class sub-folders (sorted; label = folder index), or the base "
            "of relative paths in 'file_list'/'files'."),
        Arg("file_list", "str", None, "Text file of '<path> <label>' lines."),
        Arg("files", "strs", None, "Explicit list of file paths."),
        Arg("labels", "ints", None, "Labels for 'files' (default: the file's index)."),
        Arg("file_filters", "strs", DEFAULT_FILE_FILTERS, "Glob patterns of files to take from class folders."),
        Arg("dir_filters", "strs", None, "Glob patterns of class folders to take."),
        Arg("case_sensitive_filter", "bool", False, "Match the filters case-sensitively."),
        Arg("shuffle_after_epoch", "bool", False,
            "Reshuffle the whole list every epoch, identically on all shards (implies stick_to_shard)."),
        Arg("shuffle_after_epoch_seed", "int", None, "Base seed of the shuffle_after_epoch orders."),
        ERROR_POLICY_ARG,
    ) + LOADER_ARGS))
