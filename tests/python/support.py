"""Shared set-up of the Python tests: memcoord on its host backend (real host memory standing in for a GPU),
standalone (no coordinator) unless a test starts one, and a skip for C ABI functions the library lacks."""

import os
import unittest

os.environ.setdefault("MEMCOORD_BACKEND", "host")
os.environ.pop("MEMCOORD_COORDINATOR", None)
os.environ.setdefault("MEMCOORD_LOG_LEVEL", "warn")

import memcoord  # noqa: E402  (after the environment above)
from memcoord import _capi  # noqa: E402


def require(test, *names):
    """Skips `test` when libmemcoord_capi.so lacks one of the C functions `names` (an older library); fails it
    instead under MEMCOORD_TEST_STRICT=1, as ctest runs them against the library built from the same tree."""
    lib = _capi.library()
    missing = [name for name in names if not lib.has(name)]
    if missing:
        message = f"{lib.path} lacks {', '.join(missing)}"
        if os.environ.get("MEMCOORD_TEST_STRICT") == "1":
            test.fail(message)
        raise unittest.SkipTest(message)


MIB = 1 << 20
