"""The suites and policies of ``jaxdali.auto_aug`` equal DALI's: names, order, probabilities,
magnitude bins, ranges, signs and the parameter of every bin."""

from __future__ import annotations

import numpy as np
import pytest

dali_auto_aug = pytest.importorskip("nvidia.dali.auto_aug")
from nvidia.dali.auto_aug import auto_augment as dali_aa  # noqa: E402
from nvidia.dali.auto_aug import rand_augment as dali_ra  # noqa: E402
from nvidia.dali.auto_aug import trivial_augment as dali_ta  # noqa: E402

from jaxdali.auto_aug import auto_augment, rand_augment, trivial_augment  # noqa: E402


def _params(aug, bins: int) -> np.ndarray:
    """The parameter of every (signed) magnitude bin, as the augmentation computes it."""
    magnitudes = aug._magnitudes(bins) if hasattr(aug, "_magnitudes") else aug._get_magnitudes(bins)
    if magnitudes is None:
        return np.array([])
    magnitudes = np.concatenate([magnitudes, -np.asarray(magnitudes)]) if aug.randomly_negate else magnitudes
    return np.array([np.asarray(aug.mag_to_param(m), dtype=np.float64) for m in magnitudes])


def _same_augmentation(ours, theirs, bins: int) -> None:
    assert ours.name == theirs.name
    assert ours.randomly_negate == theirs.randomly_negate, ours.name
    assert (ours.mag_range is None) == (theirs.mag_range is None), ours.name
    if ours.mag_range is not None:
        np.testing.assert_allclose(np.asarray(ours.mag_range, float), np.asarray(theirs.mag_range, float))
    np.testing.assert_allclose(_params(ours, bins), _params(theirs, bins), rtol=1e-6, atol=1e-6,
                               err_msg=ours.name)


SUITES = [
    (rand_augment.get_rand_augment_suite, dali_ra.get_rand_augment_suite),
    (rand_augment.get_rand_augment_non_monotonic_suite, dali_ra.get_rand_augment_non_monotonic_suite),
    (trivial_augment.get_trivial_augment_wide_suite, dali_ta.get_trivial_augment_wide_suite),
]


@pytest.mark.parametrize("ours,theirs", SUITES, ids=[s[0].__name__ for s in SUITES])
@pytest.mark.parametrize("kwargs", [{}, {"use_shape": True}, {"max_translate_abs": 40},
                                    {"use_shape": True, "max_translate_rel": (0.25, 0.5)}])
def test_suites_equal_dalis(ours, theirs, kwargs):
    mine, reference = ours(**kwargs), theirs(**kwargs)
    assert [a.name for a in mine] == [a.name for a in reference]
    for a, b in zip(mine, reference):
        _same_augmentation(a, b, 31)


POLICIES = [
    (auto_augment.get_image_net_policy, dali_aa.get_image_net_policy, {}),
    (auto_augment.get_image_net_policy, dali_aa.get_image_net_policy, {"use_shape": True}),
    (auto_augment.get_reduced_image_net_policy, dali_aa.get_reduced_image_net_policy, None),
    (auto_augment.get_svhn_policy, dali_aa.get_svhn_policy, {"max_translate_abs": 100}),
    (auto_augment.get_reduced_cifar10_policy, dali_aa.get_reduced_cifar10_policy, {}),
]


@pytest.mark.parametrize("ours,theirs,kwargs", POLICIES, ids=[f"{p[0].__name__}-{p[2]}" for p in POLICIES])
def test_policies_equal_dalis(ours, theirs, kwargs):
    mine, reference = (ours(), theirs()) if kwargs is None else (ours(**kwargs), theirs(**kwargs))
    assert (mine.name, mine.num_magnitude_bins) == (reference.name, reference.num_magnitude_bins)
    assert [[(a.name, p, m) for a, p, m in sub] for sub in mine.sub_policies] == \
        [[(a.name, p, m) for a, p, m in sub] for sub in reference.sub_policies]
    assert list(mine.augmentations) == list(reference.augmentations)
    for name, aug in mine.augmentations.items():
        _same_augmentation(aug, reference.augmentations[name], mine.num_magnitude_bins)


def test_policy_renames_distinct_augmentations_sharing_a_name():
    from jaxdali.auto_aug import augmentations as a
    from jaxdali.auto_aug.core import Policy

    weak, strong = a.rotate.augmentation((0, 10)), a.rotate.augmentation((0, 90))
    policy = Policy("p", 5, [[(weak, 0.5, 1)], [(strong, 0.5, 2), (weak, 1.0, 3)]])
    assert list(policy.augmentations) == ["0__rotate", "1__rotate"]
    assert policy.augmentations["1__rotate"].mag_range == (0, 90)
