# cmake -DINPUT=file -DOUTPUT=header -DNAME=kSymbol -P embed_asset.cmake
# Writes a header holding INPUT as `inline constexpr std::string_view NAME`, so the coordinator serves its
# dashboard with nothing to install beside the binary.
file(READ "${INPUT}" content)
string(FIND "${content}" ")memcoord_asset\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${INPUT} contains the raw-string delimiter )memcoord_asset\"")
endif()
file(WRITE "${OUTPUT}.tmp" "// Generated from ${INPUT} by embed_asset.cmake; do not edit.\n#pragma once\n#include <string_view>\nnamespace memcoord::coordinator {\ninline constexpr std::string_view ${NAME} = R\"memcoord_asset(${content})memcoord_asset\";\n}  // namespace memcoord::coordinator\n")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
