"""Command-line tools: ``python -m jaxdali.tools.tfrecord2idx`` and ``python -m jaxdali.tools.wds2idx``."""
