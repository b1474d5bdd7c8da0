// Element-wise steps and small reductions; see elementwise.h. Grid-stride loops: these move a
// few megabytes per call next to GEMMs that take milliseconds, so simplicity wins here.
#include "device_math.cuh"
#include "launch.h"
#include "trident/kernels/cuda/elementwise.h"

#include <algorithm>

namespace trident::kernels::cuda {
namespace {

using namespace detail;

constexpr int kThreads = 256;

unsigned blocks_for(std::int64_t n) {
    return grid_stride_blocks(n, kThreads);
}

template <typename T>
__global__ void add_bias_kernel(T* x, const T* bias, std::int64_t n, std::int64_t cols) {
    for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n;
         i += std::int64_t(gridDim.x) * blockDim.x)
        x[i] = from_float<T>(to_float(x[i]) + to_float(bias[i % cols]));
}

// 32 columns per block, 8 row lanes summing strided rows, then one atomic add per column.
template <typename T>
__global__ void bias_gradient_kernel(float* dbias, const T* dout, std::int64_t rows,
                                     std::int64_t cols) {
    __shared__ float partial[8][33];
    const std::int64_t c = blockIdx.x * 32 + threadIdx.x;
    float sum = 0.0f;
    if (c < cols)
        for (std::int64_t r = blockIdx.y * 8 + threadIdx.y; r < rows; r += gridDim.y * 8)
            sum += to_float(dout[r * cols + c]);
    partial[threadIdx.y][threadIdx.x] = sum;
    __syncthreads();
    if (threadIdx.y == 0 && c < cols) {
        for (int y = 1; y < 8; ++y) sum += partial[y][threadIdx.x];
        atomicAdd(dbias + c, sum);
    }
}

template <typename T>
__global__ void add_kernel(T* out, const T* a, const T* b, std::int64_t n) {
    for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n;
         i += std::int64_t(gridDim.x) * blockDim.x)
        out[i] = from_float<T>(to_float(a[i]) + to_float(b[i]));
}

template <typename Out, typename In>
__global__ void convert_kernel(Out* out, const In* in, std::int64_t n) {
    for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n;
         i += std::int64_t(gridDim.x) * blockDim.x)
        out[i] = from_float<Out>(to_float(in[i]));
}

template <typename T>
__global__ void add_position_kernel(T* x, const T* table, std::int64_t n, std::int64_t first_row,
                                    std::int64_t seq, std::int64_t cols) {
    for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n;
         i += std::int64_t(gridDim.x) * blockDim.x) {
        const std::int64_t r = first_row + i / cols, c = i % cols;
        x[i] = from_float<T>(to_float(x[i]) + to_float(table[(r % seq) * cols + c]));
    }
}

// One thread per (position, column): it sums that element over the batch, so no atomics.
template <typename T>
__global__ void position_backward_kernel(float* dtable, const T* dout, std::int64_t batch,
                                         std::int64_t seq, std::int64_t cols) {
    for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < seq * cols;
         i += std::int64_t(gridDim.x) * blockDim.x) {
        float sum = 0.0f;
        for (std::int64_t b = 0; b < batch; ++b) sum += to_float(dout[b * seq * cols + i]);
        dtable[i] += sum;
    }
}

template <typename T>
__global__ void fill_columns_kernel(T* x, std::int64_t rows, std::int64_t cols,
                                    std::int64_t first_col, float value) {
    const std::int64_t width = cols - first_col;
    for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < rows * width;
         i += std::int64_t(gridDim.x) * blockDim.x)
        x[(i / width) * cols + first_col + i % width] = from_float<T>(value);
}

__global__ void accumulate_sum_kernel(float* out, const float* in, std::int64_t n) {
    __shared__ float scratch[32];
    float sum = 0.0f;
    for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n;
         i += std::int64_t(gridDim.x) * blockDim.x)
        sum += in[i];
    sum = block_sum(sum, scratch);
    if (threadIdx.x == 0) atomicAdd(out, sum);
}

} // namespace

template <typename T>
void add_bias(T* x, const T* bias, std::int64_t rows, std::int64_t cols, cudaStream_t stream) {
    require(rows >= 0 && cols > 0, "add_bias", "bad shape");
    if (rows == 0) return;
    add_bias_kernel<<<blocks_for(rows * cols), kThreads, 0, stream>>>(x, bias, rows * cols, cols);
    check_launch("add_bias_kernel");
}

