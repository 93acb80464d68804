# `cmake --install <build dir> --prefix <dir>` installs the library, its headers and a package,
# so that another project can use it with
#   find_package(tessera REQUIRED)            # -DCMAKE_PREFIX_PATH=<dir>
#   target_link_libraries(app PRIVATE tessera::tessera)
# and, for other build systems, `pkg-config --cflags --libs tessera` (PKG_CONFIG_PATH=<dir>/lib/pkgconfig).
# Only the library is installed: tests, benchmarks and the key-value store stay in the tree.
# The install test (tests/install_test.cmake) installs a build and builds examples/consumer
# against it, and the first program again with pkg-config's flags.
if(NOT TESSERA_INSTALL)
  return()
endif()
include(CMakePackageConfigHelpers)  # (GNUInstallDirs: cmake/options.cmake, src/ uses it too)

set(TESSERA_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/tessera)
install(TARGETS tessera EXPORT tesseraTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/tessera DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# Generated from project()'s version (top-level CMakeLists.txt): beside the other headers.
install(FILES ${PROJECT_BINARY_DIR}/include/tessera/version.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tessera)
install(EXPORT tesseraTargets NAMESPACE tessera:: DESTINATION ${TESSERA_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/tesseraConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/tesseraConfig.cmake
                              INSTALL_DESTINATION ${TESSERA_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/tesseraConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/tesseraConfig.cmake ${PROJECT_BINARY_DIR}/tesseraConfigVersion.cmake
        DESTINATION ${TESSERA_CMAKE_DIR})

# The pkg-config file finds its prefix from where it lies (${pcfiledir}), so it stays right for
# `cmake --install --prefix` elsewhere than CMAKE_INSTALL_PREFIX; it carries the same compile
# definitions as the CMake package.
# (/prefix: any absolute path; only the way up from <libdir>/pkgconfig to it matters.)
file(RELATIVE_PATH TESSERA_PC_TO_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
string(REGEX REPLACE "/$" "" TESSERA_PC_TO_PREFIX "${TESSERA_PC_TO_PREFIX}")
list(TRANSFORM TESSERA_PUBLIC_DEFINITIONS PREPEND " -D" OUTPUT_VARIABLE TESSERA_PC_DEFINES)
string(JOIN "" TESSERA_PC_DEFINES ${TESSERA_PC_DEFINES})
configure_file(${PROJECT_SOURCE_DIR}/cmake/tessera.pc.in ${PROJECT_BINARY_DIR}/tessera.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/tessera.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
