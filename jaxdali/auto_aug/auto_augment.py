"""AutoAugment (https://arxiv.org/abs/1805.09501): per sample, one sub-policy of a policy chosen
uniformly; each of its stages applies with its probability and magnitude bin."""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

import numpy as np

from jaxdali import fn, types
from jaxdali.auto_aug import augmentations as a
from jaxdali.auto_aug.core.args import forbid_unused_kwargs
from jaxdali.auto_aug.core.augmentation import Augmentation, signed_bin
from jaxdali.auto_aug.core.policy import Policy
from jaxdali.auto_aug.core.select import require_conditionals
from jaxdali.auto_aug.core.suite import select_with_hint, translations
from jaxdali.ops.graph import DataNode
from jaxdali.pipeline.conditionals import Condition

__all__ = ["auto_augment", "auto_augment_image_net", "apply_auto_augment", "get_image_net_policy",
           "get_reduced_cifar10_policy", "get_reduced_image_net_policy", "get_svhn_policy"]

_POLICIES_WITHOUT_TRANSLATION = ("reduced_image_net",)


def auto_augment(data: DataNode, policy_name: str = "image_net", shape: Any = None, fill_value: Optional[int] = 128,
                 interp_type: Any = None, max_translate_abs: Optional[int] = None,
                 max_translate_rel: Optional[float] = None, seed: Optional[int] = None) -> DataNode:
    """Applies a predefined AutoAugment policy to uint8 HWC images; needs ``enable_conditionals=True``.

    Args:
      data: the images.
      policy_name: "image_net", "reduced_image_net", "svhn" or "reduced_cifar10".
      shape: the images' HWC shape (a DataNode or a pair); given, translations are relative to it.
      fill_value: the value of pixels that geometric augmentations uncover.
      interp_type: interpolation of the geometric augmentations.
      max_translate_abs, max_translate_rel: the largest translation, in pixels (no ``shape``,
        default 250) or as a fraction of the size (with ``shape``, default 1); one value or
        (height, width).
      seed: seed of the random choices.
    """
    policies = {"image_net": get_image_net_policy, "reduced_image_net": get_reduced_image_net_policy,
                "svhn": get_svhn_policy, "reduced_cifar10": get_reduced_cifar10_policy}
    if not isinstance(policy_name, str) or policy_name not in policies:
        raise ValueError(f"auto_augment: `policy_name` must be one of {', '.join(map(repr, policies))}, "
                         f"got {policy_name!r}")
    require_conditionals("auto_augment")
    if policy_name in _POLICIES_WITHOUT_TRANSLATION:
        given = [name for name, value in (("shape", shape), ("max_translate_abs", max_translate_abs),
                                          ("max_translate_rel", max_translate_rel)) if value is not None]
        if given:
            raise ValueError(f"auto_augment: policy {policy_name!r} has no translation, so `{given[0]}` must not be "
                             "given")
        policy = policies[policy_name]()
    else:
        policy = policies[policy_name](use_shape=shape is not None, max_translate_abs=max_translate_abs,
                                       max_translate_rel=max_translate_rel)
    kwargs: dict[str, Any] = {"fill_value": fill_value, "interp_type": interp_type}
    if shape is not None:
        kwargs["shape"] = shape
    return apply_auto_augment(policy, data, seed, **kwargs)


def auto_augment_image_net(data: DataNode, shape: Any = None, fill_value: Optional[int] = 128,
                           interp_type: Any = None, max_translate_abs: Optional[int] = None,
                           max_translate_rel: Optional[float] = None, seed: Optional[int] = None) -> DataNode:
    """``auto_augment`` with the ImageNet policy."""
    return auto_augment(data, "image_net", shape, fill_value, interp_type, max_translate_abs, max_translate_rel, seed)


