"""Implicit copies between host and device: ``node.gpu()`` and ``node.cpu()``."""

from __future__ import annotations

from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import OpSchema, register


class _Passthrough(Operator):
    """The data is unchanged; where it lives follows from the output node's device."""

    passthrough = True

    def run(self, ctx, inputs, args):
        return inputs[0]


TO_DEVICE = register(OpSchema(
    name="_to_device", impl=_Passthrough, devices=("mixed",),
    doc="Moves a batch to the pipeline's JAX device (what `node.gpu()` adds).", seeded=False))

TO_HOST = register(OpSchema(
    name="_to_host", impl=_Passthrough, devices=("gpu",), output_device="cpu",
    doc="Copies a device batch to host memory (what `node.cpu()` adds).", seeded=False))
