"""Per-operator cost cases of the generic operators (run by ``benchmarks/op_cost.py``)."""

from op_cost import DATA, types_of

CASES = {
    "cast": lambda fn, images: fn.cast(images, dtype=types_of(fn).FLOAT),
    "transpose": lambda fn, images: fn.transpose(images, perm=[2, 0, 1]),
    "constant": lambda fn, images: fn.constant(fdata=[0.5] * 1000, shape=[10, 100]),
    "zeros_like": lambda fn, images: fn.zeros_like(images),
    "full_like": lambda fn, images: fn.full_like(images, fn.constant(idata=[1, 2, 3], dtype=types_of(fn).UINT8)),
    "cast_like": lambda fn, images: fn.cast_like(images, fn.constant(fdata=0.0)),
    "copy": lambda fn, images: fn.copy(images),
    "cat": lambda fn, images: fn.cat(images, images, axis=2),
    "stack": lambda fn, images: fn.stack(images, images),
    "expand_dims": lambda fn, images: fn.expand_dims(images, axes=[0], new_axis_names="F"),
    "reductions.sum": lambda fn, images: fn.reductions.sum(images, axes=[0, 1]),
    "reductions.mean": lambda fn, images: fn.reductions.mean(images, axes=[0, 1]),
    "reductions.max": lambda fn, images: fn.reductions.max(images),
    "reductions.std_dev": lambda fn, images: fn.reductions.std_dev(images, fn.reductions.mean(images)),
    "shapes": lambda fn, images: fn.shapes(images),
    "lookup_table": lambda fn, images: fn.lookup_table(images, keys=list(range(0, 256, 2)), values=[1.0] * 128),
    "reinterpret": lambda fn, images: fn.reinterpret(images, rel_shape=[0.5, 2, 1]),
    "element_extract": lambda fn, images: fn.element_extract(fn.per_frame(images, replace=True), element_map=[0, 50]),
    "sequence_rearrange": lambda fn, images: fn.sequence_rearrange(fn.per_frame(images, replace=True),
                                                                   new_order=list(range(59, -1, -1))),
    "permute_batch": lambda fn, images: fn.permute_batch(images, indices=fn.batch_permutation()),
    "random.beta": lambda fn, images: fn.random.beta(alpha=2.0, beta=0.5, shape=[1000]),
    "random.uniform": lambda fn, images: fn.random.uniform(range=[0.0, 1.0], shape=[1000]),
    "slice": lambda fn, images: fn.slice(images, rel_start=[0.1, 0.1], rel_shape=[0.8, 0.8]),
    "slice_pad": lambda fn, images: fn.slice(images, start=[-10, -10], shape=[400, 520], out_of_bounds_policy="pad"),
    "pad": lambda fn, images: fn.pad(images, axis_names="HW", align=[64]),
    "peek_image_shape": lambda fn, images: fn.peek_image_shape(fn.readers.file(file_root=str(DATA))[0]),
    "readers.file": lambda fn, images: fn.readers.file(file_root=str(DATA))[0],
    "python_function": lambda fn, images: fn.python_function(images, function=lambda image: image[::2, ::2].copy()),
    "python_function_batch": lambda fn, images: fn.python_function(
        images, function=lambda batch: [image[::2, ::2].copy() for image in batch], batch_processing=True),
    "squeeze": lambda fn, images: fn.squeeze(fn.expand_dims(images, axes=[0], new_axis_names="F"), axis_names="F"),
}
