"""Keeps what the image codecs print off the terminal and hands it to the decoders as messages.

nvImageCodec's log ("[pynvimgcodec] Something went wrong ..."), libjpeg's "Corrupt JPEG data: ..."
lines and the messages of libpng, libtiff and OpenCV are written by C/C++ code straight to file
descriptors 1 and 2, where ``sys.stdout``/``sys.stderr`` redirection cannot reach them. While at
least one decode runs (a ``window``), descriptors 1 and 2 point to two unnamed files; when the last
window closes they point back to where they did. Each window learns the codec lines written while
it was open; text that is not a codec line (a ``print`` of another thread meanwhile, say) is passed
on to the real descriptor, in order, as soon as a window ends.

A window that overlapped another one cannot tell whose a line is (``Seen.shared``): the decoder
then runs the sample again in a window of its own (``window(alone=True)``), which waits for the
other windows to end and keeps new ones from opening. Clean images write nothing, so in normal
operation nothing runs twice.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import re
import tempfile
import threading
from typing import Iterator

__all__ = ["CODEC_OUTPUT", "CodecOutput", "Seen", "codec_lines"]

_log = logging.getLogger("jaxdali.decoders")

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# Lines the codecs write: nvImageCodec's log format, libjpeg's message catalogue (its warnings and errors
# start with one of these words), libpng, OpenCV's log and libtiff's "<function>: <message>". Anything
# else is passed on to the terminal.
_CODEC_LINE = re.compile(
    r"^(\[(TRACE|DEBUG|INFO|WARNING|ERROR|FATAL)\] \[[\w .-]+\]"
    r"|(Corrupt|Premature|Improper|Invalid|Unsupported|Unknown|Bogus|Inconsistent|Missing|Insufficient|Cannot"
    r"|Didn't expect|Wrong JPEG|Not a JPEG|JPEG datastream|Empty JPEG|Image too big|Maximum supported"
    r"|Sampling factors|Scan script|Requested features|Backing store|Buffer passed|Application transferred"
    r"|(Huffman|Quantization|Arithmetic) table|Warning: (unknown JFIF|thumbnail image)|Input file read error)(\s|$)"
    r"|libpng (warning|error)|\[ ?(WARN|ERROR|INFO)\s*:\d|OpenCV\(|imdecode_"
    r"|_?TIFF\w*: |\w+(Decode|Encode|DecodeRow|Decoder|PreDecode|SetupDecode): |OJPEG\w*: |JPEGLib: "
    r"|Predictor\w*: |(hor|fp|swab)\w*Acc\w*: |gt(Tile|Strip)\w*: |ChopUpSingleUncompressedStrip: "
    r"|EstimateStripByteCounts: |ReadOK: )")


def codec_lines(text: str) -> tuple[list[str], list[str]]:
    """Splits ``text`` into (codec lines without colour codes, the other lines as written). Blank
    lines are dropped: OpenCV ends each of its messages with one."""
    codec, other = [], []
    for line in text.splitlines(keepends=True):
        plain = _ANSI.sub("", line).strip()
        if not plain:
            continue
        if _CODEC_LINE.match(plain):
            codec.append(plain)
        else:
            other.append(line)
    return codec, other


def _flush_c_streams() -> None:
    """Flushes C stdio buffers (``fflush(NULL)``), so buffered codec text lands inside its window."""
    _libc.fflush(None)


_libc = ctypes.CDLL(None)


class Seen:
    """What one window saw: the codec ``lines`` written while it was open, and whether another window
    was open at the same time (``shared``: some lines may be the other window's)."""

    __slots__ = ("lines", "shared")

    def __init__(self):
        self.lines: list[str] = []
        self.shared = False


class CodecOutput:
    """The process-wide capture of descriptors 1 and 2 around decodes (see the module docstring)."""

    _FDS = (1, 2)

    def __init__(self):
        self._cond = threading.Condition()
        self._active = 0
        self._alone = False  # an exclusive window is open or waiting for the others to end
        self._started = 0
        self._files: list[int] = []  # capture file per descriptor, created on first use
        self._saved: list[int] = []  # where descriptors 1 and 2 pointed before the capture
        self._passed_on = [0, 0]  # bytes of each capture file already handled

    @contextlib.contextmanager
    def window(self, alone: bool = False) -> Iterator[Seen]:
        """Captures the codecs' output while the ``with`` body runs; the ``Seen`` it yields is filled
        when the body ends (also when it raises)."""
        seen = Seen()
        with self._cond:
            while self._alone:
                self._cond.wait()
            if alone:
                self._alone = True
                while self._active:
                    self._cond.wait()
            if self._active == 0:
                self._redirect()
            self._active += 1
            self._started += 1
            started, overlapped = self._started, self._active > 1
            start = self._sizes()
        try:
            yield seen
        finally:
            _flush_c_streams()
            with self._cond:
                end = self._sizes()
                seen.shared = overlapped or self._started != started
                seen.lines = codec_lines(self._read(start, end))[0]
                self._active -= 1
                self._pass_on(final=self._active == 0)
                if self._active == 0:
                    self._restore()
                if alone:
                    self._alone = False
                self._cond.notify_all()

    # -- with the lock held ------------------------------------------------------------------------
    def _redirect(self) -> None:
        if not self._files:
            self._files = [_anonymous_append_file() for _ in self._FDS]
        self._saved = [os.dup(fd) for fd in self._FDS]
        for fd, file in zip(self._FDS, self._files):
            os.dup2(file, fd)

    def _restore(self) -> None:
        for fd, saved in zip(self._FDS, self._saved):
            os.dup2(saved, fd)
            os.close(saved)
        self._saved = []
        for file in self._files:
            os.ftruncate(file, 0)
        self._passed_on = [0, 0]

    def _sizes(self) -> tuple[int, ...]:
        return tuple(os.fstat(f).st_size for f in self._files)

    def _read(self, start: tuple[int, ...], end: tuple[int, ...]) -> str:
        return "".join(os.pread(f, e - s, s).decode("utf-8", "replace")
                       for f, s, e in zip(self._files, start, end) if e > s)

    def _pass_on(self, final: bool) -> None:
        """Writes the new non-codec text of each capture file to the real descriptor (whole lines
        unless ``final``); logs the codec lines at debug level."""
        for k, (file, saved) in enumerate(zip(self._files, self._saved)):
            size = os.fstat(file).st_size
            if size <= self._passed_on[k]:
                continue
            data = os.pread(file, size - self._passed_on[k], self._passed_on[k])
            if not final:
                data = data[:data.rfind(b"\n") + 1]
            self._passed_on[k] += len(data)
            codec, other = codec_lines(data.decode("utf-8", "replace"))
            for line in codec:
                _log.debug("codec: %s", line)
            if other:
                os.write(saved, "".join(other).encode("utf-8", "replace"))


def _anonymous_append_file() -> int:
    """A read-write descriptor of an unnamed temporary file, opened for appending (concurrent writers
    never overwrite each other)."""
    fd, path = tempfile.mkstemp(prefix="jaxdali-codec-")
    try:
        appending = os.open(path, os.O_RDWR | os.O_APPEND)
    finally:
        os.unlink(path)
        os.close(fd)
    return appending


#: The capture every decoder uses (descriptors are process-wide, so there is one).
CODEC_OUTPUT = CodecOutput()
