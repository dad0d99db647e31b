# CPack: `cpack -G DEB` in the build folder makes memcoord_<version>_<arch>.deb from the install rules
# (cmake/Install.cmake), prefix /usr. Dependencies on Debian packages are computed by dpkg-shlibdeps from
# the installed binaries; libraries that no Debian package provides (the CUDA runtime under
# /usr/local/cuda, from NVIDIA's installer) are named in the description instead of in Depends.
set(CPACK_PACKAGE_NAME memcoord)
set(CPACK_PACKAGE_VENDOR "memcoord")
set(CPACK_PACKAGE_CONTACT "memcoord maintainers <memcoord@localhost>")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "GPU-memory coordinator for distributed training")
set(CPACK_PACKAGE_DESCRIPTION
  "memcoord gives each training rank isolated caching pools on its GPU, a coordinator that balances quotas and
triggers cache trims at one training step on every rank, the memcoord CLI, memcoord-launch, a C ABI
(libmemcoord_capi.so) that PyTorch loads as its allocator, and the CMake package find_package(memcoord).")
set(CPACK_PACKAGE_INSTALL_DIRECTORY memcoord)
set(CPACK_RESOURCE_FILE_README ${PROJECT_SOURCE_DIR}/README.md)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_GENERATOR DEB)

set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# memcoord-launch is a bash script that runs mpirun; the static libraries' headers need the -dev packages
# of what they link, which find_package(memcoord) looks for.
set(memcoord_deb_recommends "openmpi-bin")
set(memcoord_deb_suggests "libgrpc++-dev, libprotobuf-dev, libspdlog-dev, libfmt-dev, nlohmann-json3-dev, zlib1g-dev")
set(CPACK_DEBIAN_PACKAGE_DEPENDS "bash")
if(MEMCOORD_HAVE_CUDA)
  # libcudart comes from the CUDA toolkit, usually not a Debian package here: dpkg-shlibdeps is told to treat
  # its folder as private and the description says what the binaries need.
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${CUDAToolkit_LIBRARY_DIR})
  string(APPEND CPACK_PACKAGE_DESCRIPTION
    "\nBuilt with CUDA ${CUDAToolkit_VERSION}: the binaries need its runtime (libcudart.so.${CUDAToolkit_VERSION_MAJOR}) on the library path;"
    " without a GPU they run on host memory.")
endif()
if(MEMCOORD_HAVE_NCCL AND TARGET memcoord-train)
  string(APPEND CPACK_PACKAGE_DESCRIPTION
    "\nmemcoord-train also needs NCCL's libnccl.so.2 (not a Debian package either) on the library path.")
endif()
if(MEMCOORD_HAVE_MPI)
  string(APPEND memcoord_deb_suggests ", libopenmpi-dev")
endif()
if(MEMCOORD_HAVE_HTTP)
  # memcoord::http (and so memcoord::coordinator) finds cpp-httplib again through pkg-config.
  string(APPEND memcoord_deb_suggests ", libcpp-httplib-dev, pkg-config")
endif()
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "${memcoord_deb_recommends}")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "${memcoord_deb_suggests}")
# CPack puts CPACK_PACKAGE_DESCRIPTION_SUMMARY first (the synopsis) and this below it.
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION "${CPACK_PACKAGE_DESCRIPTION}")

include(CPack)
