# Warnings are errors in our own code (never in third-party headers, which come in as SYSTEM).
function(memcoord_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wold-style-cast
      -Wcast-align -Wunused -Woverloaded-virtual -Wimplicit-fallthrough -Werror
      # GCC 12 reports false -Wrestrict on std::string at -O3 (GCC bug 105329).
      $<$<CXX_COMPILER_ID:GNU>:-Wno-restrict>>
    $<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings>)
endfunction()
