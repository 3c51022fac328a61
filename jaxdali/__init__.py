"""jaxdali: NVIDIA DALI's pipeline API for JAX, on any machine.

Porting DALI code is an import change::

    from jaxdali import pipeline_def, fn, types        # was: from nvidia.dali import ...
"""

from jaxdali import fn as fn
from jaxdali import types as types
from jaxdali.pipeline.decorator import pipeline_def as pipeline_def
from jaxdali.pipeline.pipeline import Pipeline as Pipeline
from jaxdali.tensors import TensorCPU as TensorCPU
from jaxdali.tensors import TensorGPU as TensorGPU
from jaxdali.tensors import TensorListCPU as TensorListCPU
from jaxdali.tensors import TensorListGPU as TensorListGPU

__version__ = "0.1.0"

__all__ = ["fn", "types", "pipeline_def", "Pipeline", "TensorCPU", "TensorGPU", "TensorListCPU", "TensorListGPU"]