def apply_auto_augment(policy: Policy, data: DataNode, seed: Optional[int] = None, **kwargs: Any) -> DataNode:
    """Applies ``policy`` per sample; ``kwargs`` go to the augmentations that take them."""
    if not policy.sub_policies:
        raise ValueError(f"apply_auto_augment: the policy has no sub-policies: {policy!r}")
    require_conditionals("apply_auto_augment")
    forbid_unused_kwargs(policy.augmentations.values(), kwargs, "apply_auto_augment")
    stages = max(len(sub) for sub in policy.sub_policies)
    probabilities, magnitude_bins, aug_ids, stage_augmentations = _stage_tables(policy, stages)
    should_run = fn.random.uniform(range=[0, 1], shape=(stages,), dtype=types.FLOAT, seed=seed)
    sub_policy_id = fn.random.uniform(values=list(range(len(policy.sub_policies))), seed=seed, dtype=types.INT32)
    run_probability = types.Constant(probabilities)[sub_policy_id]
    bins: Any = types.Constant(magnitude_bins)[sub_policy_id]
    ids = types.Constant(aug_ids)[sub_policy_id]
    if any(aug.randomly_negate for aug in policy.augmentations.values()):
        bins = signed_bin(bins, seed=seed, shape=(stages,))
    for stage in range(stages):
        runs = Condition(should_run[stage] < run_probability[stage], f"stage {stage} of {policy.name}")
        with runs.branch(True):
            op_kwargs = dict(data=data, magnitude_bin=bins[stage], num_magnitude_bins=policy.num_magnitude_bins,
                             **kwargs)
            augmented = select_with_hint(stage_augmentations[stage], ids[stage], op_kwargs, "apply_auto_augment",
                                         "get_image_net_policy")
        data = runs.merge_one("data", augmented, data)
    return data


def _stage_tables(policy: Policy, stages: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray, List[List[Augmentation]]]:
    """Per sub-policy and stage: the probability, the magnitude bin and the augmentation's index
    among the stage's augmentations (each stage lists its distinct augmentations, then identity,
    which pads the shorter sub-policies)."""
    count = len(policy.sub_policies)
    probabilities = np.zeros((count, stages), dtype=np.float32)
    magnitude_bins = np.zeros((count, stages), dtype=np.int32)
    stage_augmentations: List[List[Augmentation]] = []
    for stage in range(stages):
        distinct = dict.fromkeys(sub[stage][0] for sub in policy.sub_policies if stage < len(sub))
        stage_augmentations.append([*distinct, a.identity])
    aug_ids = np.array([[len(augs) - 1 for augs in stage_augmentations]] * count, dtype=np.int32)
    for i, sub in enumerate(policy.sub_policies):
        for stage, (aug, p, mag) in enumerate(sub):
            probabilities[i, stage] = p
            magnitude_bins[i, stage] = 0 if mag is None else mag
            aug_ids[i, stage] = stage_augmentations[stage].index(aug)
    return probabilities, magnitude_bins, aug_ids, stage_augmentations


def _parse_sub_policies(table: str, augmentations: dict) -> list:
    """Sub-policies written one per line as ``name probability bin`` stages (``-``: no bin)."""
    def stage(text: str) -> tuple:
        name, p, mag = text.split()
        return augmentations[name], float(p), None if mag == "-" else int(mag)

    return [[stage(text) for text in line.split(",")] for line in table.strip().splitlines()]


def _common(use_shape: bool = False, max_translate_abs: Optional[int] = None,
            max_translate_rel: Optional[float] = None, translation: bool = True) -> dict:
    """The policies' augmentations and ranges (magnitudes in AutoAugment's 11 bins)."""
    augs = {
        "shear_x": a.shear_x.augmentation((0, 0.3), True), "shear_y": a.shear_y.augmentation((0, 0.3), True),
        "rotate": a.rotate.augmentation((0, 30), True),
        "brightness": a.brightness.augmentation((0.1, 1.9), False, None),
        "color": a.color.augmentation((0.1, 1.9), False, None),
        "contrast": a.contrast.augmentation((0.1, 1.9), False, None),
        "sharpness": a.sharpness.augmentation((0.1, 1.9), False, a.sharpness_kernel_shifted),
        "posterize": a.posterize.augmentation((0, 4), False, a.poster_mask_uint8),
        "solarize": a.solarize.augmentation((0, 256), False),
        "solarize_add": a.solarize_add.augmentation((0, 110), False),
        "invert": a.invert, "equalize": a.equalize, "auto_contrast": a.auto_contrast}
    if translation:
        augs["translate_x"], augs["translate_y"] = translations(use_shape, 250, 1.0, max_translate_abs,
                                                                max_translate_rel)
    return augs


