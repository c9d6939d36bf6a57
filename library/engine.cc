#include "library/engine.h"

#include <sched.h>

#include <sstream>

#include "comm/backends/factory.h"
#include "include/dtrain/dtrain.h"
#include "library/element_types.h"
#include "runtime/base/env.h"
#include "runtime/base/error.h"
#include "runtime/base/log.h"
#include "runtime/base/process_identity.h"
#include "runtime/io/json.h"
#include "runtime/mpi/mpi_check.h"
#include "runtime/rank/gpu_binding.h"

namespace dtrain::library {
namespace {

constexpr int64_t kDefaultFusionThreshold = int64_t{64} << 20;
// Measured with dtrain-bench-library (4-byte calls one after another on 2 and 4 ranks): long enough
// for a caller to submit its next operation, short against the cycle time.
constexpr std::chrono::microseconds kPollAfterWork{100};

void require_thread_multiple(int level) {
  if (level >= MPI_THREAD_MULTIPLE) return;
  throw AbiError(DTRAIN_ERR_MPI, std::string("dtrain needs MPI_THREAD_MULTIPLE (its background thread calls MPI "
                                             "beside yours), but MPI was initialized with ") +
                                     runtime::mpi_thread_level_name(level) +
                                     ": initialize MPI with MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...) (mpi4py: "
                                     "mpi4py.rc.thread_level = 'multiple' before importing MPI), or let dtrain_init "
                                     "initialize it");
}

}  // namespace

int status_of_exception(const std::exception& e) {
  if (const auto* abi = dynamic_cast<const AbiError*>(&e)) return abi->status();
  if (dynamic_cast<const runtime::UsageError*>(&e)) return DTRAIN_ERR_INVALID_ARGUMENT;
  if (dynamic_cast<const runtime::MpiError*>(&e)) return DTRAIN_ERR_MPI;
  return DTRAIN_ERR_INTERNAL;
}

Engine::Engine(MPI_Comm world) {
  // Settings first: a malformed variable is then an error before MPI has been touched.
  const int64_t threshold =
      runtime::env_int("DTRAIN_FUSION_THRESHOLD", 0, int64_t{1} << 40).value_or(kDefaultFusionThreshold);
  cycle_time_ = std::chrono::microseconds(runtime::env_int("DTRAIN_CYCLE_TIME_US", 1, 1000000).value_or(1000));
  if (const auto gpu_backend = runtime::env_string("DTRAIN_GPU_BACKEND"))
    gpu_backend_ = comm::parse_backend(*gpu_backend, "DTRAIN_GPU_BACKEND");
  mpi_.emplace(nullptr, nullptr);
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);  // what MPI granted, whether this scope or the caller started it
  require_thread_multiple(level);
  ctx_.emplace(runtime::RankContext::from_environment(world));
  const runtime::Topology& t = ctx_->topology();
  runtime::set_process_identity(t.world_rank, t.world_size, t.local_rank);
  control_ = runtime::MpiComm::duplicate(ctx_->world());
  data_ = runtime::MpiComm::duplicate(ctx_->world());
  control_exchange_ = std::make_unique<ControlExchange>(control_.get(), t.world_rank, t.world_size);
  // Host buffers only so far, so the communicator is the CPU one even on a GPU host.
  communicator_ = comm::make_communicator(comm::Backend::kAuto, *ctx_, /*gpus=*/false);
  // Name matching has already compared every rank's call; the per-call check would only repeat it.
  communicator_->set_consistency_check(false);
  executor_ = std::make_unique<Executor>(data_.get(), *communicator_);
  if (t.world_rank == 0) coordinator_ = std::make_unique<Coordinator>(t.world_size, threshold, timeline_);
  agree_on_gpus();
  thread_ = std::thread([this] { loop(); });
}

// Device buffers need a real GPU on every rank (NCCL and the staged path run on all ranks alike),
// so the ranks agree here, once, and a rank without one is named on every rank.
void Engine::agree_on_gpus() {
  const runtime::Topology& t = ctx_->topology();
  const auto gpus = runtime::visible_gpus();
  gpu_ = gpus.empty() ? -1 : runtime::device_index_for_local_rank(t.host_local_rank, static_cast<int>(gpus.size()));
  const bool real = built_with_cuda() && gpu_ >= 0 && !gpus[static_cast<size_t>(gpu_)].simulated;
  int first_without = real ? t.world_size : t.world_rank;
  DTRAIN_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &first_without, 1, MPI_INT, MPI_MIN, ctx_->world()));
  if (!built_with_cuda()) {
    device_problem_ = "device: DTRAIN_CUDA, but this libdtrain was built without CUDA; pass host buffers";
  } else if (!real) {
    device_problem_ = gpu_ >= 0 ? "device: DTRAIN_CUDA, but this rank has no GPU (only simulated ones)"
                                : "device: DTRAIN_CUDA, but this rank has no GPU";
  } else if (first_without < t.world_size) {
    device_problem_ = "device: DTRAIN_CUDA, but rank " + std::to_string(first_without) +
                      " has no GPU; device buffers need a GPU on every rank";
  }
}

