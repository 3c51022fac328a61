"""``LastBatchPolicy`` where DALI users import it from (``nvidia.dali.plugin.base_iterator``).

The iterator machinery lives in modules named after their jobs: ``epoch_counter`` (the pure counter
model), ``driver`` (the iterator that drives pipelines), ``protocols`` (what it needs from a
pipeline), ``resume`` (checkpoint data and elastic resume) and ``messages`` (error and warning texts).

>>> from jaxdali.plugin.base_iterator import LastBatchPolicy
>>> LastBatchPolicy.PARTIAL
<LastBatchPolicy.PARTIAL: 2>
"""

from jaxdali.plugin.epoch_counter import EpochCounters as EpochCounters
from jaxdali.plugin.epoch_counter import LastBatchPolicy as LastBatchPolicy
from jaxdali.plugin.epoch_counter import ReaderLayout as ReaderLayout
from jaxdali.plugin.protocols import IterablePipeline as IterablePipeline
from jaxdali.plugin.protocols import IteratorAPI as IteratorAPI

__all__ = ["LastBatchPolicy", "ReaderLayout", "EpochCounters", "IteratorAPI", "IterablePipeline"]
