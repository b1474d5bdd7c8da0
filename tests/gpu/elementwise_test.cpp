// The element-wise steps of the CUDA model (elementwise.h) against CPU loops.
#include "gpu_test_support.h"
#include "trident/kernels/cuda/elementwise.h"
#include "trident/kernels/cuda/rope.h"

namespace trident::kernels::cuda::testing {
namespace {

class ElementwiseTest : public GpuTest {};

TEST_F(ElementwiseTest, AddBiasAndBiasGradientBf16) {
    const std::int64_t rows = 300, cols = 70; // cols not a multiple of 32: a partial block
    const auto x = convert<bf16>(random_floats(rows * cols, 1));
    const auto bias = convert<bf16>(random_floats(cols, 2));
    DeviceBuffer<bf16> dx(x), dbias(bias);
    DeviceBuffer<float> dgrad(std::vector<float>(cols, 0.25f));
    add_bias<bf16>(dx.get(), dbias.get(), rows, cols, nullptr);
    bias_gradient<bf16>(dgrad.get(), dx.get(), rows, cols, nullptr);
    TRIDENT_CUDA_CHECK(cudaDeviceSynchronize());
    const auto got = dx.to_host();
    std::vector<double> sum_ref(rows * cols), grad_ref(cols, 0.25);
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c) {
            sum_ref[r * cols + c] = double(to_float(x[r * cols + c])) + to_float(bias[c]);
            grad_ref[c] += to_float(got[r * cols + c]); // the rounded values the kernel summed
        }
    EXPECT_LT(relative_error(got, sum_ref), 4e-3) << "add_bias (bf16 rounding)";
    EXPECT_LT(relative_error(dgrad.to_host(), grad_ref), 1e-5) << "bias_gradient accumulates";
}

TEST_F(ElementwiseTest, AddAndConvertRoundTrip) {
    const std::int64_t n = 10001;
    const auto a = random_floats(n, 3), b = random_floats(n, 4);
    DeviceBuffer<float> da(a), db(b), back(n);
    DeviceBuffer<bf16> half(n);
    add<float>(da.get(), da.get(), db.get(), n, nullptr); // out aliases a
    cuda::convert<bf16, float>(half.get(), da.get(), n, nullptr);
    cuda::convert<float, bf16>(back.get(), half.get(), n, nullptr);
    TRIDENT_CUDA_CHECK(cudaDeviceSynchronize());
    const auto sum = da.to_host(), rounded = back.to_host();
    for (std::int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(sum[i], a[i] + b[i]) << i;
        ASSERT_EQ(rounded[i], to_float(to_bf16(sum[i]))) << "round to nearest even at " << i;
    }
}

TEST_F(ElementwiseTest, PositionEmbeddingForwardBackward) {
    const std::int64_t batch = 3, seq = 64, cols = 48;
    const auto x = random_floats(batch * seq * cols, 5), table = random_floats(seq * cols, 6);
    DeviceBuffer<float> dx(x), dtable(table), dgrad(std::vector<float>(seq * cols, 1.0f));
    add_position_embedding<float>(dx.get(), dtable.get(), batch * seq, 0, seq, cols, nullptr);
    position_embedding_backward<float>(dgrad.get(), dx.get(), batch * seq, seq, cols, nullptr);
    TRIDENT_CUDA_CHECK(cudaDeviceSynchronize());
    const auto got = dx.to_host();
    std::vector<double> ref(x.size()), grad_ref(seq * cols, 1.0);
    for (std::int64_t r = 0; r < batch * seq; ++r)
        for (std::int64_t c = 0; c < cols; ++c) {
            ref[r * cols + c] = double(x[r * cols + c]) + table[(r % seq) * cols + c];
            grad_ref[(r % seq) * cols + c] += ref[r * cols + c];
        }
    EXPECT_LT(relative_error(got, ref), 1e-7);
    EXPECT_LT(relative_error(dgrad.to_host(), grad_ref), 1e-6);
}

TEST_F(ElementwiseTest, PositionEmbeddingOfALaterBlockOfRows) {
    // Sequence parallelism: rank 1 of 4 holds rows 24..47 of two sequences of 48.
    const std::int64_t seq = 48, first = 24, rows = 24, cols = 16;
    const auto x = random_floats(rows * cols, 10), table = random_floats(seq * cols, 11);
    DeviceBuffer<float> dx(x), dtable(table);
    add_position_embedding<float>(dx.get(), dtable.get(), rows, first, seq, cols, nullptr);
    TRIDENT_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<double> ref(x.size());
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c)
            ref[r * cols + c] = double(x[r * cols + c]) + table[((first + r) % seq) * cols + c];
    EXPECT_LT(relative_error(dx.to_host(), ref), 1e-7);
}

