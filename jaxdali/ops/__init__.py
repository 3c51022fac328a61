"""Operator implementations; importing this package registers every operator schema."""

from jaxdali.ops import arithmetic, random, transfer  # noqa: F401
from jaxdali.ops.readers import external_source, file  # noqa: F401
from jaxdali.ops.readers import caffe  # noqa: F401
from jaxdali.ops.readers import coco  # noqa: F401
from jaxdali.ops.readers import array_record  # noqa: F401
from jaxdali.ops import decoders  # noqa: F401
from jaxdali.ops import color, geometry  # noqa: F401
from jaxdali.ops import jax_function, resize, warp  # noqa: F401
