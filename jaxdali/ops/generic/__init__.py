"""DALI's generic operators: constants, tensor plumbing, reductions, Python functions, file reads."""

from jaxdali.ops.generic import batch_order, constants, conversions, dims, joining, metadata  # noqa: F401
from jaxdali.ops.generic import beta, file_read, image_shape, padding, python_function, reductions  # noqa: F401
from jaxdali.ops.generic import decoder_windows, experimental_decoders, sequences, slicing  # noqa: F401
