"""The shim guard (memcoord/_torch.py): a shim linked with its own copy of libstdc++ is refused with a message
that says why, one sharing the process's libstdc++ is accepted, and the link flag the package builds with
(SHARED_LIBSTDCXX_FLAGS) defeats -static-libstdc++. Built here with the system compiler; skipped without one."""

import os
import shutil
import subprocess
import tempfile
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


if __name__ == "__main__":
    unittest.main()
