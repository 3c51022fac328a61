"""Small real image sets for examples, docs and first runs, with no download.

``digits()`` writes scikit-learn's handwritten digits (1797 scans of the digits 0-9, shipped inside
the scikit-learn package) once as an ImageNet-style folder of PNG files and returns its path::

    from jaxdali import fn
    from jaxdali.datasets import digits

    jpegs, labels = fn.readers.file(file_root=digits())   # inside a pipeline definition
"""

from __future__ import annotations

import os
import pathlib
import shutil
import tempfile

__all__ = ["cache_dir", "digits", "DIGITS_SIZE"]

#: Side of the PNG files ``digits()`` writes (the scans are 8 x 8, upsampled so crops stay legible).
DIGITS_SIZE = 32


def cache_dir() -> pathlib.Path:
    """``$JAXDALI_CACHE`` if set, else ``$XDG_CACHE_HOME/jaxdali`` (default ``~/.cache/jaxdali``)."""
    if os.environ.get("JAXDALI_CACHE"):
        return pathlib.Path(os.environ["JAXDALI_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(base) / "jaxdali"


def digits(root: str | os.PathLike | None = None) -> str:
    """The path of a class-folder tree ``<root>/<digit>/<index>.png`` of scikit-learn's digits.

    The 1797 8 x 8 scans (17 gray levels) are upsampled to ``DIGITS_SIZE`` pixels (bicubic) and
    written as 8-bit grayscale PNG files, ten class folders ``0`` ... ``9``. The folder is written
    once (into a temporary folder, then renamed into place, so concurrent first calls are safe) and
    reused afterwards. ``root`` defaults to ``cache_dir() / "digits"``. Needs scikit-learn.
    """
    target = pathlib.Path(root) if root is not None else cache_dir() / "digits"
    if target.is_dir():
        return str(target)
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        raise ImportError("jaxdali.datasets.digits() needs scikit-learn: pip install scikit-learn "
                          "(or pip install 'jaxdali[examples]')") from None
    import cv2
    import numpy as np

    data = load_digits()
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = pathlib.Path(tempfile.mkdtemp(prefix=".digits-", dir=target.parent))
    try:
        scans = np.clip(data.images * (255 / 16), 0, 255).astype(np.uint8)
        for index, (scan, label) in enumerate(zip(scans, data.target)):
            folder = staging / str(label)
            folder.mkdir(exist_ok=True)
            image = np.clip(cv2.resize(scan.astype(np.float32), (DIGITS_SIZE, DIGITS_SIZE),
                                       interpolation=cv2.INTER_CUBIC), 0, 255).astype(np.uint8)
            if not cv2.imwrite(str(folder / f"{index:04d}.png"), image):
                raise OSError(f"could not write {folder / f'{index:04d}.png'}")
        try:
            staging.rename(target)
        except OSError:
            if not target.is_dir():  # not another process winning the race: a real failure
                raise
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return str(target)
