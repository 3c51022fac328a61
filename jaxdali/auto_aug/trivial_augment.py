"""TrivialAugment Wide (https://arxiv.org/abs/2103.10158): one augmentation per sample, chosen
uniformly, with a magnitude bin chosen uniformly."""

from __future__ import annotations

from typing import Any, List, Optional, Sequence

from jaxdali import fn, types
from jaxdali.auto_aug import augmentations as a
from jaxdali.auto_aug.core.args import forbid_unused_kwargs
from jaxdali.auto_aug.core.augmentation import Augmentation, signed_bin
from jaxdali.auto_aug.core.select import require_conditionals
from jaxdali.auto_aug.core.suite import select_with_hint, translations, without_excluded
from jaxdali.ops.graph import DataNode

__all__ = ["trivial_augment_wide", "apply_trivial_augment", "get_trivial_augment_wide_suite"]


def trivial_augment_wide(data: DataNode, num_magnitude_bins: int = 31, shape: Any = None,
                         fill_value: Optional[int] = 128, interp_type: Any = None,
                         max_translate_abs: Optional[int] = None, max_translate_rel: Optional[float] = None,
                         seed: Optional[int] = None, excluded: Optional[List[str]] = None) -> DataNode:
    """Applies TrivialAugment Wide to a batch of uint8 HWC images; needs ``enable_conditionals=True``.

    Args are those of ``rand_augment`` less ``n``, ``m`` and ``monotonic_mag`` (translations default
    to 32 pixels, or the whole size with ``shape``).
    """
    require_conditionals("trivial_augment_wide")
    kwargs: dict[str, Any] = {"fill_value": fill_value, "interp_type": interp_type}
    if shape is not None:
        kwargs["shape"] = shape
    suite = get_trivial_augment_wide_suite(shape is not None, max_translate_abs, max_translate_rel)
    augmentations = without_excluded(suite, excluded, "TrivialAugmentWide")
    return apply_trivial_augment(augmentations, data, num_magnitude_bins=num_magnitude_bins, seed=seed, **kwargs)


def apply_trivial_augment(augmentations: Sequence[Augmentation], data: DataNode, num_magnitude_bins: int = 31,
                          seed: Optional[int] = None, **kwargs: Any) -> DataNode:
    """Applies one of ``augmentations`` per sample with a uniformly drawn magnitude bin; ``kwargs``
    go to the augmentations that take them."""
    if isinstance(num_magnitude_bins, bool) or not isinstance(num_magnitude_bins, int) or num_magnitude_bins < 1:
        raise ValueError(f"apply_trivial_augment: `num_magnitude_bins` must be a positive integer, got "
                         f"{num_magnitude_bins!r}")
    if not augmentations:
        raise ValueError("apply_trivial_augment: `augmentations` cannot be empty")
    require_conditionals("apply_trivial_augment")
    forbid_unused_kwargs(augmentations, kwargs, "apply_trivial_augment")
    magnitude_bin: Any = fn.random.uniform(values=list(range(num_magnitude_bins)), dtype=types.INT32, seed=seed)
    if any(aug.randomly_negate for aug in augmentations):
        magnitude_bin = signed_bin(magnitude_bin, seed=seed)
    op_kwargs = dict(data=data, magnitude_bin=magnitude_bin, num_magnitude_bins=num_magnitude_bins, **kwargs)
    op_ids = fn.random.uniform(values=list(range(len(augmentations))), seed=seed, dtype=types.INT32)
    return select_with_hint(augmentations, op_ids, op_kwargs, "apply_trivial_augment",
                            "get_trivial_augment_wide_suite")


def get_trivial_augment_wide_suite(use_shape: bool = False, max_translate_abs: Optional[int] = None,
                                   max_translate_rel: Optional[float] = None) -> List[Augmentation]:
    """TrivialAugment Wide's augmentations (wider ranges than RandAugment's).

    Args:
      use_shape: translations relative to the image shape (then pass ``shape`` to the call).
      max_translate_abs: largest translation in pixels (default 32).
      max_translate_rel: largest translation as a fraction of the size (default 1).
    """
    return translations(use_shape, 32, 1.0, max_translate_abs, max_translate_rel) + [
        a.shear_x.augmentation((0, 0.99), True), a.shear_y.augmentation((0, 0.99), True),
        a.rotate.augmentation((0, 135), True),
        a.brightness.augmentation((0.01, 0.99), True, a.shift_enhance_range),
        a.contrast.augmentation((0.01, 0.99), True, a.shift_enhance_range),
        a.color.augmentation((0.01, 0.99), True, a.shift_enhance_range),
        a.sharpness.augmentation((0.01, 0.99), True, a.sharpness_kernel),
        a.posterize.augmentation((8, 2), False, a.poster_mask_uint8),
        a.solarize.augmentation((256, 0)), a.equalize, a.auto_contrast, a.identity]
