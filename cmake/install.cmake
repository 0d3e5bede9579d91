# cmake --install: headers, libraries and a CMake package so another project can do
#   find_package(memonger REQUIRED)
#   target_link_libraries(app PRIVATE memonger::memonger)
include(CMakePackageConfigHelpers)

set(memonger_export_targets memonger_proto memonger_util memonger_graph memonger_workloads
  memonger_plan memonger_sharing memonger_offsets memonger_core memonger_kernels memonger_report
  memonger_allocator memonger_all)
install(TARGETS ${memonger_export_targets}
  EXPORT memongerTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS optimize-net RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

foreach(dir util graph workloads memonger kernels report allocator)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${dir}/
    DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/memonger/${dir}
    FILES_MATCHING PATTERN "*.h"
    # Folder-internal headers (tools/check_layering.py keeps them in their folder).
    PATTERN "*_internal.h" EXCLUDE)
endforeach()
install(FILES ${PROJECT_BINARY_DIR}/proto/memonger.pb.h ${PROJECT_SOURCE_DIR}/proto/memonger.proto
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/memonger/proto)

set(memonger_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/memonger)
install(EXPORT memongerTargets NAMESPACE memonger:: DESTINATION ${memonger_cmake_dir})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/memongerConfig.cmake.in
  ${PROJECT_BINARY_DIR}/memongerConfig.cmake
  INSTALL_DESTINATION ${memonger_cmake_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/memongerConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/memongerConfig.cmake
  ${PROJECT_BINARY_DIR}/memongerConfigVersion.cmake
  DESTINATION ${memonger_cmake_dir})
