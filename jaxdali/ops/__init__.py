"""Operator implementations; importing this package registers every operator schema."""

from jaxdali.ops import arithmetic, conditional, random, transfer  # noqa: F401
from jaxdali.ops.readers import array_record, caffe, coco, external_source, file  # noqa: F401
from jaxdali.ops.readers import numpy_reader, tfrecord, video, webdataset  # noqa: F401
from jaxdali.ops.readers import mxnet, npy_decoder, sequence  # noqa: F401
from jaxdali.ops import decoders, inflate, video_decoder, video_input  # noqa: F401
from jaxdali.ops import color, geometry  # noqa: F401
from jaxdali.ops import jax_function, resize, warp  # noqa: F401
from jaxdali.ops import resize_crop_mirror, tensor_resize  # noqa: F401
from jaxdali.ops import image  # noqa: F401
from jaxdali.ops import generic  # noqa: F401
from jaxdali.ops import detection  # noqa: F401
from jaxdali.ops.image import jitter, median_blur, morphology, remap  # noqa: F401  (DALI GPU-only operators)
from jaxdali.ops import audio  # noqa: F401
from jaxdali.ops.readers import video_resize  # noqa: F401
from jaxdali.ops.readers import fits, nemo_asr  # noqa: F401
