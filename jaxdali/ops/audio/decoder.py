"""``fn.decoders.audio`` (and its legacy name ``fn.audio_decoder``): encoded audio files to samples.

Each file decodes on the worker pool (libsndfile, GIL released; FFmpeg for what libsndfile cannot
read, see ``codec``). Output 0 is ``(length, channels)`` interleaved samples, or ``(length,)`` with
``downmix=True`` (the channels' mean); output 1 is the sample rate (float32 scalar): the file's, or
``sample_rate`` when given, in which case the audio is resampled (``sinc``, lobes from ``quality``).
Downmixing and resampling work in float32; integer outputs are then scaled to the type's range.
"""

from __future__ import annotations

import numpy as np

from jaxdali.ops.audio import codec, sinc
from jaxdali.ops.audio.normalize import from_unit_range
from jaxdali.ops.layouts import sample_name
from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import Arg, OpSchema, register
from jaxdali.tensors import TensorListCPU
from jaxdali.types import DALIDataType, to_numpy_type

__all__ = ["AUDIO", "AUDIO_DECODER", "decode_audio"]

_OUTPUT_TYPES = (DALIDataType.INT16, DALIDataType.INT32, DALIDataType.FLOAT)


class AudioDecoder(Operator):
    """Decodes, optionally downmixes and resamples each sample's file."""

    def __init__(self, node, build):
        super().__init__(node, build)
        self._op = node.schema.name
        self._dtype = np.dtype(to_numpy_type(self.args["dtype"]))
        self._lobes = sinc.lobes_for_quality(self.args["quality"])

    def run(self, ctx, inputs, args):
        (encoded,) = inputs
        n = len(encoded)
        samples = encoded.samples()
        target = args.per_sample("sample_rate", np.float32)
        downmix = self.args["downmix"]
        audio: list = [None] * n
        rates = np.empty(n, np.float32)

        def work(lo: int, hi: int) -> None:
            for i in range(lo, hi):
                where = f"fn.{self._op}: {sample_name(encoded.source_info, i)}"
                data = np.asarray(samples[i])
                if data.dtype != np.uint8:
                    raise TypeError(f"{where}: the input must hold encoded bytes (uint8), got dtype {data.dtype}")
                if target[i] < 0:
                    raise ValueError(f"{where}: argument 'sample_rate' must be >= 0, got {target[i]}")
                audio[i], file_rate = decode_audio(data.reshape(-1), self._dtype, float(target[i]), downmix,
                                                   self._lobes, where)
                rates[i] = target[i] if target[i] > 0 else file_rate

        ctx.parallel_for(work, n)
        return [TensorListCPU(audio, ""), TensorListCPU(rates, "")]


def decode_audio(data: np.ndarray, dtype: np.dtype, target: float, downmix: bool, lobes: int, where: str,
                 window: tuple[float, float] = (0.0, 0.0), path: str | None = None) -> tuple[np.ndarray, float]:
    """One encoded file as ``dtype`` samples ((length, channels), or (length,) downmixed) and the file's rate.

    ``target`` > 0 resamples to that rate (``lobes`` sinc lobes).
    ``window`` = (offset, duration) in seconds decodes only that part of the file (duration 0: to its
    end), before downmixing and resampling. ``path``: the local file ``data`` maps (see ``codec.decode``).
    ``where`` starts the error message of a file that fails.
    """
    resampling = target > 0
    float_work = resampling or downmix
    try:
        x, rate = codec.decode(data, np.float32 if float_work else dtype, window, path)
    except codec.AudioDecodeError as e:
        raise codec.AudioDecodeError(f"{where}: cannot decode the audio ({e})") from None
    if not float_work:
        return x, rate
    if downmix:
        x = _channel_mean(x)
    if resampling and target != rate:
        x = sinc.resample(x, rate, target, lobes)
    return from_unit_range(x, dtype), rate


def _channel_mean(x: np.ndarray) -> np.ndarray:
    """The mean of the channels of float32 (length, channels) samples: the sum in channel order, then / count
    (what ``x.mean(axis=1)`` computes for up to 7 channels), in whole-column adds: NumPy's reduction along
    the short axis is about 10x slower."""
    total = x[:, 0].copy()
    for c in range(1, x.shape[1]):
        total += x[:, c]
    if x.shape[1] > 1:
        total /= np.float32(x.shape[1])
    return total


_DOC = ("Decodes encoded audio files (WAV, FLAC, Ogg Vorbis/Opus, AIFF, MP3, ... through libsndfile; other "
        "containers through FFmpeg) into (length, channels) samples, or (length,) with `downmix`, and "
        "outputs the sample rate as a second output. With `sample_rate` the audio is resampled by a "
        "windowed-sinc filter whose width follows `quality`.\n\n.. note:: Bit-exact with DALI 2.4 on PCM, "
        "FLAC and downmixed data; Ogg Vorbis within the codec library's rounding (1 LSB for INT16). When "
        "resampling, within 1e-4 of full scale: outputs sit at their exact input positions, which DALI "
        "advances in float32 steps. Files libsndfile cannot read (AAC, MP4 audio) are "
        "decoded with FFmpeg where DALI fails.")
_ARGS = (
    Arg("sample_rate", "float", 0.0, "Target sample rate in Hz (0: keep the file's rate).", tensor=True, min=0),
    Arg("downmix", "bool", False, "Average all channels into one (1-D output)."),
    Arg("dtype", "dtype", DALIDataType.FLOAT, "Output type: INT16, INT32 or FLOAT.", choices=_OUTPUT_TYPES),
    Arg("quality", "float", 50.0, "Resampling quality, 0 (3 sinc lobes) to 100 (64 lobes).", min=0, max=100),
)

AUDIO = register(OpSchema(name="decoders.audio", impl=AudioDecoder, doc=_DOC, args=_ARGS, num_outputs=2))
AUDIO_DECODER = register(OpSchema(name="audio_decoder", impl=AudioDecoder, doc="Legacy name of fn.decoders.audio. "
                                  + _DOC, args=_ARGS, num_outputs=2))
