# DTRAIN_* options. Bad values stop the configure step with a message naming the option.

set(DTRAIN_CUDA "AUTO" CACHE STRING "Build the CUDA backend: AUTO (when nvcc, cuDNN and NCCL are found), ON or OFF")
set_property(CACHE DTRAIN_CUDA PROPERTY STRINGS AUTO ON OFF)
string(TOUPPER "${DTRAIN_CUDA}" DTRAIN_CUDA)
if(NOT DTRAIN_CUDA MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "DTRAIN_CUDA must be AUTO, ON or OFF, got '${DTRAIN_CUDA}'")
endif()

option(DTRAIN_STATIC_DEPS
  "Link Boost.Program_options, protobuf and libjpeg-turbo statically, so build/bin runs on hosts without their -dev packages"
  ON)

# Hopper (H100/H200) by default; override with -DCMAKE_CUDA_ARCHITECTURES=80;90 etc.
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES 90)
endif()
