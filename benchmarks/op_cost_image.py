"""Per-operator cost cases of the image operators of issue 22 (run by ``benchmarks/op_cost.py``)."""

import numpy as np
from op_cost import types_of

CASES = {
    "brightness": lambda fn, images: fn.brightness(images, brightness=1.2, brightness_shift=0.05),
    "contrast": lambda fn, images: fn.contrast(images, contrast=1.4),
    "hue": lambda fn, images: fn.hue(images, hue=30.0),
    "saturation": lambda fn, images: fn.saturation(images, saturation=0.6),
    "brightness_float": lambda fn, images: fn.brightness(images, brightness=1.2, dtype=types_of(fn).FLOAT),
    "color_space_conversion": lambda fn, images: fn.color_space_conversion(
        images, image_type=types_of(fn).RGB, output_type=types_of(fn).YCbCr),
    "color_space_conversion_gray": lambda fn, images: fn.color_space_conversion(
        images, image_type=types_of(fn).RGB, output_type=types_of(fn).GRAY),
    "gaussian_blur": lambda fn, images: fn.gaussian_blur(images, sigma=1.5),
    "noise.gaussian": lambda fn, images: fn.noise.gaussian(images, stddev=10.0),
    "noise.shot": lambda fn, images: fn.noise.shot(images, factor=4.0),
    "noise.salt_and_pepper": lambda fn, images: fn.noise.salt_and_pepper(images, prob=0.1),
    "erase": lambda fn, images: fn.erase(images, anchor=[50, 60, 200, 300], shape=[100, 120, 80, 80]),
    "grid_mask": lambda fn, images: fn.grid_mask(images, tile=40, ratio=0.4, angle=0.3),
    "equalize": lambda fn, images: fn.equalize(images),
    "jpeg_compression_distortion": lambda fn, images: fn.jpeg_compression_distortion(images, quality=40),
    "experimental.warp_perspective": lambda fn, images: fn.experimental.warp_perspective(
        images, matrix=[1.1, 0.1, -5.0, 0.05, 0.9, 3.0, 0.0002, 0.0001, 1.0]),
    "laplacian": lambda fn, images: fn.laplacian(images, window_size=5, dtype=types_of(fn).FLOAT),
    "filter": lambda fn, images: fn.filter(images, fn.external_source(
        source=lambda: [np.full((5, 5), 1 / 25, np.float32)] * 32)),
    "debayer": lambda fn, images: fn.debayer(images[:374, :, 0:1], blue_position=[0, 0]),
    "clahe": lambda fn, images: fn.clahe(images, tiles_x=8, tiles_y=8, clip_limit=2.0),
    "paste": lambda fn, images: fn.paste(images, ratio=1.5, fill_value=[124, 116, 104]),
    "water": lambda fn, images: fn.water(images),
    "sphere": lambda fn, images: fn.sphere(images),
    "multi_paste": lambda fn, images: fn.multi_paste(images, in_ids=[0, 1], output_size=[375, 500]),
}