template <typename T>
void bias_gradient(float* dbias, const T* dout, std::int64_t rows, std::int64_t cols,
                   cudaStream_t stream) {
    require(rows >= 0 && cols > 0, "bias_gradient", "bad shape");
    if (rows == 0) return;
    const dim3 grid(static_cast<unsigned>(ceil_div(cols, 32)),
                    static_cast<unsigned>(std::clamp<std::int64_t>(ceil_div(rows, 64), 1, 64)));
    bias_gradient_kernel<<<grid, dim3(32, 8), 0, stream>>>(dbias, dout, rows, cols);
    check_launch("bias_gradient_kernel");
}

template <typename T>
void add(T* out, const T* a, const T* b, std::int64_t n, cudaStream_t stream) {
    require(n >= 0, "add", "negative size");
    if (n == 0) return;
    add_kernel<<<blocks_for(n), kThreads, 0, stream>>>(out, a, b, n);
    check_launch("add_kernel");
}

template <typename Out, typename In>
void convert(Out* out, const In* in, std::int64_t n, cudaStream_t stream) {
    require(n >= 0, "convert", "negative size");
    if (n == 0) return;
    convert_kernel<<<blocks_for(n), kThreads, 0, stream>>>(out, in, n);
    check_launch("convert_kernel");
}

template <typename T>
void add_position_embedding(T* x, const T* table, std::int64_t rows, std::int64_t first_row,
                            std::int64_t seq, std::int64_t cols, cudaStream_t stream) {
    require(rows >= 0 && first_row >= 0 && seq > 0 && cols > 0, "add_position_embedding",
            "bad shape");
    if (rows == 0) return;
    add_position_kernel<<<blocks_for(rows * cols), kThreads, 0, stream>>>(x, table, rows * cols,
                                                                          first_row, seq, cols);
    check_launch("add_position_kernel");
}

template <typename T>
void position_embedding_backward(float* dtable, const T* dout, std::int64_t rows, std::int64_t seq,
                                 std::int64_t cols, cudaStream_t stream) {
    require(rows >= 0 && seq > 0 && cols > 0 && rows % seq == 0, "position_embedding_backward",
            "rows must be a whole number of sequences");
    if (rows == 0) return;
    position_backward_kernel<<<blocks_for(seq * cols), kThreads, 0, stream>>>(
        dtable, dout, rows / seq, seq, cols);
    check_launch("position_backward_kernel");
}

template <typename T>
void fill_columns(T* x, std::int64_t rows, std::int64_t cols, std::int64_t first_col, float value,
                  cudaStream_t stream) {
    require(rows >= 0 && cols > 0 && first_col >= 0, "fill_columns", "bad shape");
    if (rows == 0 || first_col >= cols) return;
    fill_columns_kernel<<<blocks_for(rows * (cols - first_col)), kThreads, 0, stream>>>(
        x, rows, cols, first_col, value);
    check_launch("fill_columns_kernel");
}

void accumulate_sum(float* out, const float* in, std::int64_t n, cudaStream_t stream) {
    require(n >= 0, "accumulate_sum", "negative size");
    if (n == 0) return;
    accumulate_sum_kernel<<<std::min(blocks_for(n), 1024u), kThreads, 0, stream>>>(out, in, n);
    check_launch("accumulate_sum_kernel");
}

#define TRIDENT_INSTANTIATE_ELEMENTWISE(T)                                                         \
    template void add_bias<T>(T*, const T*, std::int64_t, std::int64_t, cudaStream_t);             \
    template void bias_gradient<T>(float*, const T*, std::int64_t, std::int64_t, cudaStream_t);    \
    template void add<T>(T*, const T*, const T*, std::int64_t, cudaStream_t);                      \
    template void add_position_embedding<T>(T*, const T*, std::int64_t, std::int64_t,              \
                                            std::int64_t, std::int64_t, cudaStream_t);             \
    template void position_embedding_backward<T>(float*, const T*, std::int64_t, std::int64_t,     \
                                                 std::int64_t, cudaStream_t);                      \
    template void fill_columns<T>(T*, std::int64_t, std::int64_t, std::int64_t, float,             \
                                  cudaStream_t);
TRIDENT_INSTANTIATE_ELEMENTWISE(float)
TRIDENT_INSTANTIATE_ELEMENTWISE(__nv_bfloat16)
template void convert<float, __nv_bfloat16>(float*, const __nv_bfloat16*, std::int64_t,
                                            cudaStream_t);
template void convert<__nv_bfloat16, float>(__nv_bfloat16*, const float*, std::int64_t,
                                            cudaStream_t);

} // namespace trident::kernels::cuda
