"""Image operators added for DALI conformance (issue 22); importing this package registers them."""

from jaxdali.ops.image import color_adjust, color_space, equalize, erase, gaussian_blur, grid_mask, noise  # noqa: F401
from jaxdali.ops.image import clahe, debayer, filter, jpeg_distortion, laplacian, paste, warp_perspective  # noqa: F401
from jaxdali.ops.image import displace, dump_image, multi_paste  # noqa: F401