_IMAGE_NET = """
    equalize 0.8 -, shear_y 0.8 4
    color 0.4 9, equalize 0.6 -
    color 0.4 1, rotate 0.6 8
    solarize 0.8 3, equalize 0.4 -
    solarize 0.4 2, solarize 0.6 2
    color 0.2 0, equalize 0.8 -
    equalize 0.4 -, solarize_add 0.8 3
    shear_x 0.2 9, rotate 0.6 8
    color 0.6 1, equalize 1.0 -
    invert 0.4 -, rotate 0.6 0
    equalize 1.0 -, shear_y 0.6 3
    color 0.4 7, equalize 0.6 -
    posterize 0.4 6, auto_contrast 0.4 -
    solarize 0.6 8, color 0.6 9
    solarize 0.2 4, rotate 0.8 9
    rotate 1.0 7, translate_y 0.8 9
    solarize 0.8 4
    shear_y 0.8 0, color 0.6 4
    color 1.0 0, rotate 0.6 2
    equalize 0.8 -
    equalize 1.0 -, auto_contrast 0.6 -
    shear_y 0.4 7, solarize_add 0.6 7
    posterize 0.8 2, solarize 0.6 10
    solarize 0.6 8, equalize 0.6 -
    color 0.8 6, rotate 0.4 5
"""

_REDUCED_IMAGE_NET = """
    posterize 0.4 8, rotate 0.6 9
    solarize 0.6 5, auto_contrast 0.6 -
    equalize 0.8 -, equalize 0.6 -
    posterize 0.6 7, posterize 0.6 6
    equalize 0.4 -, solarize 0.2 4
    equalize 0.4 -, rotate 0.8 8
    solarize 0.6 3, equalize 0.6 -
    posterize 0.8 5, equalize 1.0 -
    rotate 0.2 3, solarize 0.6 8
    equalize 0.6 -, posterize 0.4 6
    rotate 0.8 8, color 0.4 0
    rotate 0.4 9, equalize 0.6 -
    equalize 0.8 -
    invert 0.6 -, equalize 1.0 -
    color 0.6 4, contrast 1.0 8
    rotate 0.8 8, color 1.0 2
    color 0.8 8, solarize 0.8 7
    sharpness 0.4 7, invert 0.6 -
    shear_x 0.6 5, equalize 1.0 -
    color 0.4 0, equalize 0.6 -
    equalize 0.4 -, solarize 0.2 4
    solarize 0.6 5, auto_contrast 0.6 -
    invert 0.6 -, equalize 1.0 -
    color 0.6 4, contrast 1.0 8
    equalize 0.8 -, equalize 0.6 -
"""

_SVHN = """
    shear_x 0.9 4, invert 0.2 -
    shear_y 0.9 8, invert 0.7 -
    equalize 0.6 -, solarize 0.6 6
    invert 0.9 -, equalize 0.6 -
    equalize 0.6 -, rotate 0.9 3
    shear_x 0.9 4, auto_contrast 0.8 -
    shear_y 0.9 8, invert 0.4 -
    shear_y 0.9 5, solarize 0.2 6
    invert 0.9 -, auto_contrast 0.8 -
    equalize 0.6 -, rotate 0.9 3
    shear_x 0.9 4, solarize 0.3 3
    shear_y 0.8 8, invert 0.7 -
    equalize 0.9 -, translate_y 0.6 6
    invert 0.9 -, equalize 0.6 -
    contrast 0.3 3, rotate 0.8 4
    invert 0.8 -
    shear_y 0.7 6, solarize 0.4 8
    invert 0.6 -, rotate 0.8 4
    shear_y 0.3 7, translate_x 0.9 3
    shear_x 0.1 6, invert 0.6 -
    solarize 0.7 2, translate_y 0.6 7
    shear_y 0.8 4, invert 0.8 -
    shear_x 0.7 9, translate_y 0.8 3
    shear_y 0.8 5, auto_contrast 0.7 -
    shear_x 0.7 2, invert 0.1 -
"""

