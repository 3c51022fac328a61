"""Audio operators: decoding, resampling, spectral features (spectrogram, mel, MFCC) and silence
detection, on the host with NumPy over whole batches."""

from jaxdali.ops.audio import decoder, elementwise, mel, mfcc, nonsilent, resample, spectral  # noqa: F401
