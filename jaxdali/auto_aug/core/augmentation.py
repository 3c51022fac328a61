"""``Augmentation``: a transformation of a batch whose parameter comes from a magnitude bin, the
``@augmentation`` decorator that makes one, and ``signed_bin`` (a bin with a random sign per sample).

The parameter of every bin is computed on the host once, when the graph is defined: the bins'
magnitudes are ``linspace(lo, hi, num_magnitude_bins)`` (or the array given as ``mag_range``), each
optionally negated, mapped by ``mag_to_param`` and stacked into one constant that the per-sample
bin indexes.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable, Optional, Sequence, Union

import numpy as np

from jaxdali import fn, types
from jaxdali.auto_aug.core.args import MissingArgException, accepted_kwargs, missing_kwargs, num_positional_args
from jaxdali.ops.graph import DataNode

__all__ = ["Augmentation", "augmentation", "signed_bin"]


class _Keep:
    """Default of ``Augmentation.augmentation``'s arguments: keep the current setting."""


class _SignedMagnitudeBin:
    """A magnitude bin (an int or a per-sample DataNode) with a per-sample random sign (0 or 1)."""

    def __init__(self, magnitude_bin: Union[int, DataNode], random_sign: DataNode, signed_magnitude_idx: DataNode):
        self._bin = magnitude_bin
        self._random_sign = random_sign
        self._signed_idx = signed_magnitude_idx

    def __getitem__(self, idx: int) -> "_SignedMagnitudeBin":
        """The ``idx``-th of several bins drawn together (one per stage of a sequence of augmentations)."""
        magnitude_bin = self._bin if isinstance(self._bin, int) else self._bin[idx]
        return type(self)(magnitude_bin, self._random_sign[idx], self._signed_idx[idx])

    @property
    def bin(self) -> Union[int, DataNode]:
        return self._bin

    @property
    def random_sign(self) -> DataNode:
        return self._random_sign

    @property
    def signed_magnitude_idx(self) -> DataNode:
        """``2 * bin + sign``: the index into the table of signed magnitudes."""
        return self._signed_idx


def signed_bin(magnitude_bin: Union[int, DataNode], random_sign: Optional[DataNode] = None,
               seed: Optional[int] = None, shape: Optional[Sequence[int]] = None) -> _SignedMagnitudeBin:
    """Pairs ``magnitude_bin`` with a sign per sample, for augmentations declared ``randomly_negate``.

    Drawing the signs before a conditional split (and passing the result to each augmentation)
    draws them once for the whole batch instead of once per branch.

    Args:
      magnitude_bin: an int, or a DataNode of ints in ``[0, num_magnitude_bins - 1]``.
      random_sign: a DataNode of 0 (keep) or 1 (negate) per sample; drawn uniformly when omitted.
      seed: seed of the drawn signs.
      shape: shape of the drawn signs per sample (one per stage of a sequence of augmentations).
    """
    if isinstance(magnitude_bin, bool) or not isinstance(magnitude_bin, (int, DataNode)):
        raise TypeError(f"signed_bin: `magnitude_bin` must be an int or a DataNode of ints in "
                        f"[0, num_magnitude_bins - 1], got {magnitude_bin!r}")
    if random_sign is not None and (seed is not None or shape is not None):
        raise ValueError("signed_bin: `random_sign` cannot be given together with `seed` or `shape`")
    if random_sign is None:
        random_sign = fn.random.uniform(values=[0, 1], dtype=types.INT32, seed=seed, shape=shape)
    return _SignedMagnitudeBin(magnitude_bin, random_sign, 2 * magnitude_bin + random_sign)


def _with_negations(magnitudes: Sequence[float]) -> np.ndarray:
    """``[m0, -m0, m1, -m1, ...]``: the magnitude of signed index ``2 * bin + sign``."""
    magnitudes = np.asarray(magnitudes)
    return np.stack([magnitudes, -magnitudes], axis=1).reshape(-1)


def _plain_array(mag: Any) -> np.ndarray:
    return np.array(mag)


