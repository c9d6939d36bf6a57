#include "models/cuda/cudnn_backend.h"

#include <utility>

#include "runtime/cuda/cuda_check.h"

namespace dtrain::models::cuda {

BackendDescriptor::BackendDescriptor(cudnnBackendDescriptorType_t type) {
  DTRAIN_CUDNN_CHECK(cudnnBackendCreateDescriptor(type, &descriptor_))
      << "creating a cuDNN descriptor of type " << type;
}

BackendDescriptor::~BackendDescriptor() {
  if (descriptor_ != nullptr) cudnnBackendDestroyDescriptor(descriptor_);
}

BackendDescriptor::BackendDescriptor(BackendDescriptor&& other) noexcept
    : descriptor_(std::exchange(other.descriptor_, nullptr)) {}

BackendDescriptor& BackendDescriptor::operator=(BackendDescriptor&& other) noexcept {
  if (this != &other) {
    if (descriptor_ != nullptr) cudnnBackendDestroyDescriptor(descriptor_);
    descriptor_ = std::exchange(other.descriptor_, nullptr);
  }
  return *this;
}

BackendDescriptor& BackendDescriptor::set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
                                          int64_t count, const void* values) {
  DTRAIN_CUDNN_CHECK(cudnnBackendSetAttribute(descriptor_, name, type, count, values))
      << "setting cuDNN attribute " << name;
  return *this;
}

BackendDescriptor& BackendDescriptor::set_int64(cudnnBackendAttributeName_t name,
                                                std::initializer_list<int64_t> values) {
  return set(name, CUDNN_TYPE_INT64, static_cast<int64_t>(values.size()), values.begin());
}

BackendDescriptor& BackendDescriptor::set_int64(cudnnBackendAttributeName_t name, const std::vector<int64_t>& values) {
  return set(name, CUDNN_TYPE_INT64, static_cast<int64_t>(values.size()), values.data());
}

BackendDescriptor& BackendDescriptor::set_descriptor(cudnnBackendAttributeName_t name, const BackendDescriptor& value) {
  cudnnBackendDescriptor_t raw = value.get();
  return set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw);
}

BackendDescriptor& BackendDescriptor::set_descriptors(cudnnBackendAttributeName_t name,
                                                      const std::vector<cudnnBackendDescriptor_t>& values) {
  return set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, static_cast<int64_t>(values.size()), values.data());
}

void BackendDescriptor::finalize(const char* what) {
  DTRAIN_CUDNN_CHECK(cudnnBackendFinalize(descriptor_)) << "finalizing " << what;
}

cudnnStatus_t BackendDescriptor::try_finalize() {
  return cudnnBackendFinalize(descriptor_);
}

}  // namespace dtrain::models::cuda
