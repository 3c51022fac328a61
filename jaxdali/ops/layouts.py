"""Layout, type, channel and batch helpers shared by the image operators.

* layouts: which axis of a sample is D, H, W, C or F (``image_layout`` for operators with a list of
  accepted layouts, ``SpatialLayout`` for the resampling operators), DALI's defaults for data
  without a layout, and ``LayoutAware`` for device implementations that need their input's layout;
* output types: ``dtype_argument`` (``dtype`` and its deprecated alias) and ``resampled_dtype``
  (the input type or FLOAT, for operators that interpolate);
* channels: ``per_channel`` (one value, or one per channel) and ``channel_shape``;
* batches: ``allocate_batch`` (one dense buffer when the shapes agree) and ``sample_name`` (the
  sample an error is about).
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np

from jaxdali.ops.schema import OpArgumentError
from jaxdali.core.buffers import owned_empty
from jaxdali.types import DALIDataType, to_dali_type, to_numpy_type

__all__ = [
    "DEFAULT_LAYOUTS", "image_layout", "SpatialLayout", "LayoutAware", "dtype_argument", "check_type", "IMAGE_TYPES",
    "resampled_dtype", "check_resampled_dtype_arg", "per_channel", "channel_shape", "allocate_batch", "sample_name",
]

# -- layouts ----------------------------------------------------------------------------------------

#: What DALI assumes for image data without a layout, by number of dimensions.
DEFAULT_LAYOUTS = {2: "HW", 3: "HWC", 4: "FHWC", 5: "FDHWC"}


def image_layout(op: str, layout: str, ndim: int, allowed: Sequence[str]) -> str:
    """The layout of an image input: the given one, or DALI's default for ``ndim`` when unset.

    Raises ValueError with DALI's wording when the layout is not one of ``allowed``.
    """
    if not layout:
        layout = DEFAULT_LAYOUTS.get(ndim, "")
        if layout not in allowed:
            raise ValueError(
                f"fn.{op}: The number of dimensions {ndim} does not match any of the allowed layouts for "
                f"input 0. Valid layouts are: {', '.join(allowed)}")
        return layout
    if layout not in allowed:
        raise ValueError(f'fn.{op}: The layout "{layout}" does not match any of the allowed layouts for input 0. '
                         f"Valid layouts are: {', '.join(allowed)}")
    if len(layout) != ndim:
        raise ValueError(f"fn.{op}: the layout {layout!r} cannot describe samples with {ndim} dimensions")
    return layout


@dataclasses.dataclass(frozen=True)
class SpatialLayout:
    """Which axes of a sample are spatial: ``axes`` lists them in layout order (D, H, W)."""

    layout: str
    axes: tuple[int, ...]

    @classmethod
    def parse(cls, op: str, layout: str, ndim: int, allow_depth: bool = True) -> "SpatialLayout":
        """Spatial axes of ``layout``. A layout is made of D (optional), H and W, in that order, plus
        F (frames, each resized the same way) and C (channels) anywhere. An empty layout means HW or
        HWC by rank (4-D data may be a sequence or a volume, so it needs a layout)."""
        if not layout:
            if ndim not in (2, 3):
                raise ValueError(f"fn.{op}: the input has no layout and {ndim} dimensions; give it a layout "
                                 f"(e.g. layout='FHWC' or 'DHWC' on the source) so the spatial axes are known")
            layout = DEFAULT_LAYOUTS[ndim]
        allowed = "FCDHW" if allow_depth else "FCHW"
        spatial = [ch for ch in layout if ch in "DHW"]
        if (len(layout) != ndim or any(ch not in allowed for ch in layout) or len(set(layout)) != len(layout)
                or "H" not in layout or "W" not in layout or spatial != sorted(spatial, key="DHW".index)):
            kinds = "D (optional), H and W in that order" if allow_depth else "H and W in that order"
            raise ValueError(
                f"fn.{op}: input layout {layout!r} (for {ndim}-D samples) is not supported: expected {kinds}, "
                f"plus optional F (frames) and C (channels), e.g. HWC, CHW, FHWC"
                + (", DHWC" if allow_depth else ""))
        return cls(layout, tuple(layout.index(ch) for ch in spatial))


class LayoutAware:
    """Mixin for device implementations that need their input's layout.

    ``run_jax`` receives arrays only; the device stage calls ``output_layouts(input_layouts)`` when
    it records the operator, before the program is traced, so the layout is kept from there. A
    compiled program is reused across iterations, so a layout that changes later is an error.
    """

    _device_layout: str | None = None

    def device_layout_of(self, layout: str) -> None:
        if self._device_layout is not None and self._device_layout != layout:
            raise ValueError(f"{self.name}: the input layout changed from {self._device_layout!r} to {layout!r} "
                             "between iterations; a device operator needs one layout")
        self._device_layout = layout

    def output_layouts(self, input_layouts):
        self.device_layout_of(input_layouts[0] if input_layouts else "")
        return [self.device_output_layout(self._device_layout)] * len(self.node.outputs)

    def device_output_layout(self, layout: str) -> str:
        return layout


# -- types ------------------------------------------------------------------------------------------


def dtype_argument(op: str, args, allowed: Sequence[DALIDataType] | None):
    """The ``dtype`` argument (or its deprecated alias ``output_dtype``) as a NumPy dtype, or None."""
    dtype, alias = args.get("dtype"), args.get("output_dtype")
    if dtype is not None and alias is not None:
        raise OpArgumentError(f"fn.{op}: 'dtype' and its deprecated alias 'output_dtype' cannot both be given")
    dtype = dtype if dtype is not None else alias
    if dtype is None:
        return None
    if allowed is not None and dtype not in allowed:
        raise OpArgumentError(f"fn.{op}: argument 'dtype' must be one of {[d.name for d in allowed]}, "
                              f"got {dtype.name}")
    return np.dtype(to_numpy_type(dtype))


def check_type(op: str, what: str, dtype: np.dtype, allowed: Sequence[DALIDataType]) -> None:
    """Refuses an input or output ``dtype`` that is not one of ``allowed`` (TypeError)."""
    if to_dali_type(dtype) not in allowed:
        raise TypeError(f"fn.{op}: unsupported {what} type {np.dtype(dtype).name}; supported: "
                        f"{[d.name for d in allowed]}")


#: Input types of the operators that interpolate (resize, random_resized_crop, warp_affine, rotate).
IMAGE_TYPES = (np.dtype(np.uint8), np.dtype(np.int16), np.dtype(np.uint16), np.dtype(np.float32))


def resampled_dtype(op: str, input_dtype: np.dtype, dtype_arg, float_to_any: bool = False) -> np.dtype:
    """The output type of an interpolating operator: the input type (rounded and saturated) or FLOAT;
    with ``float_to_any``, a float input may also give any of ``IMAGE_TYPES``."""
    if input_dtype not in IMAGE_TYPES:
        raise TypeError(f"fn.{op}: input type {input_dtype} is not supported; supported types are uint8, int16, "
                        f"uint16 and float32 (convert with fn.cast first)")
    if dtype_arg is None:
        return input_dtype
    out = np.dtype(to_numpy_type(dtype_arg))
    if out == input_dtype or out == np.float32 or (float_to_any and input_dtype.kind == "f" and out in IMAGE_TYPES):
        return out
    extra = " (or, for float input, any of uint8, int16, uint16)" if float_to_any else ""
    raise TypeError(f"fn.{op}: argument 'dtype' must be the input type ({input_dtype}) or FLOAT{extra}; "
                    f"unsupported input/output types {input_dtype} -> {out}")


def check_resampled_dtype_arg(op: str, dtype_arg) -> None:
    """Build-time check of the ``dtype`` argument of resize and random_resized_crop."""
    if dtype_arg is not None and DALIDataType(dtype_arg) not in (
            DALIDataType.UINT8, DALIDataType.INT16, DALIDataType.UINT16, DALIDataType.FLOAT):
        raise OpArgumentError(f"fn.{op}: argument 'dtype' must be FLOAT or the input type (UINT8, INT16 or UINT16), "
                              f"got {DALIDataType(dtype_arg).name}")


# -- channels ---------------------------------------------------------------------------------------


def per_channel(op: str, name: str, value, channels: int, who: str) -> np.ndarray:
    """Argument ``name`` as one float32 value per channel of ``who`` (one given value is broadcast)."""
    v = np.asarray(value, np.float32).reshape(-1)
    if v.size == 1:
        return np.full(channels, v[0], np.float32)
    if v.size != channels:
        raise ValueError(f"fn.{op}: '{name}' has {v.size} values but {who} has {channels} channels; give 1 value "
                         f"or one per channel")
    return v


def channel_shape(layout: str, ndim: int, channels: int) -> tuple[int, ...]:
    """The shape that broadcasts a per-channel vector against a sample of ``layout``."""
    shape = [1] * ndim
    shape[layout.index("C")] = channels
    return tuple(shape)


# -- batches ----------------------------------------------------------------------------------------


def allocate_batch(shapes, dtype):
    """One dense (n, ...) pipeline-owned array when every sample has the same shape, else a list of arrays."""
    shapes = [tuple(map(int, s)) for s in (shapes.tolist() if isinstance(shapes, np.ndarray) else shapes)]
    if shapes and len(set(shapes)) == 1:
        return owned_empty((len(shapes),) + shapes[0], dtype)
    return [np.empty(s, dtype) for s in shapes]


def sample_name(source_info: Sequence[str] | None, i: int) -> str:
    """``sample i``, with its source (file name, ...) when known."""
    src = source_info[i] if source_info is not None and i < len(source_info) else None
    return f"sample {i}" + (f" ({src})" if src else "")
