// A shared library that exports one C ABI name and one C++ name: check_exports.sh must reject it.
extern "C" int memcoord_fixture_ok() { return 1; }

namespace memcoord_fixture {
int leaked_cpp_symbol() { return 2; }
}  // namespace memcoord_fixture
