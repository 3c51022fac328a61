"""Where a warning should point: the first frame outside the jaxdali package."""

from __future__ import annotations

import os
import sys

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def user_stacklevel() -> int:
    """The ``stacklevel`` for ``warnings.warn`` called right here that names the user's line: frames of
    jaxdali itself (however deeply nested, e.g. through iterator subclasses) are skipped."""
    level, frame = 1, sys._getframe(1)  # the frame calling warnings.warn is stacklevel 1
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame = frame.f_back
        level += 1
    return level
