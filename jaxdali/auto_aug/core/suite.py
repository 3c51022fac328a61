"""What RandAugment, TrivialAugment and AutoAugment share: the translation augmentations of a
suite, the ``excluded`` check, and the per-sample selection with a clear error for a missing shape."""

from __future__ import annotations

from typing import Any, Optional, Sequence

from jaxdali.auto_aug import augmentations as a
from jaxdali.auto_aug.core.args import MissingArgException
from jaxdali.auto_aug.core.augmentation import Augmentation
from jaxdali.auto_aug.core.select import select
from jaxdali.ops.graph import DataNode


def _height_width(max_translate: Any) -> tuple:
    if isinstance(max_translate, (tuple, list)):
        height, width = max_translate
        return height, width
    return max_translate, max_translate


def translations(use_shape: bool, default_abs: float, default_rel: float, max_translate_abs: Optional[float] = None,
                 max_translate_rel: Optional[float] = None) -> list[Augmentation]:
    """``[translate_x, translate_y]``: relative to the image shape when ``use_shape``, else in pixels."""
    if not isinstance(use_shape, bool):
        raise TypeError(f"`use_shape` must be True or False, got {use_shape!r}")
    if use_shape:
        if max_translate_abs is not None:
            raise ValueError("`max_translate_abs` cannot be used with image shapes; use `max_translate_rel`")
        height, width = _height_width(default_rel if max_translate_rel is None else max_translate_rel)
        return [a.translate_x.augmentation((0, width), True), a.translate_y.augmentation((0, height), True)]
    if max_translate_rel is not None:
        raise ValueError("`max_translate_rel` needs the image shapes (pass `shape`); use `max_translate_abs`")
    height, width = _height_width(default_abs if max_translate_abs is None else max_translate_abs)
    return [a.translate_x_no_shape.augmentation((0, width), True),
            a.translate_y_no_shape.augmentation((0, height), True)]


def without_excluded(augmentations: Sequence[Augmentation], excluded: Optional[Sequence[str]],
                     suite_name: str) -> list[Augmentation]:
    """The suite less the augmentations named in ``excluded``; unknown names are an error."""
    names = [aug.name for aug in augmentations]
    unknown = [name for name in excluded or () if name not in names]
    if unknown:
        raise ValueError(f"`excluded` names {', '.join(map(repr, unknown))}, which the {suite_name} suite does not "
                         f"contain; its augmentations are: {', '.join(names)}")
    return [aug for aug in augmentations if aug.name not in (excluded or ())]


def select_with_hint(augmentations: Sequence[Augmentation], aug_ids: DataNode, op_kwargs: dict, call_name: str,
                     suite_name: str) -> DataNode:
    """``select``, explaining how to fix a translation that lacks the image ``shape``."""
    try:
        return select(augmentations, aug_ids, **op_kwargs)
    except MissingArgException as e:
        if e.missing_args != ["shape"] or e.augmentation.op not in (a.translate_x.op, a.translate_y.op):
            raise
        raise ValueError(f"augmentation `{e.augmentation.name}` translates relative to the image size and needs the "
                         f"images' HWC shape: pass `shape` to {call_name} (e.g. from fn.peek_image_shape), or use "
                         f"the pixel translations (`{suite_name}(use_shape=False)`)") from None
