"""JAX integration: iterators that return pipeline outputs as (sharded) ``jax.Array``s.

``import jaxdali.plugin.jax as dax`` replaces ``import nvidia.dali.plugin.jax as dax``.

A source that ends each epoch after four samples, read in batches of two as ``jax.Array``s:

>>> import numpy as np
>>> from jaxdali import fn
>>> from jaxdali.plugin.jax import data_iterator
>>> def four_numbers(info):
...     if info.idx_in_epoch >= 4:
...         raise StopIteration
...     return np.float32([info.idx_in_epoch])
>>> @data_iterator(output_map=["x"], auto_reset=True)
... def numbers():
...     return fn.external_source(source=four_numbers, batch=False)
>>> iterator = numbers(batch_size=2, device_id=None)
>>> [batch["x"][:, 0].tolist() for batch in iterator]
[[0.0, 1.0], [2.0, 3.0]]
>>> [type(batch["x"]).__name__ for batch in iterator]  # the next epoch
['ArrayImpl', 'ArrayImpl']
>>> iterator.close()
"""

from jaxdali.plugin.epoch_counter import LastBatchPolicy as LastBatchPolicy
from jaxdali.plugin.jax import fn as fn
from jaxdali.plugin.jax import integration as integration
from jaxdali.plugin.jax.decorator import data_iterator as data_iterator
from jaxdali.plugin.jax.iterator import DALIGenericIterator as DALIGenericIterator

__all__ = ["DALIGenericIterator", "data_iterator", "fn", "LastBatchPolicy"]
