"""DALI's generic operators: constants, tensor plumbing, reductions, Python functions, file reads."""

from jaxdali.ops.generic import batch_order, constants, conversions, dims, joining, metadata  # noqa: F401
from jaxdali.ops.generic import beta, padding, reductions, sequences, slicing  # noqa: F401
