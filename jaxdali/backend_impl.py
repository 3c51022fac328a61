"""DALI's ``nvidia.dali.backend_impl`` names for the tensor classes (DALI's tests and some user code
import them from there), the same classes as ``jaxdali.backend``."""

from jaxdali.backend import TensorCPU as TensorCPU
from jaxdali.backend import TensorGPU as TensorGPU
from jaxdali.backend import TensorListCPU as TensorListCPU
from jaxdali.backend import TensorListGPU as TensorListGPU

__all__ = ["TensorCPU", "TensorGPU", "TensorListCPU", "TensorListGPU"]
