# SPDX-License-Identifier: Apache-2.0
# Debian packages: `cpack -G DEB` in the build folder (docs/library.md) makes
#   dtnn                      the program, libdtnn.so, the public headers, the CMake package and dtnn.pc, under /usr;
#   dtnn-starpu-<prefix>      when dtnn was built against its own StarPU (DTNN_STARPU_PREFIX): that prefix, at the
#                             same path, since the program and the library find StarPU there (RPATH); dtnn depends
#                             on it.
# Each package's dependencies on Debian's libraries come from dpkg-shlibdeps (package dpkg-dev).
set(CPACK_PACKAGE_NAME dtnn)
set(CPACK_PACKAGE_VENDOR dtnn)
set(CPACK_PACKAGE_CONTACT "dtnn developers <dtnn@invalid>")
# The summary line of every package; each has a description of its own below it.
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "dtnn: neural network training as StarPU task graphs")
set(CPACK_DEBIAN_DTNN_DESCRIPTION "The dtnn program and C++ library
The program trains the model zoo's networks (dtnn train); the library (libdtnn.so, headers under
/usr/include/dtnn, find_package(dtnn) and pkg-config's dtnn) builds and trains models from C++.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_DTNN_PACKAGE_NAME dtnn)
# <dtnn/task_graph.hpp> includes starpu.h, which includes hwloc.h.
set(CPACK_DEBIAN_DTNN_PACKAGE_SUGGESTS "libhwloc-dev, dataset-fashion-mnist")
set(CPACK_COMPONENTS_ALL dtnn)
if(DTNN_STARPU_PREFIX)
  get_filename_component(dtnn_starpu_name ${DTNN_STARPU_PREFIX} NAME)
  string(TOLOWER "dtnn-${dtnn_starpu_name}" dtnn_starpu_package)
  string(REGEX REPLACE "[^a-z0-9.+-]" "-" dtnn_starpu_package "${dtnn_starpu_package}")
  # Not part of `cmake --install`, which leaves StarPU where it is.
  install(DIRECTORY ${DTNN_STARPU_PREFIX}/ DESTINATION ${DTNN_STARPU_PREFIX} COMPONENT starpu EXCLUDE_FROM_ALL
          USE_SOURCE_PERMISSIONS)
  list(APPEND CPACK_COMPONENTS_ALL starpu)
  set(CPACK_COMPONENT_DTNN_DEPENDS starpu)
  set(CPACK_DEBIAN_STARPU_PACKAGE_NAME ${dtnn_starpu_package})
  set(CPACK_DEBIAN_STARPU_DESCRIPTION "StarPU ${STARPU_VERSION} as dtnn builds it, in ${DTNN_STARPU_PREFIX}
The task runtime of dtnn (scripts/build_starpu.sh: Debian's source package with more CPU workers, FxT and MPI),
at the prefix that dtnn's program and library find it by (RPATH).")
  # libstarpu is in the package beside dtnn's, not in one that dpkg knows yet.
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${STARPU_LIBDIR})
endif()
include(CPack)
