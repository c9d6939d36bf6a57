# Finds every dependency with CMake's own modules (or the package's own config) and prints what
# was found. Each dependency becomes a dtrain::<name> target that the libraries link.

set(_dtrain_found "")
macro(dtrain_report name detail)
  list(APPEND _dtrain_found "  ${name}: ${detail}")
endmacro()

# --- MPI (Open MPI) -------------------------------------------------------------------------
find_package(MPI REQUIRED COMPONENTS C)
dtrain_report("MPI" "MPI ${MPI_C_VERSION}, ${MPI_C_LIB_NAMES}, launcher ${MPIEXEC_EXECUTABLE}")

# --- Protocol Buffers: protoc generates code during the build ------------------------------
set(Protobuf_USE_STATIC_LIBS ${DTRAIN_STATIC_DEPS})
find_package(Protobuf REQUIRED)
dtrain_report("Protobuf" "${Protobuf_VERSION}, protoc ${Protobuf_PROTOC_EXECUTABLE}, ${Protobuf_LIBRARY}")

# --- Boost.Program_options -------------------------------------------------------------------
set(Boost_USE_STATIC_LIBS ${DTRAIN_STATIC_DEPS})
find_package(Boost 1.74 REQUIRED COMPONENTS program_options)
get_target_property(_po_location Boost::program_options LOCATION)
dtrain_report("Boost.Program_options" "${Boost_VERSION} (${_po_location})")

# --- GoogleTest ------------------------------------------------------------------------------
find_package(GTest REQUIRED)
dtrain_report("GoogleTest" "${GTest_VERSION}")

# --- OpenBLAS (CPU sgemm for im2col convolutions) --------------------------------------------
set(BLA_VENDOR OpenBLAS)
# Static for the GPU machines, which lack libopenblas (it needs libgfortran, also linked statically).
set(BLA_STATIC ${DTRAIN_STATIC_DEPS})
find_package(BLAS REQUIRED)
find_path(DTRAIN_CBLAS_INCLUDE_DIR cblas.h
  PATH_SUFFIXES openblas-pthread openblas x86_64-linux-gnu/openblas-pthread x86_64-linux-gnu)
if(NOT DTRAIN_CBLAS_INCLUDE_DIR)
  message(FATAL_ERROR "OpenBLAS found (${BLAS_LIBRARIES}) but cblas.h was not: install libopenblas-dev")
endif()
add_library(dtrain_blas INTERFACE)
add_library(dtrain::blas ALIAS dtrain_blas)
target_link_libraries(dtrain_blas INTERFACE ${BLAS_LIBRARIES})
if(DTRAIN_STATIC_DEPS)
  find_package(Threads REQUIRED)
  find_library(DTRAIN_GFORTRAN_STATIC NAMES libgfortran.a HINTS ${CMAKE_CXX_IMPLICIT_LINK_DIRECTORIES})
  find_library(DTRAIN_QUADMATH_STATIC NAMES libquadmath.a HINTS ${CMAKE_CXX_IMPLICIT_LINK_DIRECTORIES})
  if(NOT DTRAIN_GFORTRAN_STATIC OR NOT DTRAIN_QUADMATH_STATIC)
    message(FATAL_ERROR "DTRAIN_STATIC_DEPS links OpenBLAS statically and needs libgfortran.a and libquadmath.a (gfortran)")
  endif()
  target_link_libraries(dtrain_blas INTERFACE ${DTRAIN_GFORTRAN_STATIC} ${DTRAIN_QUADMATH_STATIC} Threads::Threads)
endif()
target_include_directories(dtrain_blas SYSTEM INTERFACE ${DTRAIN_CBLAS_INCLUDE_DIR})
dtrain_report("OpenBLAS" "${BLAS_LIBRARIES} (cblas.h in ${DTRAIN_CBLAS_INCLUDE_DIR})")

# --- libjpeg-turbo (its own CMake config) ------------------------------------------------------
find_package(libjpeg-turbo REQUIRED CONFIG)
add_library(dtrain_jpeg INTERFACE)
add_library(dtrain::jpeg ALIAS dtrain_jpeg)
# TurboJPEG for headers and encoding, the libjpeg API for region decoding: the static TurboJPEG
# archive holds the whole codec, the shared one exports only the tj* functions.
if(DTRAIN_STATIC_DEPS)
  target_link_libraries(dtrain_jpeg INTERFACE libjpeg-turbo::turbojpeg-static)
  dtrain_report("libjpeg-turbo" "${libjpeg-turbo_VERSION} (static turbojpeg, with the libjpeg API)")
