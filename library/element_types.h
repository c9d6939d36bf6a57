#pragma once
// The ABI's element types and reduction ops (dtrain_dtype, dtrain_op in include/dtrain/dtrain.h):
// their sizes, names and MPI counterparts, in one table.
#include <mpi.h>

#include <cstddef>
#include <optional>

#include "include/dtrain/dtrain.h"
#include "runtime/memory/dtype.h"

namespace dtrain::library {

bool valid_dtype(int dtype);
bool valid_op(int op);
size_t element_size(int dtype);      // 0 for an invalid dtype
const char* dtype_label(int dtype);  // "float32"; "?" when invalid
const char* op_label(int op);        // "sum"; "?" when invalid
bool is_floating(int dtype);         // fp16, bf16, fp32, fp64

// The communicator's type for fp32, fp16, bf16 (what comm/ reduces); nullopt for the others.
std::optional<runtime::DType> communicator_dtype(int dtype);
// The Communicator adds and averages fp32, fp16 and bf16; everything else goes to MPI.
bool communicator_reduces(int dtype, int op);
// MPI's type for the dtypes MPI reduces natively (all but fp16 and bf16); MPI_DATATYPE_NULL else.
MPI_Datatype mpi_type(int dtype);
MPI_Op mpi_op(int op);  // MPI_SUM for average: the division comes after

}  // namespace dtrain::library