class Augmentation:
    """A transformation for the automatic augmentations; make one with ``@augmentation``.

    Calling it, ``aug(data, magnitude_bin=..., num_magnitude_bins=..., **kwargs)``, runs
    ``op(data, param, **kwargs_the_op_takes)`` with ``param = mag_to_param(+-magnitudes[bin])``.
    """

    def __init__(self, op: Callable[..., DataNode], mag_range: Any = None, randomly_negate: Optional[bool] = None,
                 mag_to_param: Optional[Callable[[float], Any]] = None, param_device: Optional[str] = None,
                 name: Optional[str] = None):
        self._op = op
        self._mag_range = mag_range
        self._randomly_negate = randomly_negate
        self._mag_to_param = mag_to_param
        self._param_device = param_device
        self._name = name
        if num_positional_args(op) < 2:
            raise TypeError(f"@augmentation: {op!r} must take at least two positional arguments (the samples and "
                            f"the parameter), it takes {num_positional_args(op)}")

    def __repr__(self) -> str:
        settings = [f"{k}={v!r}" for k, v in self._config().items() if v is not None]
        return f"Augmentation({', '.join([repr(self._op)] + settings)})"

    @property
    def op(self) -> Callable[..., DataNode]:
        return self._op

    @property
    def mag_range(self) -> Any:
        return self._mag_range

    @property
    def mag_to_param(self) -> Callable[[float], Any]:
        return self._mag_to_param or _plain_array

    @property
    def randomly_negate(self) -> bool:
        return bool(self._randomly_negate)

    @property
    def param_device(self) -> str:
        return self._param_device or "cpu"

    @property
    def name(self) -> str:
        return self._name or self._op.__name__

    def augmentation(self, mag_range: Any = _Keep, randomly_negate: Any = _Keep, mag_to_param: Any = _Keep,
                     param_device: Any = _Keep, name: Any = _Keep, augmentation_cls: Optional[type] = None
                     ) -> "Augmentation":
        """A new augmentation of the same function; the settings given replace this one's."""
        config = self._config()
        for key, value in dict(mag_range=mag_range, randomly_negate=randomly_negate, mag_to_param=mag_to_param,
                               param_device=param_device, name=name).items():
            if value is not _Keep:
                config[key] = value
        return (augmentation_cls or type(self))(self._op, **config)

    def _config(self) -> dict[str, Any]:
        return dict(mag_range=self._mag_range, mag_to_param=self._mag_to_param, randomly_negate=self._randomly_negate,
                    param_device=self._param_device, name=self._name)

    def __call__(self, data: DataNode, *, magnitude_bin: Union[int, DataNode, _SignedMagnitudeBin, None] = None,
                 num_magnitude_bins: Optional[int] = None, **kwargs: Any) -> DataNode:
        """Applies the transformation to the batch ``data``.

        Args:
          data: the batch to transform.
          magnitude_bin: an int, a DataNode of ints, or a ``signed_bin``: the bin of the magnitude.
          num_magnitude_bins: how many bins ``mag_range`` is divided into.
          kwargs: extra arguments; those the function takes by name are passed to it.
        """
        param = self._param(magnitude_bin, num_magnitude_bins, self._device_of_param(data))
        missing = missing_kwargs(self._op, kwargs, 2)
        if missing:
            raise MissingArgException(f"augmentation `{self.name}` needs the argument(s) {', '.join(missing)}, "
                                      "which the call does not give", augmentation=self, missing_args=missing)
        return self._op(data, param, **accepted_kwargs(self._op, kwargs, 2))

    def _device_of_param(self, data: DataNode) -> str:
        if self.param_device != "auto":
            return self.param_device
        return getattr(data, "device", None) or "cpu"

    def _magnitudes(self, num_magnitude_bins: Optional[int]) -> Optional[np.ndarray]:
        mag_range = self._mag_range
        if mag_range is None:
            return None
        if isinstance(mag_range, np.ndarray):
            if num_magnitude_bins is not None and len(mag_range) != num_magnitude_bins:
                raise ValueError(f"augmentation `{self.name}`: `mag_range` lists {len(mag_range)} magnitudes but "
                                 f"num_magnitude_bins is {num_magnitude_bins}")
            return mag_range
        if num_magnitude_bins is None:
            raise ValueError(f"augmentation `{self.name}` needs `num_magnitude_bins` (it has a `mag_range`)")
        if not hasattr(mag_range, "__len__") or len(mag_range) != 2:
            raise ValueError(f"augmentation `{self.name}`: `mag_range` must be a (low, high) pair or an array of "
                             f"magnitudes, got {mag_range!r}")
        return np.linspace(mag_range[0], mag_range[1], num_magnitude_bins, dtype=np.float32)

    def _param_of(self, magnitude: Any) -> np.ndarray:
        param = self.mag_to_param(magnitude)
        if isinstance(param, DataNode) or (isinstance(param, (list, tuple)) and
                                            any(isinstance(p, DataNode) for p in param)):
            raise TypeError(f"augmentation `{self.name}`: `mag_to_param` returned a DataNode; it must return "
                            "NumPy arrays (the parameters of all bins are computed once, on the host)")
        return np.array(param)

    def _params_of(self, magnitudes: Sequence[Any]) -> np.ndarray:
        params = [self._param_of(m) for m in magnitudes]
        for param, magnitude in zip(params[1:], magnitudes[1:]):
            if param.shape != params[0].shape or param.dtype != params[0].dtype:
                raise ValueError(f"augmentation `{self.name}`: `mag_to_param` must return arrays of one shape and "
                                 f"type; magnitude {magnitudes[0]} gave {params[0].shape} {params[0].dtype}, "
                                 f"magnitude {magnitude} gave {param.shape} {param.dtype}")
        return np.array(params)

    def _param(self, magnitude_bin: Any, num_magnitude_bins: Optional[int], device: str) -> Any:
        magnitudes = self._magnitudes(num_magnitude_bins)
        if magnitudes is None:
            return None
        if magnitude_bin is None:
            raise ValueError(f"augmentation `{self.name}` has a `mag_range`, so its call needs `magnitude_bin`")
        if isinstance(magnitude_bin, int) and not isinstance(magnitude_bin, bool) \
                and not 0 <= magnitude_bin < len(magnitudes):
            raise ValueError(f"augmentation `{self.name}`: magnitude_bin must be in [0, {len(magnitudes) - 1}], "
                             f"got {magnitude_bin}")
        if self.randomly_negate:
            if not isinstance(magnitude_bin, _SignedMagnitudeBin):
                warnings.warn(f"augmentation `{self.name}` negates magnitudes at random but got an unsigned "
                              "`magnitude_bin`: it draws the signs itself; draw them once with "
                              "`signed_bin(magnitude_bin)` before a conditional split instead", Warning)
                magnitude_bin = signed_bin(magnitude_bin)
            if isinstance(magnitude_bin.bin, int):  # one magnitude: index its two signs only
                table, index = [magnitudes[magnitude_bin.bin]], magnitude_bin.random_sign
            else:
                table, index = magnitudes, magnitude_bin.signed_magnitude_idx
            return types.Constant(self._params_of(_with_negations(table)), device=device)[index]
        bin_ = magnitude_bin.bin if isinstance(magnitude_bin, _SignedMagnitudeBin) else magnitude_bin
        if isinstance(bin_, int):
            return types.Constant(self._param_of(magnitudes[bin_]), device=device)
        return types.Constant(self._params_of(magnitudes), device=device)[bin_]


