#pragma once
// A 64-bit counter in mapped pinned memory through which CUDA streams and one host thread signal
// each other with no CUDA call on the host side:
//   - a stream waits for the counter until the host raises it: set();
//   - a stream raises it after its earlier work and the host waits for that: wait_at_least().
// The stream side uses the driver's stream memory operations (cuStreamWaitValue64 /
// cuStreamWriteValue64, with a memory barrier before the write): they run in the stream's front
// end and take no SM. Where the driver does not offer them, or DTRAIN_STREAM_FLAG_KERNELS=1 asks,
// one-thread kernels do the same (a kernel that polls, sleeping between reads, and one that
// stores); those need a free SM slot to start, which a GPU busy with backward gives late.
// Why no CUDA call on the host side: a host thread whose progress some GPU work waits for must not
// need the CUDA driver. Another thread of the process can hold the driver's context lock while it
// waits for the GPU to drain (the first launch of a kernel under lazy module loading, cudaFree,
// cudaFreeHost...); a CUDA call of ours would then wait for that lock, and the drain for us.
// The counter only grows: values are tickets handed out in order. Both kernels are loaded at
// construction, so enqueuing them never triggers lazy loading.
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>

namespace dtrain::comm::cuda {

class StreamFlag {
 public:
  StreamFlag();  // on the current device
  ~StreamFlag();
  StreamFlag(const StreamFlag&) = delete;
  StreamFlag& operator=(const StreamFlag&) = delete;

  // Stream side (enqueue only, from the submitting thread).
  void enqueue_wait(cudaStream_t stream, uint64_t at_least);  // later work on `stream` waits
  void enqueue_set(cudaStream_t stream, uint64_t value);      // after earlier work on `stream`

  // Host side: plain memory accesses, never a CUDA call.
  uint64_t value() const;
  void set(uint64_t value);  // release: host writes before it are visible to the waiting stream
  // Blocks the calling thread until value() >= at_least: a short spin, then sleeps of 20 to 200 us
  // (the GPU cannot wake a host thread without the driver). Returns true then, or false as soon as
  // *give_up (when given) is true: the value may never come.
  bool wait_at_least(uint64_t at_least, const std::atomic<bool>* give_up = nullptr) const;

 private:
  volatile uint64_t* host_ = nullptr;  // pinned, mapped
  uint64_t* device_ = nullptr;         // the same memory as the GPU addresses it
  bool memops_ = false;                // stream memory operations (else the kernels)
};

}  // namespace dtrain::comm::cuda
