#include "library/element_types.h"

namespace dtrain::library {
namespace {

struct TypeInfo {
  const char* label;
  size_t size;
  bool floating;
};

constexpr TypeInfo kTypes[] = {
    {"uint8", 1, false},  {"int8", 1, false},    {"int32", 4, false},  {"int64", 8, false},
    {"float16", 2, true}, {"bfloat16", 2, true}, {"float32", 4, true}, {"float64", 8, true},
};
constexpr const char* kOps[] = {"sum", "average", "min", "max"};

}  // namespace

bool valid_dtype(int dtype) {
  return dtype >= DTRAIN_UINT8 && dtype <= DTRAIN_FLOAT64;
}
bool valid_op(int op) {
  return op >= DTRAIN_SUM && op <= DTRAIN_MAX;
}
size_t element_size(int dtype) {
  return valid_dtype(dtype) ? kTypes[dtype].size : 0;
}
const char* dtype_label(int dtype) {
  return valid_dtype(dtype) ? kTypes[dtype].label : "?";
}
const char* op_label(int op) {
  return valid_op(op) ? kOps[op] : "?";
}
bool is_floating(int dtype) {
  return valid_dtype(dtype) && kTypes[dtype].floating;
}

std::optional<runtime::DType> communicator_dtype(int dtype) {
  switch (dtype) {
    case DTRAIN_FLOAT32: return runtime::DType::kF32;
    case DTRAIN_FLOAT16: return runtime::DType::kF16;
    case DTRAIN_BFLOAT16: return runtime::DType::kBF16;
    default: return std::nullopt;
  }
}

bool communicator_reduces(int dtype, int op) {
  return communicator_dtype(dtype).has_value() && (op == DTRAIN_SUM || op == DTRAIN_AVERAGE);
}

MPI_Datatype mpi_type(int dtype) {
  switch (dtype) {
    case DTRAIN_UINT8: return MPI_UINT8_T;
    case DTRAIN_INT8: return MPI_INT8_T;
    case DTRAIN_INT32: return MPI_INT32_T;
    case DTRAIN_INT64: return MPI_INT64_T;
    case DTRAIN_FLOAT32: return MPI_FLOAT;
    case DTRAIN_FLOAT64: return MPI_DOUBLE;
    default: return MPI_DATATYPE_NULL;
  }
}

MPI_Op mpi_op(int op) {
  switch (op) {
    case DTRAIN_MIN: return MPI_MIN;
    case DTRAIN_MAX: return MPI_MAX;
    default: return MPI_SUM;
  }
}

}  // namespace dtrain::library
