"""Build of jaxdali's compiled kernels; everything else about the package is in pyproject.toml.

The kernels (resize; normalisation; direct JPEG decoding with libjpeg-turbo; protobuf record parsing; FITS Rice
decoding) are optional: where they
cannot be compiled (no C compiler, no Python headers), the build says so and goes on, and jaxdali runs its
NumPy paths (same values, slower).
On Python >= 3.11 the kernels use the stable ABI, so one wheel serves every later CPython (abi3).
"""

import hashlib
import pathlib
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.errors import CCompilerError, ExecError, PlatformError

KERNEL_SOURCE = "jaxdali/ops/_resample_kernel.c"
PROTOWIRE_SOURCE = "jaxdali/ops/readers/_protowire_kernel.c"
RICE_SOURCE = "jaxdali/ops/readers/_rice_kernel.c"
NORMALIZE_SOURCE = "jaxdali/ops/_normalize_kernel.c"
JPEG_SOURCE = "jaxdali/ops/_jpeg_kernel.c"
#: What each kernel does, for the warning when it is not built.
PURPOSE = {"jaxdali.ops._resample_kernel": "resize kernel",
           "jaxdali.ops.readers._protowire_kernel": "protobuf parser of Caffe/Caffe2 LMDB records",
           "jaxdali.ops.readers._rice_kernel": "Rice decoder of tile-compressed FITS images",
           "jaxdali.ops._normalize_kernel": "normalisation kernel of crop_mirror_normalize and normalize",
           "jaxdali.ops._jpeg_kernel": "direct libjpeg-turbo JPEG decoder (needs libjpeg-turbo's headers)"}
LIMITED_API = sys.version_info >= (3, 11) and not hasattr(sys, "gettotalrefcount")  # no abi3 for debug builds


def source_sha256(path: str) -> str:
    """SHA-256 of a C source with its line endings normalised (as jaxdali.ops.resample computes it)."""
    return hashlib.sha256(pathlib.Path(path).read_bytes().replace(b"\r\n", b"\n")).hexdigest()


class OptionalBuildExt(build_ext):
    """Compiles the kernel with flags for the compiler at hand; a failure is reported, not fatal."""

    def run(self):
        try:
            super().run()
        except (PlatformError, CCompilerError, ExecError, OSError) as e:
            for ext in self.extensions:
                self._skip(ext, e)
        if self.inplace:  # a kernel left by another build (e.g. a non-abi3 name) would be imported first
            for ext in self.extensions:
                built = pathlib.Path(self.get_ext_fullpath(ext.name))
                for other in built.parent.glob(built.name.split(".")[0] + ".*"):
                    if built.exists() and other.suffix in (".so", ".pyd") and other != built:
                        other.unlink()

    def build_extension(self, ext):
        if self.compiler.compiler_type == "msvc":
            # /fp:precise (MSVC's default) neither fuses multiply-adds nor reorders float32 sums.
            ext.extra_compile_args = ["/O2", "/fp:precise"]
        else:
            # -ffp-contract=off: no fused multiply-add, so every output is the float32 sum the kernel's
            # comment describes, on every CPU the target clones pick.
            ext.extra_compile_args = ["-O3", "-ffp-contract=off", "-fno-trapping-math"]
        try:
            super().build_extension(ext)
        except (CCompilerError, ExecError, PlatformError, OSError) as e:
            self._skip(ext, e)

    @staticmethod
    def _skip(ext: Extension, error: Exception) -> None:
        print(f"WARNING: jaxdali's compiled {PURPOSE[ext.name]} ({ext.sources[0]}) was not built ({error}); jaxdali "
              "will run its NumPy path instead (same results, slower). Install a C compiler and the Python headers, "
              "then reinstall, to build it.", file=sys.stderr)


def kernel(name: str, source: str, libraries: tuple[str, ...] = ()) -> Extension:
    """An optional extension module built from one C source, which gets the source's SHA-256 compiled in."""
    return Extension(
        name,
        [source],
        libraries=list(libraries),
        define_macros=[("JAXDALI_KERNEL_SOURCE", "0x" + source_sha256(source))]
        + ([("Py_LIMITED_API", "0x030B0000")] if LIMITED_API else []),
        py_limited_api=LIMITED_API,
        optional=True,
    )


setup(
    ext_modules=[
        kernel("jaxdali.ops._resample_kernel", KERNEL_SOURCE),
        kernel("jaxdali.ops.readers._protowire_kernel", PROTOWIRE_SOURCE),
        kernel("jaxdali.ops.readers._rice_kernel", RICE_SOURCE),
        kernel("jaxdali.ops._normalize_kernel", NORMALIZE_SOURCE),
        kernel("jaxdali.ops._jpeg_kernel", JPEG_SOURCE, ("jpeg",)),
    ],
    cmdclass={"build_ext": OptionalBuildExt},
    options={"bdist_wheel": {"py_limited_api": "cp311"}} if LIMITED_API else {},
)
