#pragma once
// GPU tests: a device copy of a host vector. cudaMalloc'd and filled from the host, read back with
// to_host(), freed when it goes out of scope (also when an assertion throws). CUDA builds only.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "runtime/cuda/cuda_check.h"

namespace dtrain::test {

template <typename T>
class DeviceVector {
 public:
  explicit DeviceVector(const std::vector<T>& host) : size_(host.size()) {
    DTRAIN_CUDA_CHECK(cudaMalloc(&data_, std::max<size_t>(size_, 1) * sizeof(T)));
    DTRAIN_CUDA_CHECK(cudaMemcpy(data_, host.data(), size_ * sizeof(T), cudaMemcpyHostToDevice));
  }
  explicit DeviceVector(size_t size) : DeviceVector(std::vector<T>(size)) {}  // value-initialized
  ~DeviceVector() { cudaFree(data_); }
  DeviceVector(const DeviceVector&) = delete;
  DeviceVector& operator=(const DeviceVector&) = delete;

  T* get() const { return data_; }
  size_t size() const { return size_; }
  std::vector<T> to_host() const {
    std::vector<T> host(size_);
    DTRAIN_CUDA_CHECK(cudaMemcpy(host.data(), data_, size_ * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }

 private:
  size_t size_;
  T* data_ = nullptr;
};

}  // namespace dtrain::test
