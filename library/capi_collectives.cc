// The C ABI's collectives (include/dtrain/dtrain.h): every argument checked here, on the caller's
// thread, so a bad one is an error naming it on this rank alone; what only the ranks together can
// judge (counts, roots, dtypes of one name) is compared by rank 0 (library/request.h's mismatch).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <sstream>

#include "library/abi_support.h"
#include "library/device.h"
#include "library/element_types.h"

namespace dtrain::library {
namespace {

constexpr size_t kMaxNameBytes = 4096;

[[noreturn]] void bad(const std::string& text) {
  throw AbiError(DTRAIN_ERR_INVALID_ARGUMENT, text);
}

std::string address(const void* p) {
  std::ostringstream text;
  text << p;
  return text.str();
}

// Checks what every call shares and fills those fields of the request.
Request checked_request(const char* name, OpKind kind, int64_t count, int dtype, int device, const Engine& engine) {
  if (name == nullptr) bad("name: NULL");
  const size_t length = std::strlen(name);
  if (length == 0 || length > kMaxNameBytes) bad("name: must have 1 to 4096 bytes, has " + std::to_string(length));
  if (count < 0) bad("count: " + std::to_string(count) + " is negative");
  if (!valid_dtype(dtype)) bad("dtype: " + std::to_string(dtype) + " is not a dtrain_dtype (0..7)");
  if (device != DTRAIN_HOST && device != DTRAIN_CUDA)
    bad("device: " + std::to_string(device) + " is neither DTRAIN_HOST (0) nor DTRAIN_CUDA (1)");
  if (device == DTRAIN_CUDA && !engine.device_problem().empty())
    throw AbiError(DTRAIN_ERR_UNSUPPORTED, engine.device_problem());
  Request request;
  request.name = name;
  request.kind = kind;
  request.count = count;
  request.dtype = static_cast<uint8_t>(dtype);
  request.device = static_cast<uint8_t>(device);
  return request;
}

// A buffer of `elements` elements of the operation's dtype and device: NULL only when empty,
// aligned to its element size, in the memory `device` says (checked where CUDA can tell cheaply:
// device buffers always, host buffers once this rank has used device buffers).
void check_buffer(const char* argument, const void* p, int64_t elements, const Request& request, Engine& engine) {
  const int dtype = request.dtype;
  if (p == nullptr) {
    if (elements > 0) bad(std::string(argument) + ": NULL for " + std::to_string(elements) + " elements");
    return;
  }
  const size_t size = element_size(dtype);
  if (reinterpret_cast<uintptr_t>(p) % size != 0)
    bad(std::string(argument) + ": " + address(p) + " is not aligned to the " + std::to_string(size) +
        "-byte elements of " + dtype_label(dtype));
  const bool device = request.device == DTRAIN_CUDA;
  if (elements > 0 && (device || engine.device_in_use())) check_buffer_location(argument, p, device, engine.gpu());
}

void check_op(int op, int dtype) {
  if (!valid_op(op)) bad("op: " + std::to_string(op) + " is not a dtrain_op (0..3)");
  if (op == DTRAIN_AVERAGE && !is_floating(dtype))
    bad(std::string("op: average needs a floating-point dtype, not ") + dtype_label(dtype) + " (sum, then divide)");
}

void check_scale(const char* argument, double factor, int dtype) {
  if (!std::isfinite(factor)) bad(std::string(argument) + ": not a finite number");
  if (factor != 1.0 && !is_floating(dtype))
    bad(std::string(argument) + ": " + std::to_string(factor) + " on " + dtype_label(dtype) +
        " (scale factors apply to floating-point dtypes only; pass 1.0)");
}

int64_t times_world(int64_t count, int size, const char* what) {
  if (count > INT64_MAX / size) bad(std::string(what) + ": count x size overflows");
  return count * size;
}

// A device operation's data is ready where the caller's `stream` has reached at submission.
template <typename Fill>
int submit_call(const char* function, void* stream, dtrain_handle* handle, Fill fill) {
  return guarded(function, [&] {
    if (handle == nullptr) bad("handle: NULL");
    *handle = 0;
    auto engine = running_engine();
    Operation op = fill(*engine);
    if (op.request.device == DTRAIN_CUDA) {
      op.ready = StreamEvent::record_on(stream, engine->gpu());
      engine->note_device_use();
    }
    *handle = engine->submit(std::move(op));
    return DTRAIN_OK;
  });
}

}  // namespace
}  // namespace dtrain::library

