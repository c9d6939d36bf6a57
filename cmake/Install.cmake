# cmake --install build --prefix P: the library, its header and CMake package (dtrain::dtrain), and
# the tools. Relocatable: nothing installed names the build tree or P itself; libdtrain.so is found
# from the tools through $ORIGIN, and the package files locate P from their own path.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS dtrain EXPORT dtrain-targets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} NAMELINK_COMPONENT Development
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${PROJECT_SOURCE_DIR}/include/dtrain/dtrain.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/dtrain)
set(_dtrain_package_dir ${CMAKE_INSTALL_LIBDIR}/cmake/dtrain)
install(EXPORT dtrain-targets NAMESPACE dtrain:: DESTINATION ${_dtrain_package_dir})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/dtrain-config.cmake.in
                              ${PROJECT_BINARY_DIR}/package/dtrain-config.cmake INSTALL_DESTINATION ${_dtrain_package_dir})
# 0.x releases promise nothing across minor versions; the ABI number is checked at run time too.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/package/dtrain-config-version.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/package/dtrain-config.cmake ${PROJECT_BINARY_DIR}/package/dtrain-config-version.cmake
        DESTINATION ${_dtrain_package_dir})

# The tools link the runtime statically. They and the library need only MPI (and CUDA, NCCL, cuDNN
# on GPU builds), found where the build found them (the link path's RPATH, outside the prefix).
set(_dtrain_tools dtrain-run dtrain-info dtrain-train dtrain-export dtrain-bench-allreduce dtrain-bench-data)
if(TARGET dtrain-bench-train)
  list(APPEND _dtrain_tools dtrain-bench-train)
endif()
set_target_properties(${_dtrain_tools} dtrain PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
install(TARGETS ${_dtrain_tools} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
