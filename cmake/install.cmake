# What `cmake --install` and `cpack` ship: two shared libraries made of the layers' objects
# (libdptrain: every layer but ONNX export; libdptrain_onnx: the export), their headers,
# the dptrain CLI (apps/CMakeLists.txt), a CMake package (find_package(dptrain), targets dptrain::dptrain and
# dptrain::onnx, components onnx, MPI and CUDA) and a pkg-config file (dptrain.pc).
# The libraries link their dependencies privately, so that a program built against them
# needs nothing but a C++20 compiler and threads; CPack's .deb lists the Debian packages
# of those libraries (dpkg-shlibdeps).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# dpt_layer_dependencies(<out> <layer>...): what the layers link outside dpt itself.
function(dpt_layer_dependencies out)
  set(found "")
  foreach(layer ${ARGN})
    get_target_property(links ${layer} INTERFACE_LINK_LIBRARIES)
    foreach(link ${links})
      if(link MATCHES "^\\$<LINK_LIBRARY:[A-Z_]+,(.+)>$")
        set(link ${CMAKE_MATCH_1})
      endif()
      if(NOT link MATCHES "^dpt_")
        list(APPEND found ${link})
      endif()
    endforeach()
  endforeach()
  list(REMOVE_DUPLICATES found)
  set(${out} ${found} PARENT_SCOPE)
endfunction()

set(dpt_library_layers dpt_core dpt_cuda dpt_autograd dpt_ops dpt_nn dpt_optim dpt_data dpt_parallel dpt_checkpoint
                       dpt_train dpt_infer)
set(dpt_objects "")
foreach(layer ${dpt_library_layers})
  list(APPEND dpt_objects $<TARGET_OBJECTS:${layer}>)
endforeach()
dpt_layer_dependencies(dpt_private_links ${dpt_library_layers})
add_library(dptrain_shared SHARED ${dpt_objects})
set_target_properties(dptrain_shared PROPERTIES OUTPUT_NAME dptrain EXPORT_NAME dptrain VERSION ${PROJECT_VERSION}
                                                SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
target_link_libraries(dptrain_shared PRIVATE ${dpt_private_links} PUBLIC Threads::Threads)
target_compile_features(dptrain_shared INTERFACE cxx_std_20)
target_include_directories(dptrain_shared INTERFACE $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/src>
                                                    $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/generated>
                                                    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)

dpt_layer_dependencies(dpt_onnx_private_links dpt_export)
add_library(dptrain_onnx SHARED $<TARGET_OBJECTS:dpt_export>)
set_target_properties(dptrain_onnx PROPERTIES EXPORT_NAME onnx VERSION ${PROJECT_VERSION}
                                              SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
target_link_libraries(dptrain_onnx PUBLIC dptrain_shared PRIVATE ${dpt_onnx_private_links})
# The installed libraries find each other (and the CLI them) beside themselves.
set_target_properties(dptrain_shared dptrain_onnx PROPERTIES INSTALL_RPATH "$ORIGIN")

install(TARGETS dptrain_shared dptrain_onnx EXPORT dptrainTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT library
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT library)
# The headers of every layer but the backends' internals (oneDNN, CUDA, cuDNN types).
install(DIRECTORY ${PROJECT_SOURCE_DIR}/src/dpt DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT library
        FILES_MATCHING PATTERN "*.h"
        REGEX "dpt/ops/(cpu|cuda)$" EXCLUDE REGEX "dpt/cuda$" EXCLUDE REGEX "dpt/report$" EXCLUDE PATTERN "testing.h" EXCLUDE)
install(FILES ${PROJECT_BINARY_DIR}/generated/dpt/version.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/dpt
        COMPONENT library)

install(EXPORT dptrainTargets NAMESPACE dptrain:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/dptrain
        COMPONENT library)
set(DPT_CONFIG_WITH_MPI ${DPT_WITH_MPI})
set(DPT_CONFIG_WITH_CUDA ${DPT_WITH_CUDA})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/dptrainConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/dptrainConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/dptrain)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/dptrainConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/dptrainConfig.cmake ${PROJECT_BINARY_DIR}/dptrainConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/dptrain COMPONENT library)
# The .pc file names the prefix relative to itself, so the tree can move (--prefix, cpack).
file(RELATIVE_PATH DPT_PC_TO_PREFIX /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
configure_file(${PROJECT_SOURCE_DIR}/cmake/dptrain.pc.in ${PROJECT_BINARY_DIR}/dptrain.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/dptrain.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT library)

# cpack -G DEB: one package, dptrain, with the CLI, the libraries, the headers and the
# CMake and pkg-config files; its Depends come from the libraries it links.
set(CPACK_PACKAGE_NAME dptrain)
set(CPACK_PACKAGE_VENDOR "dptrain")
set(CPACK_PACKAGE_CONTACT "dptrain developers <dptrain@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}: the dptrain CLI and C++ library")
# The CUDA libraries come from NVIDIA's toolkit, not from Debian packages, so Depends cannot
# name them: the description says so.
if(DPT_WITH_CUDA)
  set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
      "${CPACK_PACKAGE_DESCRIPTION_SUMMARY}\n Built with the CUDA backend: needs the CUDA toolkit's libraries (cudart, cuBLAS,\n cuDNN, NCCL; /usr/local/cuda) where it runs. Build with -DDPT_CUDA=OFF for a package without.")
endif()
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# dpkg-shlibdeps must find the package's own libraries while it reads the CLI and them.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${PROJECT_BINARY_DIR})
set(CPACK_DEBIAN_COMPRESSION_TYPE gzip)  # quicker to build than xz, for the test that builds it
set(CPACK_STRIP_FILES ON)
include(CPack)
