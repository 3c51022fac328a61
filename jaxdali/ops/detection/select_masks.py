"""``fn.segmentation.select_masks``: the polygons (and their vertices) of chosen masks.

Inputs per sample: the mask ids to select (int32, unique), polygons (int32 rows
``[mask_id, start_vertex, end_vertex)``, as ``fn.readers.coco(polygon_masks=True)`` outputs them) and
vertices (rows of coordinates). Outputs: the selected masks' polygons in the order of the requested
ids, with vertex ranges renumbered into the output vertices (and mask ids renumbered 0, 1, ... with
``reindex_masks``), and those vertices.

Every polygon of a selected mask is kept; DALI 2.4 keeps only the last polygon of each mask id (a mask
made of several polygons loses the others), so for masks of one polygon the outputs are DALI's.
"""

from __future__ import annotations

import numpy as np

from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import Arg, OpSchema, register
from jaxdali.tensors import TensorListCPU

__all__ = ["select_polygons", "SELECT_MASKS"]


def select_polygons(ids: np.ndarray, polygons: np.ndarray, vertices: np.ndarray, reindex: bool,
                    where: str = "") -> tuple[np.ndarray, np.ndarray]:
    """The polygons of masks ``ids`` (in that order) and their vertices, renumbered; see the module."""
    ids = ids.reshape(-1).astype(np.int64)
    polygons = polygons.reshape(-1, 3).astype(np.int64)
    unique, counts = np.unique(ids, return_counts=True)
    if (counts > 1).any():
        raise ValueError(f"fn.segmentation.select_masks{where}: mask id {int(unique[counts > 1][0])} is requested "
                         "more than once")
    missing = np.setdiff1d(ids, polygons[:, 0])
    if missing.size:
        raise ValueError(f"fn.segmentation.select_masks{where}: mask id {int(missing[0])} has no polygon")
    starts, ends = polygons[:, 1], polygons[:, 2]
    if ((starts < 0) | (ends < starts) | (ends > len(vertices))).any():
        bad = polygons[(starts < 0) | (ends < starts) | (ends > len(vertices))][0]
        raise ValueError(f"fn.segmentation.select_masks{where}: polygon {bad.tolist()} does not index the "
                         f"{len(vertices)} vertices")
    rank = {int(m): k for k, m in enumerate(ids)}
    rows = np.flatnonzero(np.isin(polygons[:, 0], ids))
    rows = rows[np.argsort([rank[int(m)] for m in polygons[rows, 0]], kind="stable")]
    lengths = ends[rows] - starts[rows]
    new_ends = np.cumsum(lengths)
    new_starts = new_ends - lengths
    vertex_index = np.repeat(starts[rows] - new_starts, lengths) + np.arange(int(lengths.sum()))
    mask_ids = np.array([rank[int(m)] for m in polygons[rows, 0]], np.int64) if reindex else polygons[rows, 0]
    out = np.stack([mask_ids, new_starts, new_ends], 1).astype(np.int32)
    return out, vertices[vertex_index]


class SelectMasks(Operator):
    """``fn.segmentation.select_masks``."""

    def run(self, ctx, inputs, args):
        ids, polygons, vertices = (tl.samples() for tl in inputs)
        polys_out, verts_out = [], []
        for i in range(len(ids)):
            v = np.asarray(vertices[i])
            p, sel = select_polygons(np.asarray(ids[i]), np.asarray(polygons[i]), v.reshape(len(v), -1) if v.ndim
                                     else v.reshape(0, 0), self.args["reindex_masks"], where=f": sample {i}")
            polys_out.append(p)
            verts_out.append(sel)
        return [TensorListCPU(polys_out), TensorListCPU(verts_out)]


SELECT_MASKS = register(OpSchema(
    name="segmentation.select_masks", impl=SelectMasks, min_inputs=3, max_inputs=3, num_outputs=2,
    doc="Selects the polygons and vertices of the given mask ids (inputs: mask ids, polygons "
        "[mask_id, start, end), vertices); outputs them renumbered, in the order of the ids.",
    args=(Arg("reindex_masks", "bool", False, "Renumber the selected masks 0, 1, ... in the order of the ids."),),
))
