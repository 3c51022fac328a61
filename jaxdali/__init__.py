"""jaxdali: NVIDIA DALI's pipeline API for JAX, on any machine.

Porting DALI code is an import change::

    from jaxdali import pipeline_def, fn, types        # was: from nvidia.dali import ...

A pipeline that flips a batch of two images and casts it to float:

>>> import numpy as np
>>> from jaxdali import fn, pipeline_def, types
>>> @pipeline_def(batch_size=2, num_threads=1, device_id=None)
... def flipped():
...     images = fn.external_source(source=lambda: [np.arange(6, dtype=np.uint8).reshape(2, 3, 1)] * 2,
...                                 layout="HWC")
...     return fn.cast(fn.flip(images, horizontal=1), dtype=types.FLOAT)
>>> pipe = flipped()
>>> (out,) = pipe.run()
>>> out.as_array()[0, :, :, 0].tolist()
[[2.0, 1.0, 0.0], [5.0, 4.0, 3.0]]
>>> out.layout(), len(out)
('HWC', 2)
>>> pipe.close()
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
