"""Automatic augmentation, as ``nvidia.dali.auto_aug``: AutoAugment (``auto_augment``), RandAugment
(``rand_augment``) and TrivialAugment Wide (``trivial_augment``), built from the augmentations in
``augmentations`` and the tools in ``core``. They choose augmentations per sample with conditionals,
so the pipeline must be defined with ``@pipeline_def(enable_conditionals=True)``."""

from jaxdali.auto_aug import augmentations, auto_augment, core, rand_augment, trivial_augment

__all__ = ["augmentations", "auto_augment", "core", "rand_augment", "trivial_augment"]
