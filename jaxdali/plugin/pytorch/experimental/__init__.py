"""Experimental PyTorch integrations: ``proxy`` (``DALIServer`` and its ``DataLoader``)."""

from jaxdali.plugin.pytorch.experimental import proxy as proxy

__all__ = ["proxy"]
