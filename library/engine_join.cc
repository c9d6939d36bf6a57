// The engine's side of join (library/coordinator.h says what join means): the join's completion,
// and the zero all-reduces a joined rank runs for the names the other ranks still submit.
#include "include/dtrain/dtrain.h"
#include "library/element_types.h"
#include "library/engine.h"

namespace dtrain::library {

bool Engine::finish_join(const Response& response) {
  if (response.type != ResponseType::kRun || response.names.size() != 1) return false;
  auto it = local_.find(response.names.front());
  if (it == local_.end() || it->second.request.kind != OpKind::kJoin) return false;
  // recv is the caller's int for the rank that joined last.
  if (it->second.recv != nullptr && !response.counts.empty())
    *static_cast<int*>(it->second.recv) = static_cast<int>(response.counts.front());
  finish(it->second, DTRAIN_OK, "");
  local_.erase(it);
  return true;
}

void Engine::adopt_stand_ins(const Response& response) {
  for (const Request& request : response.stand_ins) {
    if (local_.count(request.name) != 0) continue;  // this rank submitted it: not a stand-in here
    const size_t bytes = static_cast<size_t>(request.count) * element_size(request.dtype);
    std::vector<double>& zeros = stand_in_zeros_[request.name];
    zeros.assign((bytes + sizeof(double) - 1) / sizeof(double), 0.0);
    // Nobody waits for this completion; the operation exists so the executor runs it with the rest.
    local_.emplace(request.name,
                   Operation{request, zeros.data(), zeros.data(), nullptr, std::make_shared<Completion>()});
  }
}

}  // namespace dtrain::library