TEST_F(ElementwiseTest, FillColumnsAndAccumulateSum) {
    const std::int64_t rows = 17, cols = 40, first = 33;
    const auto x = random_floats(rows * cols, 7);
    DeviceBuffer<float> dx(x), total(std::vector<float>{2.0f});
    fill_columns<float>(dx.get(), rows, cols, first, -1e30f, nullptr);
    accumulate_sum(total.get(), dx.get(), rows * first,
                   nullptr); // the untouched head of the buffer
    TRIDENT_CUDA_CHECK(cudaDeviceSynchronize());
    const auto got = dx.to_host();
    double sum = 2.0;
    for (std::int64_t i = 0; i < rows * first; ++i) sum += got[i];
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c)
            ASSERT_EQ(got[r * cols + c], c >= first ? -1e30f : x[r * cols + c]) << r << "," << c;
    EXPECT_NEAR(total.to_host()[0], sum, 1e-4 * (1 + std::abs(sum)));
}

// The rotation on the host in double, as kernels/cpu's rope does it.
std::vector<double> rope_reference(const std::vector<float>& x, std::int64_t rows,
                                   std::int64_t stride, std::int64_t heads, std::int64_t D,
                                   std::int64_t seq, double base, double direction) {
    std::vector<double> out(x.begin(), x.end());
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t h = 0; h < heads; ++h)
            for (std::int64_t i = 0; i < D / 2; ++i) {
                const double angle = double(r % seq) * std::pow(base, -2.0 * double(i) / double(D));
                const double c = std::cos(angle), s = direction * std::sin(angle);
                const std::int64_t a = r * stride + h * D + i, b = a + D / 2;
                out[a] = x[a] * c - x[b] * s;
                out[b] = x[b] * c + x[a] * s;
            }
    return out;
}

TEST_F(ElementwiseTest, RopeForwardBackwardFp32) {
    const std::int64_t seq = 96, rows = 2 * seq, heads = 3, D = 64, stride = heads * D + 64;
    const auto x = random_floats(rows * stride, 8);
    DeviceBuffer<float> dx(x);
    rope_forward<float>(dx.get(), rows, stride, heads, D, seq, 500000.0, nullptr);
    TRIDENT_CUDA_CHECK(cudaDeviceSynchronize());
    const auto turned = dx.to_host();
    EXPECT_LT(relative_error(turned, rope_reference(x, rows, stride, heads, D, seq, 500000.0, 1.0)),
              1e-6);
    for (std::int64_t r = 0; r < rows; ++r) // the padding after the heads is not touched
        ASSERT_EQ(turned[r * stride + stride - 1], x[r * stride + stride - 1]);
    rope_backward<float>(dx.get(), rows, stride, heads, D, seq, 500000.0, nullptr);
    TRIDENT_CUDA_CHECK(cudaDeviceSynchronize());
    EXPECT_LT(relative_error(dx.to_host(), std::vector<double>(x.begin(), x.end())), 1e-6)
        << "the backward undoes the forward";
}

TEST_F(ElementwiseTest, RopeBf16) {
    const std::int64_t seq = 128, rows = seq, heads = 4, D = 128;
    const auto x = convert<bf16>(random_floats(rows * heads * D, 9));
    std::vector<float> xf(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) xf[i] = to_float(x[i]);
    DeviceBuffer<bf16> dx(x);
    rope_backward<bf16>(dx.get(), rows, heads * D, heads, D, seq, 10000.0, nullptr);
    TRIDENT_CUDA_CHECK(cudaDeviceSynchronize());
    EXPECT_LT(relative_error(dx.to_host(),
                             rope_reference(xf, rows, heads * D, heads, D, seq, 10000.0, -1.0)),
              4e-3);
}

} // namespace
} // namespace trident::kernels::cuda::testing
