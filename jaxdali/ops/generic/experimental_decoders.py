"""``fn.experimental.decoders.image``, ``image_crop``, ``image_random_crop`` and ``image_slice``: DALI 2.x
keeps these experimental names as aliases of the ``fn.decoders`` operators (same arguments, same
outputs), and ported code still calls them."""

from __future__ import annotations

import dataclasses

from jaxdali.ops.decoders import IMAGE, IMAGE_RANDOM_CROP
from jaxdali.ops.generic.decoder_windows import IMAGE_CROP, IMAGE_SLICE
from jaxdali.ops.schema import OpSchema, register

__all__ = ["EXPERIMENTAL_IMAGE", "EXPERIMENTAL_IMAGE_CROP", "EXPERIMENTAL_IMAGE_RANDOM_CROP",
           "EXPERIMENTAL_IMAGE_SLICE"]


def _experimental_name(schema: OpSchema) -> OpSchema:
    return register(dataclasses.replace(schema, name=f"experimental.{schema.name}",
                                        doc=f"The experimental name of fn.{schema.name}. {schema.doc}"))


EXPERIMENTAL_IMAGE = _experimental_name(IMAGE)
EXPERIMENTAL_IMAGE_CROP = _experimental_name(IMAGE_CROP)
EXPERIMENTAL_IMAGE_RANDOM_CROP = _experimental_name(IMAGE_RANDOM_CROP)
EXPERIMENTAL_IMAGE_SLICE = _experimental_name(IMAGE_SLICE)
