#pragma once
// What the C entry points share: the one Engine of the process, this thread's error text, and the
// wrapper that turns every failure into a status code and a text, so nothing throws across the
// C boundary.
#include <exception>
#include <memory>
#include <string>

#include "include/dtrain/dtrain.h"
#include "library/engine.h"

namespace dtrain::library {

// The running engine; AbiError(DTRAIN_ERR_NOT_INITIALIZED) before dtrain_init or after shutdown.
std::shared_ptr<Engine> running_engine();

// Records "<function>: <text>" as this thread's last error and returns `status`.
int fail(int status, const char* function, const std::string& text);

// Runs `body` (returning a dtrain_status); any exception becomes a status and this thread's text.
template <typename Body>
int guarded(const char* function, Body&& body) noexcept {
  try {
    return body();
  } catch (const std::exception& e) {
    return fail(status_of_exception(e), function, e.what());
  } catch (...) {
    return fail(DTRAIN_ERR_INTERNAL, function, "unknown exception");
  }
}

}  // namespace dtrain::library
