"""Geometry transforms, bounding-box and detection operators (``fn.transforms.*``, ``fn.bb_flip``, ...)."""

from jaxdali.ops.detection import box_encoder, boxes, random_bbox_crop, random_crop_generator, random_mask_pixel, roi_random_crop, select_masks, transforms  # noqa: F401
from jaxdali.ops.detection import bbox_rotate, random_object_bbox, ssd_random_crop  # noqa: F401
