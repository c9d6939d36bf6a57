#pragma once
// The library's state between dtrain_init and dtrain_shutdown: MPI, the rank's place in the job,
// the Communicator, and the background thread that matches named operations across ranks and
// executes them (Horovod's design).
//
// Every cycle (DTRAIN_CYCLE_TIME_US, 1000 by default, or at once when something is submitted) the
// background thread sends rank 0 the requests submitted since the last cycle (ControlExchange, on a
// control communicator of its own); rank 0's Coordinator answers with the operations that every
// rank has now submitted, in one order, fused where it can, and broadcasts that list; every rank
// executes it in that order (Executor). So ranks may submit names in any order, and all MPI traffic
// of the library happens on this one thread, apart from the caller's.
//
// Device operations (DTRAIN_CUDA) go to a DeviceExecutor (device.h), made on the background thread
// at the first device operation the ranks agree on (so a job that never uses device buffers
// makes no NCCL communicator and no CUDA context).
//
// submit() and the handle functions may be called from any thread; the constructor and shutdown()
// from one thread, on every rank (collective).
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "comm/communicator.h"
#include "library/control_exchange.h"
#include "library/coordinator.h"
#include "library/device.h"
#include "library/executor.h"
#include "library/operation.h"
#include "library/timeline.h"
#include "runtime/mpi/mpi_scope.h"
#include "runtime/rank/rank_context.h"

namespace dtrain::library {

// A failure that carries its dtrain_status across the C boundary.
class AbiError : public std::runtime_error {
 public:
  AbiError(int status, const std::string& text) : std::runtime_error(text), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

// The dtrain_status for a failure: AbiError's own, UsageError's INVALID_ARGUMENT, MpiError's MPI,
// DTRAIN_ERR_INTERNAL for anything else.
int status_of_exception(const std::exception& e);

class Engine {
 public:
  // Collective over `world`. Starts MPI when nobody has (then shutdown() finalizes it). AbiError
  // (DTRAIN_ERR_MPI) when MPI lacks MPI_THREAD_MULTIPLE.
  explicit Engine(MPI_Comm world);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const runtime::Topology& topology() const { return ctx_->topology(); }
  int gpu() const { return gpu_; }
  // Why this rank cannot take device buffers ("" when it can): a build without CUDA, or a rank of
  // the job without a GPU (every rank gets the same answer).
  const std::string& device_problem() const { return device_problem_; }
  // Device buffers were submitted on this rank: host buffers are then checked not to be device
  // memory (before, that check would make a CUDA context just to look).
  bool device_in_use() const { return device_in_use_.load(std::memory_order_relaxed); }
  void note_device_use() { device_in_use_ = true; }
  // Rank 0 writes the timeline; the other ranks' calls change nothing (timeline.h).
  void start_timeline(const std::string& path);
  void stop_timeline();

  // Queues `op` (buffers already checked) and returns its handle. AbiError when its name is in
  // flight on this rank, or the background thread has failed.
  int64_t submit(Operation op);
  // The completion of `handle`; release also forgets the handle. nullptr when unknown.
  std::shared_ptr<Completion> find(int64_t handle);
  std::shared_ptr<Completion> release(int64_t handle);
  // Named operations completed and collectives executed on this rank since init (any thread).
  uint64_t operations_run() const { return operations_run_.load(std::memory_order_relaxed); }
  uint64_t collectives_run() const { return collectives_run_.load(std::memory_order_relaxed); }

  // Collective: finishes what every rank submitted, fails the rest, stops the thread, frees
  // everything. Called once.
  void shutdown();

 private:
  void loop();
  bool cycle();
  std::vector<Response> exchange(const std::vector<char>& requests);
  void execute(const Response& response);
  // Join (engine_join.cc): completes a join response; makes zero operations for the all-reduces
  // this rank stands in for, having joined.
  bool finish_join(const Response& response);
  void adopt_stand_ins(const Response& response);
  void finish(Operation& op, int status, const std::string& error);
  void fail_all(int status, const std::string& error);
  void agree_on_gpus();

  std::optional<runtime::MpiScope> mpi_;
  std::optional<runtime::RankContext> ctx_;
  runtime::MpiComm control_;
  runtime::MpiComm data_;
  Timeline timeline_;                                  // declared before coordinator_, which writes to it
  std::unique_ptr<ControlExchange> control_exchange_;  // on control_
  std::unique_ptr<comm::Communicator> communicator_;
  std::unique_ptr<Executor> executor_;
  std::unique_ptr<DeviceExecutor> device_;    // the background thread's, from the first device operation
  std::unique_ptr<Coordinator> coordinator_;  // rank 0 only
  std::chrono::microseconds cycle_time_{1000};
  int gpu_ = -1;
  comm::Backend gpu_backend_ = comm::Backend::kAuto;  // DTRAIN_GPU_BACKEND
  std::string device_problem_;
  std::atomic<bool> device_in_use_{false};

  std::mutex mutex_;  // guards everything below but local_
  std::condition_variable wake_;
  std::atomic<size_t> queued_{0};            // queue_.size(), read without the lock by the polling thread
  std::vector<Operation> queue_;             // submitted, not yet sent to rank 0
  std::set<std::string> names_;              // in flight on this rank
  std::map<std::string, Response> aborted_;  // stalled names this rank had not submitted yet
  std::map<int64_t, std::shared_ptr<Completion>> handles_;
  int64_t next_handle_ = 1;
  bool stopping_ = false;
  std::string failure_;  // the background thread's, once it has failed

  std::map<std::string, Operation> local_;                     // sent to rank 0; the background thread's only
  std::map<std::string, std::vector<double>> stand_in_zeros_;  // adopt_stand_ins' buffers, one response long
  bool busy_ = false;  // the last cycle sent or ran something; the thread's only
  // What fusion achieved (dtrain_fusion_stats, the log at shutdown); written by the background thread.
  std::atomic<uint64_t> operations_run_{0};
  std::atomic<uint64_t> collectives_run_{0};
  std::thread thread_;
};

}  // namespace dtrain::library
