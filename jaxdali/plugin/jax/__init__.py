"""JAX integration: iterators that return pipeline outputs as (sharded) ``jax.Array``s.

``import jaxdali.plugin.jax as dax`` replaces ``import nvidia.dali.plugin.jax as dax``.
"""

from jaxdali.plugin.base_iterator import LastBatchPolicy as LastBatchPolicy
from jaxdali.plugin.jax import fn as fn
from jaxdali.plugin.jax import integration as integration
from jaxdali.plugin.jax.decorator import data_iterator as data_iterator
from jaxdali.plugin.jax.iterator import DALIGenericIterator as DALIGenericIterator

__all__ = ["DALIGenericIterator", "data_iterator", "fn", "LastBatchPolicy"]
