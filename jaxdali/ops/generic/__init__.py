"""DALI's generic operators: constants, tensor plumbing, reductions, Python functions, file reads."""

from jaxdali.ops.generic import constants, conversions  # noqa: F401
