"""DALI's generic operators: constants, tensor plumbing, reductions, Python functions, file reads."""

from jaxdali.ops.generic import constants, conversions, dims, joining, reductions  # noqa: F401
