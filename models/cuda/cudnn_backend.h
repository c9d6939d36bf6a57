#pragma once
// A cuDNN backend (graph API) descriptor owned by RAII, with typed setters: the few lines every
// graph-API call site would otherwise repeat (create, set attributes, finalize, destroy, check).
#include <cudnn.h>

#include <cstdint>
#include <initializer_list>
#include <vector>

namespace dtrain::models::cuda {

class BackendDescriptor {
 public:
  BackendDescriptor() = default;
  explicit BackendDescriptor(cudnnBackendDescriptorType_t type);
  ~BackendDescriptor();
  BackendDescriptor(BackendDescriptor&& other) noexcept;
  BackendDescriptor& operator=(BackendDescriptor&& other) noexcept;
  BackendDescriptor(const BackendDescriptor&) = delete;
  BackendDescriptor& operator=(const BackendDescriptor&) = delete;

  cudnnBackendDescriptor_t get() const { return descriptor_; }

  // Each throws a cuDNN error naming the attribute when cuDNN refuses it.
  BackendDescriptor& set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count,
                         const void* values);
  BackendDescriptor& set_int64(cudnnBackendAttributeName_t name, std::initializer_list<int64_t> values);
  BackendDescriptor& set_int64(cudnnBackendAttributeName_t name, const std::vector<int64_t>& values);
  BackendDescriptor& set_descriptor(cudnnBackendAttributeName_t name, const BackendDescriptor& value);
  BackendDescriptor& set_descriptors(cudnnBackendAttributeName_t name,
                                     const std::vector<cudnnBackendDescriptor_t>& values);

  void finalize(const char* what);
  // Finalizing an engine or a plan fails, by design, for configurations that do not support the
  // graph: the caller skips those.
  cudnnStatus_t try_finalize();

 private:
  cudnnBackendDescriptor_t descriptor_ = nullptr;
};

}  // namespace dtrain::models::cuda
