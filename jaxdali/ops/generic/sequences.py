"""Sequences (layouts starting with ``F``): ``element_extract``, ``sequence_rearrange``, ``per_frame``."""

from __future__ import annotations

import numpy as np

from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import REQUIRED, Arg, OpArgumentError, OpSchema, register
from jaxdali.tensors import TensorListCPU

__all__ = ["ELEMENT_EXTRACT", "SEQUENCE_REARRANGE", "PER_FRAME"]


def _check_sequence(op: str, layout: str) -> None:
    if layout and not layout.startswith("F"):
        raise OpArgumentError(f"fn.{op}: the input must be a sequence: its layout must start with 'F', got "
                              f"{layout!r}")


def _check_frames(op: str, arg: str, indices, frames: int, i: int) -> None:
    for k, f in enumerate(indices):
        if not 0 <= f < frames:
            raise OpArgumentError(f"fn.{op}: {arg}[{k}] = {f} is out of range for sample {i} with {frames} frames "
                                  f"(valid: 0 to {frames - 1})")


class ElementExtract(Operator):
    """One output per entry of ``element_map``: that frame of every sequence."""

    def run(self, ctx, inputs, args):
        (x,) = inputs
        layout = x.layout()
        _check_sequence("element_extract", layout)
        element_map = self.args["element_map"]
        samples = x.samples()
        for i, s in enumerate(samples):
            if s.ndim == 0:
                raise OpArgumentError(f"fn.element_extract: sample {i} is a scalar, not a sequence")
            _check_frames("element_extract", "element_map", element_map, s.shape[0], i)
        return [TensorListCPU([s[f] for s in samples], layout[1:]) for f in element_map]


class SequenceRearrange(Operator):
    """Frames of each sequence reordered (and repeated or dropped) by ``new_order``."""

    def run(self, ctx, inputs, args):
        (x,) = inputs
        layout = x.layout()
        _check_sequence("sequence_rearrange", layout)
        samples = x.samples()
        out = []
        for i, s in enumerate(samples):
            order = np.asarray(args.sample_value("new_order", i), np.int64).reshape(-1)
            if order.size == 0:
                raise OpArgumentError(f"fn.sequence_rearrange: 'new_order' of sample {i} is empty")
            _check_frames("sequence_rearrange", "new_order", order.tolist(), s.shape[0] if s.ndim else 0, i)
            out.append(s[order])
        return TensorListCPU(out, layout)


class PerFrame(Operator):
    """Marks the input as per-frame (layout starting with ``F``); the data are passed through."""

    def run(self, ctx, inputs, args):
        (x,) = inputs
        return x.with_layout(self.out_layout(x.layout(), x.ndim()))

    def out_layout(self, layout: str, ndim: int) -> str:
        if not layout:
            return "F" + "*" * (ndim - 1) if ndim else "F"
        if layout.startswith("F"):
            return layout
        if self.args["replace"]:
            return "F" + layout[1:]
        raise OpArgumentError(f"fn.per_frame: the input layout {layout!r} does not start with 'F'; pass "
                              "replace=True to replace its first character")

    def run_jax(self, inputs, args):
        return [inputs[0]]

    def output_layouts(self, input_layouts):
        return [self.out_layout(input_layouts[0], len(input_layouts[0]) or 1)]


ELEMENT_EXTRACT = register(OpSchema(
    name="element_extract", impl=ElementExtract, devices=("cpu", "gpu"),
    num_outputs=lambda args: len(args.get("element_map") or ()),
    doc="Extracts frames from sequences: one output per entry of `element_map`, holding that frame.",
    args=(Arg("element_map", "ints", REQUIRED, "Frame indices to extract.", min=0),)))

SEQUENCE_REARRANGE = register(OpSchema(
    name="sequence_rearrange", impl=SequenceRearrange, devices=("cpu", "gpu"),
    doc="Rearranges the frames of each sequence: output frame k is input frame `new_order[k]` (frames may "
        "repeat or be left out).",
    args=(Arg("new_order", "ints", REQUIRED, "The input frame of each output frame.", tensor=True),)))

PER_FRAME = register(OpSchema(
    name="per_frame", impl=PerFrame, devices=("cpu", "gpu"),
    doc="Marks a batch as per-frame, so an operator taking it as an argument input applies one value per "
        "frame: the layout gets a leading 'F' (a layout without one needs `replace=True`).",
    args=(Arg("replace", "bool", False, "Replace the first layout character by 'F' when it is not 'F'."),)))
