"""PyTorch adapter: pipelines as torch tensors (``from nvidia.dali.plugin.pytorch import ...`` ports here).

``DALIGenericIterator``, ``DALIClassificationIterator`` and ``DALIRaggedIterator`` return one dict of
torch tensors per pipeline; ``feed_ndarray`` and ``to_torch_type`` copy and map element types.
``to_torch_tensor`` lives in ``jaxdali.plugin.pytorch.torch_utils`` and the DataLoader proxy in
``jaxdali.plugin.pytorch.experimental.proxy``, as in DALI. This package imports torch; ``import
jaxdali`` does not.
"""

from jaxdali.plugin.epoch_counter import LastBatchPolicy as LastBatchPolicy
from jaxdali.plugin.pytorch import experimental as experimental
from jaxdali.plugin.pytorch.iterator import DALIClassificationIterator as DALIClassificationIterator
from jaxdali.plugin.pytorch.iterator import DALIGenericIterator as DALIGenericIterator
from jaxdali.plugin.pytorch.iterator import DALIRaggedIterator as DALIRaggedIterator
from jaxdali.plugin.pytorch.torch_utils import feed_ndarray as feed_ndarray
from jaxdali.plugin.pytorch.torch_utils import to_torch_type as to_torch_type

__all__ = [
    "DALIGenericIterator",
    "DALIClassificationIterator",
    "DALIRaggedIterator",
    "LastBatchPolicy",
    "feed_ndarray",
    "to_torch_type",
    "experimental",
]
