# Install rules and the exported CMake package, included last by the top-level CMakeLists.txt.
#
# `cmake --install BUILD [--prefix P]` puts in place:
#   lib/            every memcoord library target of the module folders (static as built) and libmemcoord_capi.so
#   include/        the public headers, keeping their folders (#include "worker/memcoord.h"), and with gRPC
#                   the generated memcoord/v1/*.pb.h that memcoord::proto and coordinator/service/ use
#   bin/            the `memcoord` CLI, `memcoord-launch` (and memcoord-train when it was built)
#   lib/cmake/memcoord/  memcoordConfig.cmake: find_package(memcoord) gives memcoord::<name> for each library
#                   memcoord_<name> (memcoord::worker, memcoord::allocator, memcoord::capi, ...), their
#                   dependencies found again through find_dependency.
#
# Libraries are found, not listed: every library target made under the module folders is installed and
# exported, so a library another module adds later is exported with it (an exported target that links a
# library outside the export set is a configure error). A new third-party dependency of an exported target
# must be found again in cmake/memcoordConfig.cmake.in; tests/install catches one that is not.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(memcoord_install_cmakedir ${CMAKE_INSTALL_LIBDIR}/cmake/memcoord)
set(memcoord_module_folders common allocator collectives worker coordinator proto)

# memcoord_collect_libraries(OUT DIR): appends to OUT every non-imported library target made in DIR and below.
function(memcoord_collect_libraries out dir)
  set(found ${${out}})
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  foreach(target ${targets})
    get_target_property(type ${target} TYPE)
    if(type MATCHES "^(STATIC|SHARED|INTERFACE)_LIBRARY$" AND target MATCHES "^memcoord_")
      list(APPEND found ${target})
    endif()
  endforeach()
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(subdir ${subdirs})
    memcoord_collect_libraries(found ${subdir})
  endforeach()
  set(${out} ${found} PARENT_SCOPE)
endfunction()

# Include folders inside the source or build tree are only meaningful there: consumers of the installed
# package find the headers under include/. The module CMakeLists name ${PROJECT_SOURCE_DIR} (and the
# generated proto folder) plainly; here they become build-tree-only, which install(EXPORT) requires.
function(memcoord_relocatable_includes target)
  foreach(property INTERFACE_INCLUDE_DIRECTORIES INTERFACE_SYSTEM_INCLUDE_DIRECTORIES)
    get_target_property(dirs ${target} ${property})
    if(NOT dirs)
      continue()
    endif()
    set(rewritten "")
    foreach(dir ${dirs})
      if(dir MATCHES "^(${PROJECT_SOURCE_DIR}|${PROJECT_BINARY_DIR})(/|$)")
        list(APPEND rewritten "$<BUILD_INTERFACE:${dir}>")
      else()
        list(APPEND rewritten "${dir}")
      endif()
    endforeach()
    if(property STREQUAL "INTERFACE_INCLUDE_DIRECTORIES")
      list(APPEND rewritten "$<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>")
    endif()
    set_property(TARGET ${target} PROPERTY ${property} "${rewritten}")
  endforeach()
endfunction()

set(memcoord_libraries "")
foreach(folder ${memcoord_module_folders})
  if(EXISTS ${PROJECT_SOURCE_DIR}/${folder}/CMakeLists.txt AND NOT "${folder}" IN_LIST MEMCOORD_SKIP)
    get_property(made DIRECTORY ${PROJECT_SOURCE_DIR} PROPERTY SUBDIRECTORIES)
    if("${PROJECT_SOURCE_DIR}/${folder}" IN_LIST made)
      memcoord_collect_libraries(memcoord_libraries ${PROJECT_SOURCE_DIR}/${folder})
    endif()
  endif()
endforeach()
list(REMOVE_DUPLICATES memcoord_libraries)

# The generated protobuf/gRPC headers (memcoord/v1/*.pb.h) are memcoord::proto's headers, and the installed
# coordinator/service/ headers include them: they go to include/ beside the others. Their folder is read off
# the target before its include folders become build-tree-only below.
set(memcoord_proto_header_dirs "")
if("memcoord_proto" IN_LIST memcoord_libraries)
  get_target_property(memcoord_proto_dirs memcoord_proto INTERFACE_INCLUDE_DIRECTORIES)
  foreach(dir ${memcoord_proto_dirs})
    if(dir MATCHES "^${PROJECT_BINARY_DIR}/")
      list(APPEND memcoord_proto_header_dirs ${dir})
    endif()
  endforeach()