def augmentation(function: Optional[Callable[..., DataNode]] = None, *, mag_range: Any = None,
                 randomly_negate: Optional[bool] = None, mag_to_param: Optional[Callable[[float], Any]] = None,
                 param_device: Optional[str] = None, name: Optional[str] = None,
                 augmentation_cls: Optional[type] = None) -> Any:
    """Makes ``function(samples, parameter, **extra)`` an ``Augmentation`` usable by the automatic
    augmentations; used bare (``@augmentation``) or with settings (``@augmentation(mag_range=...)``).

    Args:
      function: takes the batch and the parameter (and optionally named extras such as
        ``fill_value`` or ``shape``) and returns the transformed batch, built from jaxdali operators.
      mag_range: ``(low, high)``: bin ``i`` of ``n`` has magnitude ``linspace(low, high, n)[i]``; or
        an array of the magnitudes. Without it the function gets ``None`` as the parameter.
      randomly_negate: negate the magnitude of a sample at random (probability 1/2).
      mag_to_param: maps a magnitude to the function's parameter (NumPy, computed once per bin);
        by default the magnitude itself.
      param_device: "cpu" (default), "gpu", or "auto" (where the samples are).
      name: the augmentation's name (default: the function's name).
      augmentation_cls: the class to make, ``Augmentation`` by default.
    """
    def wrap(func: Callable[..., DataNode]) -> Augmentation:
        return (augmentation_cls or Augmentation)(func, mag_range=mag_range, randomly_negate=randomly_negate,
                                                  mag_to_param=mag_to_param, param_device=param_device, name=name)

    if function is None:
        return wrap
    if isinstance(function, Augmentation):
        raise TypeError(f"@augmentation applied to the augmentation `{function.name}`, which already is one: change "
                        f"its settings with `{function.name}.augmentation(...)`")
    if not callable(function):
        raise TypeError(f"@augmentation must decorate a function, got {function!r}")
    return wrap(function)
