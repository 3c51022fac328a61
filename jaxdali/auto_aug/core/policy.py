"""``Policy``: AutoAugment's sub-policies, sequences of (augmentation, probability, magnitude bin)."""

from __future__ import annotations

import warnings
from typing import Optional, Sequence, Tuple

from jaxdali.auto_aug.core.augmentation import Augmentation

SubPolicy = Sequence[Tuple[Augmentation, float, Optional[int]]]


class Policy:
    """An AutoAugment policy (https://arxiv.org/abs/1805.09501).

    Each sample gets one of ``sub_policies``, chosen uniformly; the stages of that sub-policy then
    apply in order, each with its probability and magnitude bin.

    Args:
      name: the policy's name (shown by ``repr``).
      num_magnitude_bins: how many bins the augmentations' magnitude ranges are divided into.
      sub_policies: sequences of ``(augmentation, probability, magnitude_bin)``; the bin is None
        for augmentations without a magnitude range.
    """

    def __init__(self, name: str, num_magnitude_bins: int, sub_policies: Sequence[SubPolicy]):
        if isinstance(num_magnitude_bins, bool) or not isinstance(num_magnitude_bins, int) or num_magnitude_bins < 1:
            raise ValueError(f"Policy: `num_magnitude_bins` must be a positive integer, got {num_magnitude_bins!r}")
        if not isinstance(sub_policies, (list, tuple)):
            raise TypeError(f"Policy: `sub_policies` must be a list or tuple, got {type(sub_policies).__name__}")
        for sub_policy in sub_policies:
            if not isinstance(sub_policy, (list, tuple)):
                raise TypeError(f"Policy: each sub-policy must be a list or tuple, got {sub_policy!r}")
            for stage in sub_policy:
                _check_stage(name, num_magnitude_bins, stage)
        self.name = name
        self.num_magnitude_bins = num_magnitude_bins
        self.sub_policies = _with_unique_names(sub_policies)

    @property
    def augmentations(self) -> dict[str, Augmentation]:
        """The policy's augmentations by name, sorted by name."""
        augs = {aug for sub_policy in self.sub_policies for aug, _, _ in sub_policy}
        return {aug.name: aug for aug in sorted(augs, key=lambda aug: aug.name)}

    def __repr__(self) -> str:
        subs = ",\n\t".join(repr([(aug.name, p, mag) for aug, p, mag in sub]) for sub in self.sub_policies)
        augs = ",\n\t".join(f"'{name}': {aug!r}" for name, aug in self.augmentations.items())
        return (f"Policy(name={self.name!r}, num_magnitude_bins={self.num_magnitude_bins!r}, "
                f"sub_policies=[{subs and chr(10) + chr(9)}{subs}], augmentations={{{augs and chr(10) + chr(9)}{augs}}})")


def _check_stage(policy_name: str, num_magnitude_bins: int, stage: object) -> None:
    if not isinstance(stage, (list, tuple)) or len(stage) != 3:
        raise TypeError(f"Policy `{policy_name}`: each stage must be (augmentation, probability, magnitude_bin), "
                        f"got {stage!r}")
    aug, p, mag = stage
    if not isinstance(aug, Augmentation):
        raise TypeError(f"Policy `{policy_name}`: {aug!r} is not an Augmentation (decorate it with @augmentation)")
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 <= p <= 1:
        raise ValueError(f"Policy `{policy_name}`: probability of `{aug.name}` must be in [0, 1], got {p!r}")
    if p == 0:
        warnings.warn(f"Policy `{policy_name}`: augmentation `{aug.name}` has probability 0 in a sub-policy")
    if mag is None:
        if aug.mag_range is not None:
            raise ValueError(f"Policy `{policy_name}`: augmentation `{aug.name}` has a `mag_range`, so it needs a "
                             "magnitude bin, got None")
        return
    if aug.mag_range is None:
        warnings.warn(f"Policy `{policy_name}`: augmentation `{aug.name}` takes no magnitude; its bin {mag} is "
                      "ignored (give None)")
    if isinstance(mag, bool) or not isinstance(mag, int) or not 0 <= mag < num_magnitude_bins:
        raise ValueError(f"Policy `{policy_name}`: magnitude bin of `{aug.name}` must be an integer in "
                         f"[0, {num_magnitude_bins - 1}], got {mag!r}")


def _with_unique_names(sub_policies: Sequence[SubPolicy]) -> tuple:
    """The sub-policies as tuples; distinct augmentations sharing a name get ``NN__`` prefixes."""
    order = list(dict.fromkeys(aug for sub in sub_policies for aug, _, _ in sub))
    if len({aug.name for aug in order}) == len(order):
        return tuple(tuple(sub) for sub in sub_policies)
    width = len(str(len(order) - 1))
    renamed = {aug: aug.augmentation(name=f"{str(i).zfill(width)}__{aug.name}") for i, aug in enumerate(order)}
    return tuple(tuple((renamed[aug], p, mag) for aug, p, mag in sub) for sub in sub_policies)