using namespace dtrain::library;  // NOLINT: the C functions below are thin

extern "C" {

int dtrain_allreduce(const char* name, const void* send, void* recv, int64_t count, int dtype, int op, double prescale,
                     double postscale, int device, void* stream, dtrain_handle* handle) {
  return submit_call("dtrain_allreduce", stream, handle, [&](Engine& engine) {
    Operation o{checked_request(name, OpKind::kAllReduce, count, dtype, device, engine), send, recv, nullptr, {}};
    check_op(op, dtype);
    check_scale("prescale", prescale, dtype);
    check_scale("postscale", postscale, dtype);
    check_buffer("send", send, count, o.request, engine);
    check_buffer("recv", recv, count, o.request, engine);
    o.request.op = static_cast<uint8_t>(op);
    o.request.prescale = prescale;
    o.request.postscale = postscale;
    return o;
  });
}

int dtrain_broadcast(const char* name, void* buffer, int64_t count, int dtype, int root, int device, void* stream,
                     dtrain_handle* handle) {
  return submit_call("dtrain_broadcast", stream, handle, [&](Engine& engine) {
    Operation o{checked_request(name, OpKind::kBroadcast, count, dtype, device, engine), buffer, buffer, nullptr, {}};
    check_buffer("buffer", buffer, count, o.request, engine);
    const int size = engine.topology().world_size;
    if (root < 0 || root >= size)
      bad("root: " + std::to_string(root) + " is not a rank of 0.." + std::to_string(size - 1));
    o.request.root = root;
    return o;
  });
}

int dtrain_allgather(const char* name, const void* send, int64_t count, void* recv, int64_t recv_capacity,
                     int64_t* recv_counts, int dtype, int device, void* stream, dtrain_handle* handle) {
  return submit_call("dtrain_allgather", stream, handle, [&](Engine& engine) {
    Operation o{checked_request(name, OpKind::kAllGather, count, dtype, device, engine), send, recv, recv_counts, {}};
    if (recv_capacity < count)
      bad("recv_capacity: " + std::to_string(recv_capacity) + " is below this rank's own count " +
          std::to_string(count));
    check_buffer("send", send, count, o.request, engine);
    check_buffer("recv", recv, recv_capacity, o.request, engine);
    o.request.recv_capacity = recv_capacity;
    return o;
  });
}

int dtrain_reducescatter(const char* name, const void* send, void* recv, int64_t count, int dtype, int op, int device,
                         void* stream, dtrain_handle* handle) {
  return submit_call("dtrain_reducescatter", stream, handle, [&](Engine& engine) {
    Operation o{checked_request(name, OpKind::kReduceScatter, count, dtype, device, engine), send, recv, nullptr, {}};
    check_op(op, dtype);
    check_buffer("send", send, times_world(count, engine.topology().world_size, "count"), o.request, engine);
    check_buffer("recv", recv, count, o.request, engine);
    o.request.op = static_cast<uint8_t>(op);
    return o;
  });
}

int dtrain_alltoall(const char* name, const void* send, void* recv, int64_t count, int dtype, int device, void* stream,
                    dtrain_handle* handle) {
  return submit_call("dtrain_alltoall", stream, handle, [&](Engine& engine) {
    Operation o{checked_request(name, OpKind::kAllToAll, count, dtype, device, engine), send, recv, nullptr, {}};
    const int64_t total = times_world(count, engine.topology().world_size, "count");
    check_buffer("send", send, total, o.request, engine);
    check_buffer("recv", recv, total, o.request, engine);
    if (send == recv && total > 0) bad("recv: the same buffer as send; alltoall works out of place only");
    return o;
  });
}

int dtrain_barrier(const char* name, dtrain_handle* handle) {
  return submit_call("dtrain_barrier", nullptr, handle, [&](Engine& engine) {
    return Operation{
        checked_request(name, OpKind::kBarrier, 0, DTRAIN_UINT8, DTRAIN_HOST, engine), nullptr, nullptr, nullptr, {}};
  });
}

}  // extern "C"
