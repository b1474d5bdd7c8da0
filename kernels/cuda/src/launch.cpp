#include "launch.h"

namespace trident::kernels::cuda::detail {

int multiprocessor_count() {
    int device = 0;
    TRIDENT_CUDA_CHECK(cudaGetDevice(&device));
    int count = 0;
    TRIDENT_CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
    return count;
}

} // namespace trident::kernels::cuda::detail