void Engine::start_timeline(const std::string& path) {
  if (ctx_->topology().world_rank == 0) timeline_.start(path);
}

void Engine::stop_timeline() {
  timeline_.stop();
}

Engine::~Engine() {
  if (thread_.joinable()) shutdown();
}

int64_t Engine::submit(Operation op) {
  std::lock_guard lock(mutex_);
  if (!failure_.empty()) throw AbiError(DTRAIN_ERR_MPI, "dtrain's background thread has failed: " + failure_);
  if (stopping_) throw AbiError(DTRAIN_ERR_NOT_INITIALIZED, "dtrain is shutting down");
  op.completion = std::make_shared<Completion>();
  const int64_t handle = next_handle_++;
  handles_.emplace(handle, op.completion);
  // A name that stalled before this rank submitted it fails here, as it did on the other ranks.
  if (auto it = aborted_.find(op.request.name); it != aborted_.end()) {
    op.completion->finish(it->second.status, it->second.error);
    aborted_.erase(it);
    return handle;
  }
  if (!names_.insert(op.request.name).second) {
    handles_.erase(handle);
    throw AbiError(DTRAIN_ERR_INVALID_ARGUMENT, "name: '" + op.request.name +
                                                    "' is already in flight on this rank; wait for it before "
                                                    "submitting the name again");
  }
  queue_.push_back(std::move(op));
  queued_.store(queue_.size(), std::memory_order_release);
  wake_.notify_one();
  return handle;
}

std::shared_ptr<Completion> Engine::find(int64_t handle) {
  std::lock_guard lock(mutex_);
  auto it = handles_.find(handle);
  return it == handles_.end() ? nullptr : it->second;
}

std::shared_ptr<Completion> Engine::release(int64_t handle) {
  std::lock_guard lock(mutex_);
  auto it = handles_.find(handle);
  if (it == handles_.end()) return nullptr;
  auto completion = std::move(it->second);
  handles_.erase(it);
  return completion;
}

void Engine::loop() {
  try {
    while (cycle()) {
    }
  } catch (const std::exception& e) {
    fail_all(status_of_exception(e), e.what());
  }
}

bool Engine::cycle() {
  std::vector<Operation> fresh;
  bool stopping = false;
  // After a cycle with work, poll the queue (yielding the core) a little before sleeping: a caller
  // that waits for one operation and submits the next at once (small tensors one after another)
  // then finds this thread awake, instead of waking it through the scheduler, which on a busy host
  // means waiting for a core. Bounded, and skipped when idle, so an idle library spins nowhere.
  if (busy_) {
    const auto until = std::chrono::steady_clock::now() + kPollAfterWork;
    while (queued_.load(std::memory_order_acquire) == 0 && std::chrono::steady_clock::now() < until) sched_yield();
  }
  {
    std::unique_lock lock(mutex_);
    // A rank that is shutting down still cycles until every rank is, so it waits like the others.
    wake_.wait_for(lock, cycle_time_, [&] { return !queue_.empty(); });
    fresh.swap(queue_);
    queued_.store(0, std::memory_order_relaxed);
    stopping = stopping_;
  }
  std::vector<Request> requests;
  for (Operation& op : fresh) {
    requests.push_back(op.request);
    std::string name = op.request.name;
    local_.emplace(std::move(name), std::move(op));
  }
  const std::vector<Response> responses = exchange(encode_requests(requests, stopping));
  busy_ = !requests.empty() || !responses.empty();
  for (const Response& response : responses) {
    if (response.type == ResponseType::kShutdown) return false;
    // Counted before the handles complete, so a caller's dtrain_fusion_stats after its wait sees them.
    if (response.type == ResponseType::kRun) {
      ++collectives_run_;
      operations_run_ += response.names.size();
    }
    execute(response);
  }
  return true;
}

