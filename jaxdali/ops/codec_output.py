"""Keeps what the image codecs print off the terminal and hands it to the decoders as messages.

nvImageCodec's log ("[pynvimgcodec] Something went wrong ..."), libjpeg's "Corrupt JPEG data: ..."
lines and the messages of libpng, libtiff and OpenCV are written by C/C++ code straight to file
descriptor 2 (stderr; none was seen on stdout in 10,000 fuzzed files), where ``sys.stderr``
redirection cannot reach them. While at least one decode runs (a ``window``), descriptor 2 points to
an unnamed file; when the last window closes it points back to where it did. A write that had already
chosen the file when it was pointed back may land after the last read: such text is passed on when the
next capture starts or the process exits, and the file is emptied only then. Each window learns the
codec lines written while it was open; text that is not a codec line (a warning of another thread
meanwhile, say) is passed on to the real stderr, in order, as soon as a window ends.

A window that overlapped another one cannot tell whose a line is (``Seen.shared``): the decoder
then runs the sample again in a window of its own (``window(alone=True)``), which waits for the
other windows to end and keeps new ones from opening. Clean images write nothing, so in normal
operation nothing runs twice.
"""

from __future__ import annotations

import atexit
import contextlib
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
    r"|EstimateStripByteCounts: |ReadOK: "
    r"|\w+: .*(TIFF|IFD|[Dd]irectory|[Ss]trip|[Tt]ile|[Ss]canline|[Tt]ag \d|Photometric|compression scheme))")


# Parts of codec messages that identify them anywhere in a line: the threads of one batched decode
# (nvImageCodec decodes a batch in parallel) write at once, and their messages interleave mid-line.
_CODEC_FRAGMENT = re.compile(r"\[(py)?nvimgcodec|\[libjpeg|libjpeg_turbo|Premature end of JPEG|Corrupt JPEG data"
                             r"|Something went wrong during decoding image")


def codec_lines(text: str) -> tuple[list[str], list[str]]:
    """Splits ``text`` into (codec lines without colour codes, the other lines as written). Blank
    lines are dropped: OpenCV ends each of its messages with one."""
    codec, other = [], []
    for line in text.splitlines(keepends=True):
        plain = _ANSI.sub("", line).strip()
        if not plain:
            continue
        if _CODEC_LINE.match(plain) or _CODEC_FRAGMENT.search(plain):
            codec.append(plain)
        else:
            other.append(line)
    return codec, other


class Seen:
    """What one window saw: the codec ``lines`` written while it was open, and whether another window
    was open at the same time (``shared``: some lines may be the other window's)."""

    __slots__ = ("lines", "shared")

    def __init__(self):
        self.lines: list[str] = []
        self.shared = False


class CodecOutput:
    """The process-wide capture of stderr around decodes (see the module docstring)."""

    def __init__(self, fd: int = 2):
        self._fd = fd
        self._cond = threading.Condition()
        self._active = 0
        self._alone = False  # an exclusive window is open or waiting for the others to end
        self._started = 0
        self._file = -1  # the capture file, created on first use
        self._saved = -1  # where the descriptor pointed before the capture
        self._passed_on = 0  # bytes of the capture file already handled

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
            start = os.fstat(self._file).st_size
        try:
            yield seen
        finally:
            with self._cond:
                end = os.fstat(self._file).st_size
                seen.shared = overlapped or self._started != started
                if end > start:
                    seen.lines = codec_lines(os.pread(self._file, end - start, start).decode("utf-8", "replace"))[0]
                self._active -= 1
                if self._active == 0:
                    self._restore()
                elif end > self._passed_on:
                    self._pass_on(end, final=False, to=self._saved)
                if alone:
                    self._alone = False
                self._cond.notify_all()

    def catch_up(self) -> None:
        """Passes on text that reached the capture file after the last window closed (called at exit, and
        before each capture starts)."""
        if not self._cond.acquire(timeout=1.0):  # at exit, never wait on a thread that may not run again
            return
        try:
            if self._active == 0:
                self._catch_up()
        finally:
            self._cond.release()

    # -- with the lock held ------------------------------------------------------------------------
    def _redirect(self) -> None:
        if self._file < 0:
            self._file = _anonymous_append_file()
        else:
            self._catch_up()
            os.ftruncate(self._file, 0)  # long after the descriptor pointed back: no write is under way
            self._passed_on = 0
        self._saved = os.dup(self._fd)
        os.dup2(self._file, self._fd)

    def _restore(self) -> None:
        """Points the descriptor back, then passes on what the capture file holds: text that another thread
        wrote until the moment the descriptor changed (measured after it). A write that had already
        chosen the file and lands after the measure is passed on by ``_catch_up``: the file is emptied
        only when the next capture starts."""
        os.dup2(self._saved, self._fd)
        size = os.fstat(self._file).st_size
        if size > self._passed_on:
            self._pass_on(size, final=True, to=self._saved)
        os.close(self._saved)
        self._saved = -1

    def _catch_up(self) -> None:
        if self._file >= 0:
            size = os.fstat(self._file).st_size
            if size > self._passed_on:
                self._pass_on(size, final=True, to=self._fd)

    def _pass_on(self, size: int, final: bool, to: int) -> None:
        """Writes the new non-codec text of the capture file (up to ``size``) to descriptor ``to`` (the
        real one), whole lines unless ``final``; logs the codec lines at debug level."""
        data = os.pread(self._file, size - self._passed_on, self._passed_on)
        if not final:
            data = data[:data.rfind(b"\n") + 1]
        self._passed_on += len(data)
        codec, other = codec_lines(data.decode("utf-8", "replace"))
        for line in codec:
            _log.debug("codec: %s", line)
        if other:
            os.write(to, "".join(other).encode("utf-8", "replace"))


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
atexit.register(CODEC_OUTPUT.catch_up)
