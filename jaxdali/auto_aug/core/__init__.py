"""The building blocks of the automatic augmentations: ``@augmentation``, ``Policy``, ``select``
and ``signed_bin``."""

from jaxdali.auto_aug.core.augmentation import Augmentation as _Augmentation
from jaxdali.auto_aug.core.augmentation import augmentation, signed_bin
from jaxdali.auto_aug.core.policy import Policy
from jaxdali.auto_aug.core.select import select

__all__ = ["augmentation", "Policy", "select", "signed_bin"]
