"""``fn.readers.video_resize``: ``fn.readers.video`` with every frame resized as ``fn.resize`` resizes.

The sequences, their order, sharding and checkpoints are the video reader's; the frames of each
batch are then resized by ``fn.resize``'s implementation with this operator's resize arguments,
after the conversion to ``dtype``.
"""

from __future__ import annotations

import dataclasses

from jaxdali.ops.operator import ArgValues
from jaxdali.ops.readers.video import VIDEO_READER, LegacyVideoReader
from jaxdali.ops.resize import RESIZE, Resize
from jaxdali.ops.schema import register

__all__ = ["VIDEO_RESIZE_READER"]

#: fn.resize's arguments that DALI's readers.video_resize takes (its dtype is the reader's).
_RESIZE_ARG_NAMES = ("resize_x", "resize_y", "resize_z", "size", "resize_shorter", "resize_longer", "mode",
                     "max_size", "roi_start", "roi_end", "roi_relative", "subpixel_scale", "interp_type",
                     "min_filter", "mag_filter", "antialias", "minibatch_size", "temp_buffer_hint")


class VideoResizeReader(LegacyVideoReader):
    """``fn.readers.video_resize``."""

    def __init__(self, node, build):
        super().__init__(node, build)
        self.resize = Resize(node, build)  # its errors name this reader

    def load(self, ctx, indices):
        video, *rest = super().load(ctx, indices)
        args = ArgValues(self.node.schema.name, self.args, {}, len(indices))
        return [self.resize.run(ctx, [video], args), *rest]


VIDEO_RESIZE_READER = register(dataclasses.replace(
    VIDEO_READER, name="readers.video_resize", impl=VideoResizeReader,
    doc=VIDEO_READER.doc + "\n\nEvery frame is then resized as fn.resize does with the same resize arguments "
        "(after the conversion to 'dtype'). DALI takes the resize arguments per sample too; here they are "
        "constants.",
    args=VIDEO_READER.args + tuple(dataclasses.replace(a, tensor=False) for a in RESIZE.args
                                   if a.name in _RESIZE_ARG_NAMES)))