else()
  target_link_libraries(dtrain_jpeg INTERFACE libjpeg-turbo::turbojpeg libjpeg-turbo::jpeg)
  dtrain_report("libjpeg-turbo" "${libjpeg-turbo_VERSION} (shared turbojpeg and jpeg)")
endif()

# --- zlib (gzip-compressed idx datasets) ----------------------------------------------------
find_package(ZLIB REQUIRED)
dtrain_report("zlib" "${ZLIB_VERSION_STRING} (${ZLIB_LIBRARIES})")

# --- CUDA Toolkit, cuDNN and NCCL under /usr/local/cuda ------------------------------------
set(DTRAIN_WITH_CUDA OFF)
if(NOT DTRAIN_CUDA STREQUAL "OFF")
  if(NOT DEFINED CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  set(_cuda_missing "")
  if(NOT CMAKE_CUDA_COMPILER)
    list(APPEND _cuda_missing "nvcc")
  else()
    get_filename_component(_cuda_root "${CMAKE_CUDA_COMPILER}" DIRECTORY)
    get_filename_component(_cuda_root "${_cuda_root}" DIRECTORY)
    set(CUDAToolkit_ROOT "${_cuda_root}")
    find_package(CUDAToolkit)
    if(NOT CUDAToolkit_FOUND)
      list(APPEND _cuda_missing "CUDA Toolkit")
    endif()
  endif()
  find_path(DTRAIN_CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
  find_library(DTRAIN_CUDNN_LIBRARY cudnn HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64)
  find_path(DTRAIN_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
  find_library(DTRAIN_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64)
  if(NOT DTRAIN_CUDNN_INCLUDE_DIR OR NOT DTRAIN_CUDNN_LIBRARY)
    list(APPEND _cuda_missing "cuDNN")
  endif()
  if(NOT DTRAIN_NCCL_INCLUDE_DIR OR NOT DTRAIN_NCCL_LIBRARY)
    list(APPEND _cuda_missing "NCCL")
  endif()

  if(_cuda_missing STREQUAL "")
    enable_language(CUDA)
    set(DTRAIN_WITH_CUDA ON)
    add_library(dtrain_cuda_deps INTERFACE)
    add_library(dtrain::cuda ALIAS dtrain_cuda_deps)
    target_include_directories(dtrain_cuda_deps SYSTEM INTERFACE
      ${CUDAToolkit_INCLUDE_DIRS} ${DTRAIN_CUDNN_INCLUDE_DIR} ${DTRAIN_NCCL_INCLUDE_DIR})
    # cudart is linked statically so build/bin needs only the driver, NCCL and cuDNN at run time.
    target_link_libraries(dtrain_cuda_deps INTERFACE
      CUDA::cudart_static CUDA::cublas CUDA::cublasLt ${DTRAIN_CUDNN_LIBRARY} ${DTRAIN_NCCL_LIBRARY})
    target_compile_definitions(dtrain_cuda_deps INTERFACE DTRAIN_WITH_CUDA=1)
    dtrain_report("CUDA" "nvcc ${CMAKE_CUDA_COMPILER_VERSION}, architectures ${CMAKE_CUDA_ARCHITECTURES}")
    dtrain_report("cuDNN" "${DTRAIN_CUDNN_LIBRARY}")
    dtrain_report("NCCL" "${DTRAIN_NCCL_LIBRARY}")
  elseif(DTRAIN_CUDA STREQUAL "ON")
    message(FATAL_ERROR "DTRAIN_CUDA=ON but these were not found: ${_cuda_missing} "
                        "(looked under /usr/local/cuda; set CMAKE_CUDA_COMPILER or CUDAToolkit_ROOT)")
  else()
    dtrain_report("CUDA" "off (not found: ${_cuda_missing})")
  endif()
else()
  dtrain_report("CUDA" "off (DTRAIN_CUDA=OFF)")
endif()

list(JOIN _dtrain_found "\n" _dtrain_found_text)
message(STATUS "dtrain dependencies (DTRAIN_CUDA=${DTRAIN_CUDA}, DTRAIN_STATIC_DEPS=${DTRAIN_STATIC_DEPS}):\n${_dtrain_found_text}")
