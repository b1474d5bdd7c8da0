#pragma once
// Host-side launch helpers shared by the kernel files.
#include <cstdint>
#include <cuda_runtime_api.h>
#include <stdexcept>
#include <string>

namespace trident::kernels::cuda::detail {

// Multiprocessors of the current device.
int multiprocessor_count();

// Raises a kernel's dynamic shared-memory limit when it needs more than the default 48 KiB.
template <typename Kernel>
void allow_shared_bytes(Kernel kernel, std::size_t bytes);

// True when every pointer is aligned to 16 bytes (nullptr counts as aligned).
template <typename... P>
bool aligned16(const P*... ptrs) {
    return ((reinterpret_cast<std::uintptr_t>(ptrs) % 16 == 0) && ...);
}

inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
    return (a + b - 1) / b;
}

// Blocks for a grid-stride loop over n elements: one per `threads` elements, at least one, at
// most the 65535 every grid dimension allows.
inline unsigned grid_stride_blocks(std::int64_t n, int threads) {
    const std::int64_t blocks = ceil_div(n, threads);
    return static_cast<unsigned>(blocks < 1 ? 1 : blocks > 65535 ? 65535 : blocks);
}

inline void require(bool ok, const char* function, const std::string& what) {
    if (!ok) throw std::invalid_argument(std::string(function) + ": " + what);
}

} // namespace trident::kernels::cuda::detail

#include "trident/kernels/cuda/error.h"

namespace trident::kernels::cuda::detail {

template <typename Kernel>
void allow_shared_bytes(Kernel kernel, std::size_t bytes) {
    // The default limit (48 KiB) counts static shared memory too, so raise it well before.
    if (bytes <= 32 * 1024) return;
    TRIDENT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            static_cast<int>(bytes)));
}

} // namespace trident::kernels::cuda::detail
