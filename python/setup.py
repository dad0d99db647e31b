"""Builds the memcoord Python package: ships libmemcoord_capi.so inside it and, where torch is importable,
compiles the C++ shim (memcoord/csrc/torch_shim.cpp) against that torch.

Where the library comes from, first match wins (printed during the build):
  1. $MEMCOORD_CAPI_LIB (a path to libmemcoord_capi.so);
  2. $MEMCOORD_BUILD_DIR/lib/libmemcoord_capi.so, else the repository's build/release/lib/;
  3. a CMake build of the memcoord_capi target into the repository's build/python/ (tests, benchmarks and
     examples off).
Environment: MEMCOORD_TORCH_SHIM=off skips the shim, =required fails the install when it cannot be built
(default: auto, a warning and the package falls back to building it on first use or to PyTorch's Python API).
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

try:
    from setuptools.command.build import build
except ImportError:  # setuptools < 62.4
    from distutils.command.build import build

HERE = Path(__file__).resolve().parent
REPO = Path(os.environ.get("MEMCOORD_SOURCE_DIR", HERE.parent)).resolve()
LIBRARY = "libmemcoord_capi.so"


def _log(message):
    print(f"memcoord setup: {message}", file=sys.stderr, flush=True)


def _check_wheel_command():
    """pip --no-build-isolation (the offline install) does not install the build requirements: without the
    wheel package, setuptools < 70.1 fails with only "invalid command 'bdist_wheel'"."""
    if not {"bdist_wheel", "dist_info"} & set(sys.argv[1:]):
        return
    try:
        from setuptools.command.bdist_wheel import bdist_wheel  # noqa: F401 - setuptools >= 70.1 has its own
    except ImportError:
        try:
            import wheel  # noqa: F401
        except ImportError:
            raise SystemExit(f"memcoord setup: building the package needs the 'wheel' package, which {sys.executable} "
                             "lacks: apt-get install python3-wheel (./run setup does) and make the venv with "
                             "--system-site-packages, or pip install wheel") from None


def _cmake_build():
    build_dir = REPO / "build" / "python"
    if not (REPO / "CMakeLists.txt").is_file():
        raise SystemExit(
            f"memcoord setup: {LIBRARY} is needed and {REPO} is not memcoord's source tree; set MEMCOORD_CAPI_LIB "
            "to a built library or MEMCOORD_SOURCE_DIR to the repository"
        )
    configure = ["cmake", "-S", str(REPO), "-B", str(build_dir), "-DCMAKE_BUILD_TYPE=Release",
                 "-DMEMCOORD_BUILD_TESTS=OFF", "-DMEMCOORD_BUILD_BENCH=OFF", "-DMEMCOORD_BUILD_EXAMPLES=OFF"]
    if shutil.which("ninja"):
        configure += ["-G", "Ninja"]
    env = dict(os.environ, CCACHE_BASEDIR=str(REPO), CCACHE_NOHASHDIR="1")
    if not (build_dir / "CMakeCache.txt").is_file():
        _log("configuring " + " ".join(configure))
        subprocess.run(configure, check=True, env=env)
    _log(f"building {LIBRARY} in {build_dir}")
    subprocess.run(["cmake", "--build", str(build_dir), "--target", "memcoord_capi"], check=True, env=env)
    return build_dir / "lib" / LIBRARY


def locate_library():
    env = os.environ.get("MEMCOORD_CAPI_LIB")
    if env:
        path = Path(env)
        if not path.is_file():
            raise SystemExit(f"memcoord setup: MEMCOORD_CAPI_LIB={env} is not a file; it must name {LIBRARY}")
        return path, "MEMCOORD_CAPI_LIB"
    build_dir = os.environ.get("MEMCOORD_BUILD_DIR")
    candidates = [Path(build_dir) / "lib" / LIBRARY] if build_dir else []
    candidates.append(REPO / "build" / "release" / "lib" / LIBRARY)
    for path in candidates:
        if path.is_file():
            return path, "an existing build"
    return _cmake_build(), "a CMake build"


class BuildPyWithLibrary(build_py):
    """build_py plus libmemcoord_capi.so copied into memcoord/lib/."""

    def run(self):
        super().run()
        source, origin = locate_library()
        target = Path(self.build_lib) / "memcoord" / "lib"
        target.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target / LIBRARY)
        _log(f"packaged {source} ({origin})")


class FreshBuild(build):
    """build, starting from an empty build/lib*/memcoord/: pip builds in python/build/, which setuptools keeps
    between installs, and would otherwise ship whatever an earlier install left there (a module removed
    since, a C++ shim built against another torch, which build_ext sees as up to date and does not rebuild)."""

    def run(self):
        for build_lib in {self.build_lib, self.build_platlib, self.build_purelib}:
            stale = Path(build_lib) / "memcoord"
            if stale.is_dir():
                shutil.rmtree(stale)
        super().run()


class BinaryDistribution(Distribution):
    """The wheel carries a shared library: it is platform-specific even without the shim."""

    def has_ext_modules(self):
        return True


def torch_shim():
    """(ext_modules, cmdclass entries) for the shim, or none when torch is absent or it is turned off."""
    mode = os.environ.get("MEMCOORD_TORCH_SHIM", "auto")
    if mode not in ("auto", "required", "off"):
        raise SystemExit(f"memcoord setup: MEMCOORD_TORCH_SHIM={mode!r}; accepted: auto, required, off")
    if mode == "off":
        _log("C++ shim skipped (MEMCOORD_TORCH_SHIM=off)")
        return [], {}
    try:
        import torch  # noqa: F401
        from torch.utils.cpp_extension import BuildExtension, CUDAExtension
    except ImportError as error:
        if mode == "required":
            raise SystemExit(f"memcoord setup: MEMCOORD_TORCH_SHIM=required but torch is not importable ({error})")
        _log("torch is not importable here: the C++ shim is not built (the package builds it on first use, "
             "or uses PyTorch's Python allocator API)")
        return [], {}

    class OptionalBuildExtension(BuildExtension):
        def build_extension(self, ext):
            try:
                super().build_extension(ext)
            except Exception as error:  # noqa: BLE001 - any compiler failure leaves the package usable
                if mode == "required":
                    raise
                _log(f"the C++ shim did not build ({error}); the package will use PyTorch's Python API")

    # The shim has no CUDA kernels; a set arch list keeps cpp_extension from querying the GPUs.
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")
    source = "memcoord/csrc/torch_shim.cpp"
    # The shared libstdc++ first on the link line, so that a toolchain adding -static-libstdc++ cannot give the
    # shim a private copy (memcoord/_torch.py, SHARED_LIBSTDCXX_FLAGS, says why; the same flag there).
    try:
        # CUDAExtension looks for the CUDA toolkit at once: OSError ("CUDA_HOME environment variable is not
        # set") with a CPU-only torch or no toolkit, before build_extension's fallback could catch anything.
        ext = CUDAExtension("memcoord._torch_shim", [source], extra_compile_args={"cxx": ["-O2"], "nvcc": []},
                            extra_link_args=["-l:libstdc++.so.6"])
    except Exception as error:  # noqa: BLE001 - any failure to describe the extension: as a failed build
        if mode == "required":
            raise SystemExit(f"memcoord setup: MEMCOORD_TORCH_SHIM=required but the C++ shim cannot be built here "
                             f"({type(error).__name__}: {error}); it needs torch with CUDA and the CUDA toolkit")
        _log(f"the C++ shim cannot be built here ({type(error).__name__}: {error}); the package will build it on "
             "first use where it can, or use PyTorch's Python API")
        return [], {}
    return [ext], {"build_ext": OptionalBuildExtension}


_check_wheel_command()
ext_modules, shim_cmdclass = torch_shim()
setup(
    cmdclass={"build": FreshBuild, "build_py": BuildPyWithLibrary, **shim_cmdclass},
    ext_modules=ext_modules,
    distclass=BinaryDistribution,
)
