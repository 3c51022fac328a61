"""DALI's ``nvidia.dali.backend`` names for the tensor classes, so ``from jaxdali.backend import
TensorGPU`` ports unchanged (the classes live in ``jaxdali.tensors``)."""

from jaxdali.tensors import TensorCPU as TensorCPU
from jaxdali.tensors import TensorGPU as TensorGPU
from jaxdali.tensors import TensorListCPU as TensorListCPU
from jaxdali.tensors import TensorListGPU as TensorListGPU

__all__ = ["TensorCPU", "TensorGPU", "TensorListCPU", "TensorListGPU"]
