"""``pipeline_def``: turns a graph function into a factory of ``Pipeline`` objects."""

from __future__ import annotations

import functools
import inspect
import warnings
from typing import Any, Callable

from jaxdali._caller import user_stacklevel
from jaxdali.pipeline import conditionals
from jaxdali.pipeline.pipeline import Pipeline

__all__ = ["pipeline_def", "PIPELINE_ARGS", "split_pipeline_kwargs"]

#: Names of ``Pipeline`` constructor arguments.
PIPELINE_ARGS = frozenset(p for p in inspect.signature(Pipeline.__init__).parameters if p != "self")

# Keywords DALI removes before calling the graph function unless the function declares them.
_DROPPED_KEYWORDS = ("enable_conditionals", "debug")


class PipelineArgumentError(TypeError, AssertionError):
    """A keyword that is neither a graph-function parameter nor a Pipeline argument.

    It is an ``AssertionError`` too, because DALI raises that type for the same mistake.
    """


def split_pipeline_kwargs(func: Callable, kwargs: dict[str, Any]) -> tuple[dict, dict]:
    """Routes keywords: graph-function parameters go to the function, Pipeline arguments to the Pipeline.

    A name that is both goes to the function (with a warning), as in DALI.
    """
    params = inspect.signature(func).parameters
    fn_kwargs: dict[str, Any] = {}
    pipe_kwargs: dict[str, Any] = {}
    for key, value in kwargs.items():
        if key in params:
            if key in PIPELINE_ARGS:
                warnings.warn(f"The argument `{key}` shadows a Pipeline constructor argument of the same name; "
                              f"it is passed to `{func.__name__}` only.", stacklevel=user_stacklevel())
            fn_kwargs[key] = value
        elif key in PIPELINE_ARGS:
            pipe_kwargs[key] = value
        elif key in _DROPPED_KEYWORDS:
            continue
        else:
            raise PipelineArgumentError(
                f"This shouldn't happen. Please double-check the `{key}` argument: it is neither a parameter "
                f"of `{func.__name__}` nor a Pipeline argument.")
    return fn_kwargs, pipe_kwargs


def _flatten_outputs(result: Any) -> tuple:
    """A tuple is several outputs, None none; anything else (a list too: a constant) is one output."""
    if result is None:
        return ()
    if isinstance(result, tuple):
        return result
    return (result,)


def pipeline_def(fn: Callable | None = None, **pipeline_kwargs: Any):
    """Decorator that makes a graph function return a ``Pipeline`` when called.

    Keywords given to the decorator are Pipeline defaults; keywords given at call time override
    them. At call time, a keyword that names a parameter of the function goes to the function,
    otherwise to the Pipeline. The function runs once, inside the pipeline scope; its return
    value becomes the pipeline outputs: a tuple is one output per element, None is no output, and
    anything else (a node, or a constant such as ``[1, 2]``) is one output.

    With ``enable_conditionals=True`` (to the decorator or the call), ``if``/``elif``/``else``,
    ``and``/``or``/``not`` and ``a if c else b`` may test per-sample DataNodes: each sample takes its
    own branch (see ``jaxdali.pipeline.conditionals``).

    Example::

        @pipeline_def(batch_size=32, num_threads=2, device_id=None)
        def images(root):
            jpegs, labels = fn.readers.file(file_root=root, random_shuffle=True, name="Reader")
            return fn.decoders.image(jpegs), labels

        pipe = images("/data/train", seed=1)   # seed goes to the Pipeline, root to the function
    """

    def decorate(func: Callable) -> Callable[..., Pipeline]:
        params = inspect.signature(func).parameters.values()
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
            raise TypeError(f"The pipeline function `{func.__name__}` must not take **kwargs: keyword arguments "
                            "are routed to the function or to the Pipeline by name")
        unknown = set(pipeline_kwargs) - PIPELINE_ARGS - set(_DROPPED_KEYWORDS)
        if unknown:
            raise TypeError(f"pipeline_def() got unexpected keyword arguments {sorted(unknown)}: the decorator "
                            "takes Pipeline arguments only (pass graph-function arguments when calling)")
        # The decorator's keywords are Pipeline defaults only, even where they name a parameter of the
        # function (as in DALI); only call-time keywords are routed by name.
        defaults = {k: v for k, v in pipeline_kwargs.items() if k not in _DROPPED_KEYWORDS}

        conditionals_default = bool(pipeline_kwargs.get("enable_conditionals", False))

        @functools.wraps(func)
        def create_pipeline(*args: Any, **kwargs: Any) -> Pipeline:
            with_conditionals = bool(kwargs.get("enable_conditionals", conditionals_default))
            fn_kwargs, pipe_kwargs = split_pipeline_kwargs(func, kwargs)
            graph_function = conditionals.convert(func) if with_conditionals else func
            pipe = Pipeline(**{**defaults, **pipe_kwargs})
            pipe._conditionals_enabled = with_conditionals  # read by jaxdali.auto_aug
            with pipe:
                result = graph_function(*args, **fn_kwargs)
            pipe.set_outputs(*_flatten_outputs(result))
            return pipe

        create_pipeline._is_pipeline_def = True  # type: ignore[attr-defined]
        create_pipeline._graph_function = func  # type: ignore[attr-defined]
        return create_pipeline

    return decorate(fn) if fn is not None else decorate
