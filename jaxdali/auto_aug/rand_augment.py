"""RandAugment (https://arxiv.org/abs/1909.13719): ``n`` augmentations per sample, each chosen
uniformly from a suite, all with the magnitude bin ``m``."""

from __future__ import annotations

import warnings
from typing import Any, List, Optional, Sequence

from jaxdali import fn, types
from jaxdali.auto_aug import augmentations as a
from jaxdali.auto_aug.core.args import forbid_unused_kwargs
from jaxdali.auto_aug.core.augmentation import Augmentation, signed_bin
from jaxdali.auto_aug.core.select import require_conditionals
from jaxdali.auto_aug.core.suite import select_with_hint, translations, without_excluded
from jaxdali.ops.graph import DataNode

__all__ = ["rand_augment", "apply_rand_augment", "get_rand_augment_suite", "get_rand_augment_non_monotonic_suite"]


def rand_augment(data: DataNode, n: int, m: int, num_magnitude_bins: int = 31, shape: Any = None,
                 fill_value: Optional[int] = 128, interp_type: Any = None, max_translate_abs: Optional[int] = None,
                 max_translate_rel: Optional[float] = None, seed: Optional[int] = None, monotonic_mag: bool = True,
                 excluded: Optional[List[str]] = None) -> DataNode:
    """Applies RandAugment to a batch of uint8 HWC images; needs ``enable_conditionals=True``.

    Args:
      data: the images.
      n: how many augmentations each sample gets.
      m: the magnitude bin of all of them, in ``[0, num_magnitude_bins - 1]``.
      num_magnitude_bins: how many bins the magnitude ranges are divided into.
      shape: the images' HWC shape (a DataNode or a pair); given, translations are relative to it.
      fill_value: the value of pixels that geometric augmentations uncover.
      interp_type: interpolation of the geometric augmentations.
      max_translate_abs, max_translate_rel: the largest translation, in pixels (no ``shape``) or as
        a fraction of the size (with ``shape``); one value or (height, width).
      seed: seed of the random choices.
      monotonic_mag: the standard suite, whose strength grows with the bin; False: the original
        paper's, where some factors go from weakening to strengthening.
      excluded: names of suite augmentations not to use.
    """
    require_conditionals("rand_augment")
    kwargs: dict[str, Any] = {"fill_value": fill_value, "interp_type": interp_type}
    if shape is not None:
        kwargs["shape"] = shape
    suite = (get_rand_augment_suite if monotonic_mag else get_rand_augment_non_monotonic_suite)(
        shape is not None, max_translate_abs, max_translate_rel)
    augmentations = without_excluded(suite, excluded, "RandAugment")
    return apply_rand_augment(augmentations, data, n, m, num_magnitude_bins=num_magnitude_bins, seed=seed, **kwargs)


def apply_rand_augment(augmentations: Sequence[Augmentation], data: DataNode, n: int, m: int,
                       num_magnitude_bins: int = 31, seed: Optional[int] = None, **kwargs: Any) -> DataNode:
    """Applies ``n`` augmentations drawn uniformly (with repetition) from ``augmentations`` per sample,
    all with magnitude bin ``m``; ``kwargs`` go to the augmentations that take them."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"apply_rand_augment: `n` (the number of augmentations) must be a non-negative integer, "
                         f"got {n!r}")
    if isinstance(num_magnitude_bins, bool) or not isinstance(num_magnitude_bins, int) or num_magnitude_bins < 1:
        raise ValueError(f"apply_rand_augment: `num_magnitude_bins` must be a positive integer, got "
                         f"{num_magnitude_bins!r}")
    if isinstance(m, bool) or not isinstance(m, int) or not 0 <= m < num_magnitude_bins:
        raise ValueError(f"apply_rand_augment: the magnitude bin `m` must be an integer in "
                         f"[0, {num_magnitude_bins - 1}], got {m!r}")
    if n == 0:
        warnings.warn("apply_rand_augment: n=0, no augmentation is applied", Warning)
        return data
    if not augmentations:
        raise ValueError("apply_rand_augment: `augmentations` cannot be empty (unless n=0)")
    require_conditionals("apply_rand_augment")
    forbid_unused_kwargs(augmentations, kwargs, "apply_rand_augment")
    shape = () if n == 1 else (n,)
    op_ids = fn.random.uniform(values=list(range(len(augmentations))), seed=seed, shape=shape, dtype=types.INT32)
    signed = any(aug.randomly_negate for aug in augmentations)
    mag_bin: Any = signed_bin(m, seed=seed, shape=shape) if signed else m
    for level in range(n):
        level_bin = mag_bin[level] if signed and n > 1 else mag_bin
        level_ids = op_ids if n == 1 else op_ids[level]
        op_kwargs = dict(data=data, magnitude_bin=level_bin, num_magnitude_bins=num_magnitude_bins, **kwargs)
        data = select_with_hint(augmentations, level_ids, op_kwargs, "apply_rand_augment", "get_rand_augment_suite")
    return data


def _suite(use_shape: bool, max_translate_abs: Optional[int], max_translate_rel: Optional[float],
           others: list) -> List[Augmentation]:
    return translations(use_shape, 100, 100 / 224, max_translate_abs, max_translate_rel) + others + \
        [a.equalize, a.auto_contrast, a.identity]


def get_rand_augment_suite(use_shape: bool = False, max_translate_abs: Optional[int] = None,
                           max_translate_rel: Optional[float] = None) -> List[Augmentation]:
    """RandAugment's augmentations, each stronger for a higher bin.

    Args:
      use_shape: translations relative to the image shape (then pass ``shape`` to the call).
      max_translate_abs: largest translation in pixels (default 100).
      max_translate_rel: largest translation as a fraction of the size (default 100/224).
    """
    return _suite(use_shape, max_translate_abs, max_translate_rel, [
        a.shear_x.augmentation((0, 0.3), True), a.shear_y.augmentation((0, 0.3), True),
        a.rotate.augmentation((0, 30), True),
        a.brightness.augmentation((0, 0.9), True, a.shift_enhance_range),
        a.contrast.augmentation((0, 0.9), True, a.shift_enhance_range),
        a.color.augmentation((0, 0.9), True, a.shift_enhance_range),
        a.sharpness.augmentation((0, 0.9), True, a.sharpness_kernel),
        a.posterize.augmentation((8, 4), False, a.poster_mask_uint8),
        a.solarize.augmentation((256, 0))])


def get_rand_augment_non_monotonic_suite(use_shape: bool = False, max_translate_abs: Optional[int] = None,
                                         max_translate_rel: Optional[float] = None) -> List[Augmentation]:
    """RandAugment's augmentations as in the original paper: enhance factors from 0.1 to 1.9,
    posterize and solarize weakening as the bin grows."""
    return _suite(use_shape, max_translate_abs, max_translate_rel, [
        a.shear_x.augmentation((0, 0.3), True), a.shear_y.augmentation((0, 0.3), True),
        a.rotate.augmentation((0, 30), True),
        a.brightness.augmentation((0.1, 1.9), False, None), a.contrast.augmentation((0.1, 1.9), False, None),
        a.color.augmentation((0.1, 1.9), False, None),
        a.sharpness.augmentation((0.1, 1.9), False, a.sharpness_kernel_shifted),
        a.posterize.augmentation((0, 4), False, a.poster_mask_uint8),
        a.solarize.augmentation((0, 256), False, None)])
