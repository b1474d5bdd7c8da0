#pragma once
// Errors from the CUDA runtime, cuBLASLt and our own launches, as exceptions that carry the
// call that failed and the library's reason for it.
#include <cublas_api.h>
#include <cuda_runtime_api.h>
#include <stdexcept>
#include <string>

namespace trident::kernels::cuda {

class CudaError : public std::runtime_error {
public:
    CudaError(const std::string& call, const std::string& reason)
        : std::runtime_error(call + ": " + reason), call_(call), reason_(reason) {}
    const std::string& call() const { return call_; }
    const std::string& reason() const { return reason_; }

private:
    std::string call_;
    std::string reason_;
};

// Throws CudaError naming `call` unless `status` is success.
void check_cuda(cudaError_t status, const char* call);
void check_cublas(cublasStatus_t status, const char* call);
// After a kernel launch: throws if the launch itself failed (bad configuration, no device).
void check_launch(const char* kernel);

} // namespace trident::kernels::cuda

#define TRIDENT_CUDA_CHECK(call) ::trident::kernels::cuda::check_cuda((call), #call)
#define TRIDENT_CUBLAS_CHECK(call) ::trident::kernels::cuda::check_cublas((call), #call)
