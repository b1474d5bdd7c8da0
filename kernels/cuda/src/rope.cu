// Rotary position embedding; see rope.h. One thread per (row, head, pair).
#include "device_math.cuh"
#include "launch.h"
#include "trident/kernels/cuda/rope.h"

#include <algorithm>

namespace trident::kernels::cuda {
namespace {

using namespace detail;

constexpr int kThreads = 256;

template <typename T>
__global__ void rope_kernel(T* x, std::int64_t rows, std::int64_t row_stride, std::int64_t heads,
                            std::int64_t head_dim, std::int64_t seq, double log_base,
                            float direction) {
    const std::int64_t half = head_dim / 2;
    const std::int64_t total = rows * heads * half;
    for (std::int64_t t = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; t < total;
         t += std::int64_t(gridDim.x) * blockDim.x) {
        const std::int64_t i = t % half;
        const std::int64_t h = (t / half) % heads;
        const std::int64_t r = t / (half * heads);
        const double inv_freq = exp(-2.0 * double(i) / double(head_dim) * log_base);
        double s = 0.0, c = 0.0;
        sincos(double(r % seq) * inv_freq, &s, &c);
        const float cs = float(c), sn = direction * float(s);
        T* a = x + r * row_stride + h * head_dim + i;
        T* b = a + half;
        const float x0 = to_float(*a), x1 = to_float(*b);
        *a = from_float<T>(x0 * cs - x1 * sn);
        *b = from_float<T>(x1 * cs + x0 * sn);
    }
}

template <typename T>
void launch(T* x, std::int64_t rows, std::int64_t row_stride, std::int64_t heads,
            std::int64_t head_dim, std::int64_t seq, double base, float direction,
            cudaStream_t stream, const char* name) {
    require(rows >= 0 && heads > 0 && head_dim > 0 && head_dim % 2 == 0 && seq > 0 &&
                row_stride >= heads * head_dim && base > 1.0,
            name, "bad shape or base");
    if (rows == 0) return;
    const std::int64_t total = rows * heads * (head_dim / 2);
    const auto blocks =
        static_cast<unsigned>(std::clamp<std::int64_t>(ceil_div(total, kThreads), 1, 65535));
    rope_kernel<<<blocks, kThreads, 0, stream>>>(x, rows, row_stride, heads, head_dim, seq,
                                                 std::log(base), direction);
    check_launch(name);
}

} // namespace

template <typename T>
void rope_forward(T* x, std::int64_t rows, std::int64_t row_stride, std::int64_t heads,
                  std::int64_t head_dim, std::int64_t seq, double base, cudaStream_t stream) {
    launch(x, rows, row_stride, heads, head_dim, seq, base, 1.0f, stream, "rope_forward");
}

template <typename T>
void rope_backward(T* dx, std::int64_t rows, std::int64_t row_stride, std::int64_t heads,
                   std::int64_t head_dim, std::int64_t seq, double base, cudaStream_t stream) {
    launch(dx, rows, row_stride, heads, head_dim, seq, base, -1.0f, stream, "rope_backward");
}

#define TRIDENT_INSTANTIATE_ROPE(T)                                                                \
    template void rope_forward<T>(T*, std::int64_t, std::int64_t, std::int64_t, std::int64_t,      \
                                  std::int64_t, double, cudaStream_t);                             \
    template void rope_backward<T>(T*, std::int64_t, std::int64_t, std::int64_t, std::int64_t,     \
                                   std::int64_t, double, cudaStream_t);
TRIDENT_INSTANTIATE_ROPE(float)
TRIDENT_INSTANTIATE_ROPE(__nv_bfloat16)

} // namespace trident::kernels::cuda