_REDUCED_CIFAR10 = """
    invert 0.1 -, contrast 0.2 6
    rotate 0.7 2, translate_x 0.3 9
    sharpness 0.8 1, sharpness 0.9 3
    shear_y 0.5 8, translate_y 0.7 9
    auto_contrast 0.5 -, equalize 0.9 -
    shear_y 0.2 7, posterize 0.3 7
    color 0.4 3, brightness 0.6 7
    sharpness 0.3 9, brightness 0.7 9
    equalize 0.6 -, equalize 0.5 -
    contrast 0.6 7, sharpness 0.6 5
    color 0.7 7, translate_x 0.5 8
    equalize 0.3 -, auto_contrast 0.4 -
    translate_y 0.4 3, sharpness 0.2 6
    brightness 0.9 6, color 0.2 8
    solarize 0.5 2
    equalize 0.2 -, auto_contrast 0.6 -
    equalize 0.2 -, equalize 0.6 -
    color 0.9 9, equalize 0.6 -
    auto_contrast 0.8 -, solarize 0.2 8
    brightness 0.1 3, color 0.7 0
    solarize 0.4 5, auto_contrast 0.9 -
    translate_y 0.9 9, translate_y 0.7 9
    auto_contrast 0.9 -, solarize 0.8 3
    equalize 0.8 -, invert 0.1 -
    translate_y 0.7 9, auto_contrast 0.9 -
"""


def get_image_net_policy(use_shape: bool = False, max_translate_abs: Optional[int] = None,
                         max_translate_rel: Optional[float] = None) -> Policy:
    """AutoAugment's ImageNet policy (25 sub-policies of up to 2 stages, 11 magnitude bins).

    Args:
      use_shape: translations relative to the image shape (then pass ``shape`` to the call).
      max_translate_abs: largest translation in pixels (default 250).
      max_translate_rel: largest translation as a fraction of the size (default 1).
    """
    augs = _common(use_shape, max_translate_abs, max_translate_rel)
    return Policy("ImageNetPolicy", 11, _parse_sub_policies(_IMAGE_NET, augs))


def get_reduced_image_net_policy() -> Policy:
    """AutoAugment's policy found on reduced ImageNet (no translations)."""
    return Policy("ReducedImageNetPolicy", 11, _parse_sub_policies(_REDUCED_IMAGE_NET, _common(translation=False)))


def get_svhn_policy(use_shape: bool = False, max_translate_abs: Optional[int] = None,
                    max_translate_rel: Optional[float] = None) -> Policy:
    """AutoAugment's SVHN policy; arguments as ``get_image_net_policy``'s."""
    augs = _common(use_shape, max_translate_abs, max_translate_rel)
    return Policy("SvhnPolicy", 11, _parse_sub_policies(_SVHN, augs))


def get_reduced_cifar10_policy(use_shape: bool = False, max_translate_abs: Optional[int] = None,
                               max_translate_rel: Optional[float] = None) -> Policy:
    """AutoAugment's policy found on reduced CIFAR-10; arguments as ``get_image_net_policy``'s."""
    augs = _common(use_shape, max_translate_abs, max_translate_rel)
    return Policy("ReducedCifar10Policy", 11, _parse_sub_policies(_REDUCED_CIFAR10, augs))
