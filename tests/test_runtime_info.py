"""``config.runtime_info()``: which resize and decode paths this installation runs, and why."""

import numpy as np

import jaxdali
from jaxdali import config, fn, pipeline_def
from jaxdali.ops import decoders, image_kernels, resample
from jaxdali.ops.readers import fits_tiles, protowire


def test_runtime_info_is_a_flat_str_dict_that_follows_the_config():
    info = config.runtime_info()
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in info.items())
    assert info["jaxdali"] == jaxdali.__version__
    assert (info["resize"], info["resize_reason"]) == resample.kernel_status()
    assert (info["decoder"], info["decoder_reason"]) == decoders.backend_status()
    assert (info["jpeg_decoder"], info["jpeg_decoder_reason"]) == decoders.jpeg_status()
    assert (info["protobuf_parser"], info["protobuf_parser_reason"]) == protowire.parser_status()
    assert (info["rice_decoder"], info["rice_decoder_reason"]) == fits_tiles.decoder_status()
    assert (info["normalize"], info["normalize_reason"]) == image_kernels.normalize_kernel_status()
    assert info["jax_backend"] == "cpu" and info["jax_devices"].endswith("x cpu")
    saved = config.get("disable_kernel"), config.get("decoder")
    try:
        config.update("disable_kernel", True)
        config.update("decoder", "opencv")
        info = config.runtime_info()
        assert info["resize"] == "numpy fallback" and "JAXDALI_DISABLE_KERNEL" in info["resize_reason"]
        assert info["protobuf_parser"] == "numpy fallback"
        assert "JAXDALI_DISABLE_KERNEL" in info["protobuf_parser_reason"]
        assert info["rice_decoder"] == "numpy fallback" and "JAXDALI_DISABLE_KERNEL" in info["rice_decoder_reason"]
        assert info["normalize"] == "numpy fallback" and "JAXDALI_DISABLE_KERNEL" in info["normalize_reason"]
        assert info["decoder"] == "opencv" and "JAXDALI_DECODER=opencv" in info["decoder_reason"]
        assert info["jpeg_decoder"] == "opencv"
    finally:
        config.update("disable_kernel", saved[0])
        config.update("decoder", saved[1])


def test_resize_gives_the_same_bits_with_and_without_the_kernel():
    """A real batch of mixed shapes, types and filters through fn.resize, both ways."""
    r = np.random.default_rng(0)
    batch = [r.integers(0, 256, (int(h), int(w), 3), np.uint8) for h, w in r.integers(20, 200, (6, 2))]

    @pipeline_def(batch_size=len(batch), num_threads=2, device_id=None)
    def pipe():
        images = fn.external_source(source=lambda: batch, batch=True)
        return (fn.resize(images, resize_x=64, resize_y=48), fn.resize(images, size=[91, 37], interp_type=5),
                fn.resize(images, resize_shorter=80, dtype=jaxdali.types.FLOAT, interp_type=3))

    results = []
    saved = config.get("disable_kernel")
    try:
        for disabled in (False, True):
            config.update("disable_kernel", disabled)
            p = pipe()
            p.build()
            results.append([np.asarray(o.at(i)) for o in p.run() for i in range(len(batch))])
            p.close()
    finally:
        config.update("disable_kernel", saved)
    for a, b in zip(*results):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
