"""Build of jaxdali's one compiled kernel; everything else about the package is in pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "jaxdali.ops._resample_kernel",
            ["jaxdali/ops/_resample_kernel.c"],
            # -ffp-contract=off: no fused multiply-add, so every output is the float32 sum the
            # kernel's comment describes, on every CPU the ifunc clones pick.
            extra_compile_args=["-O3", "-ffp-contract=off", "-fno-trapping-math"],
        )
    ],
)
