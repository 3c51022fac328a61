"""Pipeline definition and execution."""

from jaxdali.pipeline.decorator import pipeline_def as pipeline_def
from jaxdali.pipeline.pipeline import Pipeline as Pipeline

__all__ = ["Pipeline", "pipeline_def"]