// Each rank's requests to rank 0, rank 0's responses to every rank.
std::vector<Response> Engine::exchange(const std::vector<char>& requests) {
  const std::vector<char> answer =
      control_exchange_->exchange(requests, [this](const std::vector<std::string_view>& by_rank) {
        for (size_t r = 0; r < by_rank.size(); ++r) {
          bool stopping = false;
          auto decoded = decode_requests(by_rank[r].data(), by_rank[r].size(), &stopping);
          coordinator_->add(static_cast<int>(r), std::move(decoded), stopping);
        }
        return encode_responses(coordinator_->take_responses());
      });
  return decode_responses(answer.data(), answer.size());
}

void Engine::execute(const Response& response) {
  if (response.type == ResponseType::kError) {
    auto it = local_.find(response.names.front());
    if (it != local_.end()) {
      finish(it->second, response.status, response.error);
      local_.erase(it);
    } else if (response.status == DTRAIN_ERR_STALLED) {
      // Not yet submitted here: a later submission fails at once. (Submitted since this cycle's
      // exchange: it is on its way to rank 0, which will judge it anew.)
      std::lock_guard lock(mutex_);
      if (names_.count(response.names.front()) == 0) aborted_[response.names.front()] = response;
    }
    return;
  }
  if (finish_join(response)) return;
  adopt_stand_ins(response);
  std::vector<Operation*> ops;
  for (const std::string& name : response.names) {
    auto it = local_.find(name);
    DTRAIN_CHECK(it != local_.end()) << "rank 0 scheduled '" << name << "', which this rank has not submitted";
    ops.push_back(&it->second);
  }
  const Request& head = ops.front()->request;
  if (timeline_.active()) {
    int64_t bytes = 0;
    for (const Operation* op : ops) bytes += op->request.count * static_cast<int64_t>(element_size(head.dtype));
    const std::string args = runtime::JsonObject()
                                 .integer("fused", static_cast<int64_t>(ops.size()))
                                 .integer("collective", static_cast<int64_t>(collectives_run_))
                                 .integer("bytes", bytes)
                                 .text("dtype", dtype_label(head.dtype))
                                 .text("device", head.device == DTRAIN_CUDA ? "cuda" : "host")
                                 .str();
    for (const std::string& name : response.names) {
      timeline_.end(name);  // QUEUE
      timeline_.begin(name, upper(op_kind_name(head.kind)), args);
    }
  }
  int status = DTRAIN_OK;
  std::string error;
  try {
    if (head.device == DTRAIN_CUDA) {
      if (!device_) device_ = DeviceExecutor::create(*ctx_, gpu_, gpu_backend_, *executor_);
      device_->run(response, ops);
    } else {
      executor_->run(response, ops);
    }
  } catch (const std::exception& e) {
    status = status_of_exception(e);
    error = describe(head) + " failed: " + e.what();
  }
  for (const std::string& name : response.names) timeline_.end(name);
  for (const std::string& name : response.names) {
    auto it = local_.find(name);
    finish(it->second, status, error);
    local_.erase(it);
  }
  stand_in_zeros_.clear();
}

void Engine::finish(Operation& op, int status, const std::string& error) {
  {
    // The name is free again before the caller can see the handle done.
    std::lock_guard lock(mutex_);
    names_.erase(op.request.name);
  }
  if (timeline_.active())
    timeline_.instant(op.request.name, "DONE", runtime::JsonObject().text("status", dtrain_status_name(status)).str());
  op.completion->finish(status, error, op.done);
}

void Engine::fail_all(int status, const std::string& error) {
  std::vector<Operation> queued;
  {
    std::lock_guard lock(mutex_);
    if (failure_.empty() && status != DTRAIN_ERR_SHUT_DOWN) failure_ = error;
    queued.swap(queue_);
  }
  for (auto& [name, op] : local_) finish(op, status, error);
  local_.clear();
  for (Operation& op : queued) finish(op, status, error);
}

void Engine::shutdown() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  thread_.join();
  fail_all(DTRAIN_ERR_SHUT_DOWN, "dtrain shut down before this operation ran");
  DTRAIN_LOG0(kDebug) << "dtrain library: " << operations_run() << " named operations ran as " << collectives_run()
                      << " collectives (fused all-reduces count once)";
  device_.reset();  // waits for its stream
  timeline_.stop();
  executor_.reset();
  control_exchange_.reset();
  communicator_.reset();
  data_ = runtime::MpiComm();
  control_ = runtime::MpiComm();
  ctx_.reset();
  mpi_.reset();
}

}  // namespace dtrain::library
