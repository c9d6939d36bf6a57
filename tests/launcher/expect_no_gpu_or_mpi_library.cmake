# ctest helper: PROGRAM must need no CUDA, cuDNN, cuBLAS, NCCL, MPI or protobuf shared library
# (`ldd PROGRAM`), so that it starts on a login node without them. Fails naming each one found.
execute_process(COMMAND ldd ${PROGRAM} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "ldd ${PROGRAM} failed (${rc}):\n${out}${err}")
endif()
string(REPLACE "\n" ";" lines "${out}")
set(found "")
foreach(line IN LISTS lines)
  # libcuda, libcudart, libcublas(Lt), libcudnn*, libnccl, libmpi*, libopen-rte/pal, libprotobuf*.
  if(line MATCHES "lib(cuda|cudart|cublas|cublasLt|cudnn[a-z_]*|nccl|mpi[a-z_+]*|open-[a-z]+|protobuf[a-z-]*)\\.so")
    string(STRIP "${line}" line)
    string(APPEND found "  ${line}\n")
  endif()
endforeach()
if(found)
  message(FATAL_ERROR "${PROGRAM} needs GPU, MPI or protobuf libraries:\n${found}")
endif()
message(STATUS "${PROGRAM} needs no GPU, MPI or protobuf library:\n${out}")
