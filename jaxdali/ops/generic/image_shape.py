"""``fn.peek_image_shape``: the decoded shape of encoded images, read from their headers."""

from __future__ import annotations

import numpy as np

from jaxdali.ops.decoders import decoded_shape
from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import Arg, OpSchema, register
from jaxdali.tensors import TensorListCPU
from jaxdali.types import DALIDataType, DALIImageType, to_numpy_type

__all__ = ["PEEK_IMAGE_SHAPE"]


class PeekImageShape(Operator):
    """[height, width, channels] of each image as the decoder would output it, without decoding it."""

    def run(self, ctx, inputs, args):
        batch = inputs[0]
        samples = batch.samples()
        sources = batch.source_info or [None] * len(samples)
        image_type = DALIImageType(self.args["image_type"])
        adjust = bool(self.args["adjust_orientation"])
        out = np.empty((len(samples), 3), to_numpy_type(self.args["dtype"]))

        def work(lo: int, hi: int) -> None:
            for i in range(lo, hi):
                out[i] = decoded_shape(samples[i], image_type, "peek_image_shape", i, sources[i], adjust)

        ctx.parallel_for(work, len(samples))
        return TensorListCPU(out)


PEEK_IMAGE_SHAPE = register(OpSchema(
    name="peek_image_shape", impl=PeekImageShape,
    doc="The shape [height, width, channels] that decoding each image would give (EXIF orientation applied "
        "unless `adjust_orientation=False`; channels of `image_type`), read from the image header.",
    args=(Arg("dtype", "dtype", DALIDataType.INT64, "Output type."),
          Arg("image_type", "image_type", DALIImageType.RGB, "The colour space the shape is for."),
          Arg("adjust_orientation", "bool", True, "Swap height and width for EXIF-rotated images."))))
