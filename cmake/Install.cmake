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

# The Python package dtrain (python/dtrain: dtrain.torch, Horovod's PyTorch API) under
# <prefix>/lib/python: `PYTHONPATH=<prefix>/lib/python python3 -c "import dtrain.torch"`. It finds
# the prefix's libdtrain.so through _install_location.py, a path relative to itself.
set(DTRAIN_INSTALL_PYTHONDIR ${CMAKE_INSTALL_LIBDIR}/python CACHE STRING
    "where cmake --install puts the Python package dtrain, relative to the prefix")
install(DIRECTORY ${PROJECT_SOURCE_DIR}/python/dtrain DESTINATION ${DTRAIN_INSTALL_PYTHONDIR}
        FILES_MATCHING PATTERN "*.py" PATTERN "__pycache__" EXCLUDE PATTERN "_lib" EXCLUDE)
file(RELATIVE_PATH _dtrain_library_from_package /prefix/${DTRAIN_INSTALL_PYTHONDIR}/dtrain
     /prefix/${CMAKE_INSTALL_LIBDIR})
file(WRITE ${PROJECT_BINARY_DIR}/package/_install_location.py
     "\"\"\"Written by cmake --install: libdtrain.so's directory, relative to this package.\"\"\"\n"
     "LIBRARY_DIR = \"${_dtrain_library_from_package}\"\n")
install(FILES ${PROJECT_BINARY_DIR}/package/_install_location.py DESTINATION ${DTRAIN_INSTALL_PYTHONDIR}/dtrain)
