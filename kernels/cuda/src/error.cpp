#include "trident/kernels/cuda/error.h"

#include <cuda_runtime_api.h>

namespace trident::kernels::cuda {

void check_cuda(cudaError_t status, const char* call) {
    if (status == cudaSuccess) return;
    throw CudaError(call, std::string(cudaGetErrorName(status)) + " (" +
                              cudaGetErrorString(status) + ")");
}

void check_cublas(cublasStatus_t status, const char* call) {
    if (status == CUBLAS_STATUS_SUCCESS) return;
    throw CudaError(call, "cuBLAS status " + std::to_string(static_cast<int>(status)));
}

void check_launch(const char* kernel) {
    check_cuda(cudaGetLastError(), kernel);
}

} // namespace trident::kernels::cuda
