#include "runtime/base/error.h"

#include "runtime/base/process_identity.h"

namespace dtrain::runtime {

const char* error_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kCondition: return "dtrain";
    case ErrorKind::kUsage: return "usage";
    case ErrorKind::kMpi: return "MPI";
    case ErrorKind::kCuda: return "CUDA";
    case ErrorKind::kCudnn: return "cuDNN";
    case ErrorKind::kCublas: return "cuBLAS";
    case ErrorKind::kNccl: return "NCCL";
  }
  return "unknown";
}

namespace {

// Library texts can hold newlines; an error must stay one greppable line.
std::string one_line(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  while (!text.empty() && text.back() == ' ') text.pop_back();
  return text;
}

std::string compose(ErrorKind kind, const std::string& what_failed, const std::string& library_message,
                    const std::string& detail, const char* file, int line, const ProcessIdentity& id) {
  std::ostringstream out;
  out << "[" << error_kind_name(kind) << "] ";
  if (kind == ErrorKind::kUsage) {
    out << detail;
  } else {
    out << what_failed;
    if (!library_message.empty()) out << ": " << library_message;
    if (!detail.empty()) out << ": " << detail;
  }
  // A usage error speaks to the user: the message names the flag, file or rank; where in our code
  // it was raised is debug output (top_level_handler.cc logs it at DTRAIN_LOG_LEVEL=debug).
  if (kind != ErrorKind::kUsage) {
    out << " (at " << file << ":" << line << ", host " << id.host << ", rank " << id.world_rank << ", local rank "
        << id.local_rank << ")";
  }
  return one_line(out.str());
}

}  // namespace

Error::Error(ErrorKind kind, const std::string& what_failed, const std::string& library_message,
             const std::string& detail, const char* file, int line)
    : std::runtime_error(compose(kind, what_failed, library_message, detail, file, line, process_identity())),
      kind_(kind),
      library_message_(one_line(library_message)),
      detail_(detail),
      file_(file),
      line_(line),
      host_(process_identity().host),
      world_rank_(process_identity().world_rank),
      local_rank_(process_identity().local_rank) {}

namespace detail {

void ErrorStream::raise() const {
  const std::string text = detail_.str();
  switch (kind_) {
    case ErrorKind::kCondition: throw Error(kind_, what_failed_, library_message_, text, file_, line_);
    case ErrorKind::kUsage: throw UsageError(kind_, what_failed_, library_message_, text, file_, line_);
    case ErrorKind::kMpi: throw MpiError(kind_, what_failed_, library_message_, text, file_, line_);
    case ErrorKind::kCuda: throw CudaError(kind_, what_failed_, library_message_, text, file_, line_);
    case ErrorKind::kCudnn: throw CudnnError(kind_, what_failed_, library_message_, text, file_, line_);
    case ErrorKind::kCublas: throw CublasError(kind_, what_failed_, library_message_, text, file_, line_);
    case ErrorKind::kNccl: throw NcclError(kind_, what_failed_, library_message_, text, file_, line_);
  }
  throw Error(kind_, what_failed_, library_message_, text, file_, line_);
}

}  // namespace detail
}  // namespace dtrain::runtime