endif()
# Dependencies that memcoordConfig.cmake must find again beyond the ones every build has.
set(MEMCOORD_HAVE_HTTP OFF)
if("memcoord_http" IN_LIST memcoord_libraries)
  set(MEMCOORD_HAVE_HTTP ON)  # memcoord::http links cpp-httplib through pkg-config (PkgConfig::CPP_HTTPLIB)
endif()
set(MEMCOORD_NCCL_LIBRARY_DIR "")
if(NCCL_LIBRARY)
  get_filename_component(MEMCOORD_NCCL_LIBRARY_DIR "${NCCL_LIBRARY}" DIRECTORY)
endif()

foreach(target ${memcoord_libraries})
  string(REGEX REPLACE "^memcoord_" "" export_name ${target})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${export_name})
  memcoord_relocatable_includes(${target})
  # In-tree code may name the package's spelling too (memcoord::worker), as a consumer of the install does.
  if(NOT TARGET memcoord::${export_name})
    add_library(memcoord::${export_name} ALIAS ${target})
  endif()
endforeach()
# The installed libmemcoord_capi.so finds nothing of ours at run time (everything is linked in statically);
# the system libraries it needs come from the system's paths.
install(TARGETS ${memcoord_libraries} EXPORT memcoordTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# Public headers: every header of the module folders, in its folder (detail/ too: public headers include
# some of them). The CLI's own headers stay out.
foreach(folder common allocator collectives worker coordinator)
  if(EXISTS ${PROJECT_SOURCE_DIR}/${folder})
    install(DIRECTORY ${PROJECT_SOURCE_DIR}/${folder}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/${folder}
      FILES_MATCHING PATTERN "*.h" PATTERN "calibration" EXCLUDE PATTERN "examples" EXCLUDE
      PATTERN "assets" EXCLUDE)
  endif()
endforeach()
foreach(dir ${memcoord_proto_header_dirs})
  install(DIRECTORY ${dir}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.pb.h")
endforeach()

foreach(program memcoord memcoord-train)
  if(TARGET ${program})
    install(TARGETS ${program} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  endif()
endforeach()
# Installed binaries keep the path of libraries found outside the system's folders (the CUDA runtime under
# /usr/local/cuda), which the build tree's RPATH had and an install would otherwise drop.
# They are built with that same path (BUILD_WITH_INSTALL_RPATH): none of them loads a library of the build
# tree, and for a target it will rewrite at install time CMake otherwise ends the build tree's RUNPATH with an
# empty element ("/usr/local/cuda/lib:"), which the dynamic loader reads as the current directory. The build
# tree's libmemcoord_capi.so is the one the Python package ships (python/setup.py) and the source tree's
# package loads, so a library planted in the working directory of a Python program would be loaded.
# tests/install/exported_package_test.sh checks both trees.
foreach(binary memcoord memcoord-train ${memcoord_libraries})
  if(TARGET ${binary})
    get_target_property(type ${binary} TYPE)
    if(type MATCHES "^(EXECUTABLE|SHARED_LIBRARY)$")
      set_target_properties(${binary} PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON BUILD_WITH_INSTALL_RPATH ON)
    endif()
  endif()
endforeach()
# memcoord-launch looks for `memcoord` next to itself, so both go to bin/.
install(PROGRAMS ${PROJECT_SOURCE_DIR}/launch/memcoord-launch DESTINATION ${CMAKE_INSTALL_BINDIR})

install(EXPORT memcoordTargets NAMESPACE memcoord:: DESTINATION ${memcoord_install_cmakedir})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/memcoordConfig.cmake.in
  ${PROJECT_BINARY_DIR}/memcoordConfig.cmake INSTALL_DESTINATION ${memcoord_install_cmakedir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/memcoordConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/memcoordConfig.cmake ${PROJECT_BINARY_DIR}/memcoordConfigVersion.cmake
  DESTINATION ${memcoord_install_cmakedir})

include(Packaging)
