"""The shim guard (memcoord/_torch.py): a shim linked with its own copy of libstdc++ is refused with a message
that says why, one sharing the process's libstdc++ is accepted, and the link flag the package builds with
(SHARED_LIBSTDCXX_FLAGS) defeats -static-libstdc++. Built here with the system compiler; skipped without one."""

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import types
import unittest

import support  # noqa: F401  (environment)
from memcoord import _torch

SOURCE = """#include <sstream>
#include <string>
extern "C" int format_size(unsigned long v) { std::ostringstream s; s << v; return static_cast<int>(s.str().size()); }
"""


@unittest.skipUnless(shutil.which("c++"), "no C++ compiler")
class ShimLibstdcxxTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="memcoord-shim-")
        source = os.path.join(cls.dir, "probe.cc")
        with open(source, "w") as f:
            f.write(SOURCE)
        cls.libs = {}
        for name, flags in {"shared": [], "static": ["-static-libstdc++"],
                            "static_then_flag": ["-static-libstdc++"] + _torch.SHARED_LIBSTDCXX_FLAGS}.items():
            path = os.path.join(cls.dir, f"lib{name}.so")
            subprocess.run(["c++", "-shared", "-fPIC", "-O2", source, "-o", path] + flags, check=True)
            cls.libs[name] = types.SimpleNamespace(__file__=path)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_a_private_copy_is_refused_naming_the_file_and_the_fix(self):
        problem = _torch._private_libstdcxx(self.libs["static"])
        self.assertIsNotNone(problem)
        self.assertIn(self.libs["static"].__file__, problem)
        self.assertIn("own copy of libstdc++", problem)
        self.assertIn("pip install --no-build-isolation ./python", problem)

    def test_the_shared_library_is_accepted(self):
        self.assertIsNone(_torch._private_libstdcxx(self.libs["shared"]))

    def test_the_package_link_flag_defeats_static_libstdcxx(self):
        self.assertIsNone(_torch._private_libstdcxx(self.libs["static_then_flag"]))


SETUP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python", "setup.py")


class SetupWithoutCudaToolkitTest(unittest.TestCase):
    """python/setup.py where torch is importable but the shim cannot be described (a CPU-only torch, or no
    CUDA toolkit: CUDAExtension raises OSError "CUDA_HOME environment variable is not set" at once): auto
    installs without the shim, with a line saying why; required fails naming the reason. setup() itself is
    replaced: what is checked is the extension list setup.py hands it."""

    SCRIPT = textwrap.dedent("""
        import runpy, sys, types
        import setuptools

        torch = types.ModuleType("torch")
        utils = types.ModuleType("torch.utils")
        cpp_extension = types.ModuleType("torch.utils.cpp_extension")

        def CUDAExtension(*args, **kwargs):
            raise OSError("CUDA_HOME environment variable is not set. Please set it to your CUDA install root.")

        cpp_extension.CUDAExtension = CUDAExtension
        cpp_extension.BuildExtension = type("BuildExtension", (), {})
        torch.utils, utils.cpp_extension = utils, cpp_extension
        sys.modules.update({"torch": torch, "torch.utils": utils, "torch.utils.cpp_extension": cpp_extension})
        given = {}
        setuptools.setup = lambda **kwargs: given.update(kwargs)
        runpy.run_path(sys.argv[1], run_name="__main__")
        print("ext_modules", given["ext_modules"], "cmdclass", sorted(given["cmdclass"]))
    """)

    def run_setup(self, mode):
        env = dict(os.environ, MEMCOORD_TORCH_SHIM=mode, TORCH_CUDA_ARCH_LIST="9.0")
        return subprocess.run([sys.executable, "-c", self.SCRIPT, SETUP], env=env, capture_output=True, text=True,
                              timeout=60)

    def test_auto_installs_without_the_shim_saying_why(self):
        done = self.run_setup("auto")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("ext_modules [] cmdclass ['build', 'build_py']", done.stdout)
        self.assertIn("the C++ shim cannot be built here (OSError: CUDA_HOME environment variable is not set",
                      done.stderr)

    def test_required_fails_naming_the_reason(self):
        done = self.run_setup("required")
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("MEMCOORD_TORCH_SHIM=required but the C++ shim cannot be built here (OSError: CUDA_HOME",
                      done.stderr)
        self.assertNotIn("Traceback", done.stderr)


if __name__ == "__main__":
    unittest.main()
