#pragma once
// Typed errors and the check macros that throw them.
//
// Every dtrain failure is an Error whose text names what failed, the library's own error text,
// our file:line, and the host, world rank and local rank it happened on, so one line in a
// thousand-rank job says where to look. The top-level handler (main_guard.h) logs it once and
// aborts the whole job.
//
//   DTRAIN_CHECK(count >= 0) << "count " << count << " is negative";      // Error (a bug or bad state)
//   DTRAIN_USAGE_CHECK(k > 0) << "DTRAIN_RANKS_PER_NODE must be positive";  // UsageError (user input)
//   DTRAIN_MPI_CHECK(MPI_Barrier(comm));                                    // MpiError
//   DTRAIN_CUDA_CHECK(...), DTRAIN_CUDNN_CHECK, DTRAIN_CUBLAS_CHECK, DTRAIN_NCCL_CHECK: cuda/cuda_check.h
#include <sstream>
#include <stdexcept>
#include <string>

namespace dtrain::runtime {

// Who reported the failure. It picks the exception type and is printed in every message.
enum class ErrorKind { kCondition, kUsage, kMpi, kCuda, kCudnn, kCublas, kNccl };

const char* error_kind_name(ErrorKind kind);

class Error : public std::runtime_error {
 public:
  // what_failed: the check or call (e.g. "MPI_Allreduce(...)"); library_message: the library's
  // own text for the error code, empty for plain conditions; detail: what the caller streamed in.
  Error(ErrorKind kind, const std::string& what_failed, const std::string& library_message, const std::string& detail,
        const char* file, int line);

  ErrorKind kind() const { return kind_; }
  const std::string& library_message() const { return library_message_; }
  const std::string& detail() const { return detail_; }
  const char* file() const { return file_; }
  int line() const { return line_; }
  const std::string& host() const { return host_; }
  int world_rank() const { return world_rank_; }
  int local_rank() const { return local_rank_; }

 private:
  ErrorKind kind_;
  std::string library_message_;
  std::string detail_;
  const char* file_;
  int line_;
  std::string host_;
  int world_rank_;
  int local_rank_;
};

// Bad flags, environment, configuration or data. The top-level handler prints it on the rank that
// found it (before MPI starts, on rank 0 and each node's first rank only) and exits with status 2.
class UsageError : public Error {
  using Error::Error;
};
// A usage error that another rank prints (collective_usage_check.h); the top-level handler ends
// this rank with status 2 without printing it. Still a UsageError: tests that expect a UsageError
// on every rank see one. Declared here, not beside collective_usage_check, because the handler
// (top_level_handler.cc) catches it and must build without MPI.
class UsageReportedElsewhere : public UsageError {
  using UsageError::UsageError;
};
class MpiError : public Error {
  using Error::Error;
};
class CudaError : public Error {
  using Error::Error;
};
class CudnnError : public Error {
  using Error::Error;
};
class CublasError : public Error {
  using Error::Error;
};
class NcclError : public Error {
  using Error::Error;
};

namespace detail {

// Collects the streamed message; ErrorThrower turns it into the typed exception.
class ErrorStream {
 public:
  ErrorStream(ErrorKind kind, const char* what_failed, std::string library_message, const char* file, int line)
      : kind_(kind),
        what_failed_(what_failed),
        library_message_(std::move(library_message)),
        file_(file),
        line_(line) {}

  template <typename T>
  ErrorStream& operator<<(const T& value) {
    detail_ << value;
    return *this;
  }

  [[noreturn]] void raise() const;

 private:
  ErrorKind kind_;
  const char* what_failed_;
  std::string library_message_;
  std::ostringstream detail_;
  const char* file_;
  int line_;
};

// `Thrower() & stream << ...`: & binds looser than <<, so the whole message is built first.
struct ErrorThrower {
  [[noreturn]] void operator&(const ErrorStream& stream) const { stream.raise(); }
};

}  // namespace detail
}  // namespace dtrain::runtime

#define DTRAIN_ERROR_STREAM_(kind, what, library_message) \
  ::dtrain::runtime::detail::ErrorThrower() &             \
      ::dtrain::runtime::detail::ErrorStream((kind), (what), (library_message), __FILE__, __LINE__)

// The `for` form has no `else`, so the macros are safe inside unbraced if/else, and its body
// throws, so it runs at most once.
#define DTRAIN_CHECK(cond) \
  for (; !(cond);) DTRAIN_ERROR_STREAM_(::dtrain::runtime::ErrorKind::kCondition, "check failed: " #cond, "")

#define DTRAIN_USAGE_CHECK(cond) \
  for (; !(cond);) DTRAIN_ERROR_STREAM_(::dtrain::runtime::ErrorKind::kUsage, "invalid input", "")

// Throws unconditionally: `DTRAIN_FAIL() << "unreachable dtype " << d;`
#define DTRAIN_FAIL() DTRAIN_ERROR_STREAM_(::dtrain::runtime::ErrorKind::kCondition, "failure", "")
#define DTRAIN_USAGE_FAIL() DTRAIN_ERROR_STREAM_(::dtrain::runtime::ErrorKind::kUsage, "invalid input", "")
