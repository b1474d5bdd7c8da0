// Vocabulary-parallel embedding forward and backward against CPU loops.
#include "gpu_test_support.h"
#include "trident/kernels/cuda/embedding.h"

namespace trident::kernels::cuda::testing {
namespace {

class EmbeddingTest : public GpuTest {};

template <typename T>
void check_embedding(std::int64_t rows, std::int64_t vocab, std::int64_t dim) {
    const std::int64_t local = vocab / 2;
    const std::int64_t start = local; // this rank holds the upper half
    const auto table = convert<T>(random_floats(local * dim, 61));
    const auto dout = convert<T>(random_floats(rows * dim, 62));
    std::vector<std::int32_t> ids(rows);
    std::mt19937 gen(63);
    std::uniform_int_distribution<std::int32_t> dist(0, static_cast<std::int32_t>(vocab - 1));
    for (auto& id : ids) id = dist(gen);
    ids[1] = ids[0] = static_cast<std::int32_t>(start + 5); // repeated tokens add up
    const std::vector<float> dtable0(local * dim, 0.5f);
    DeviceBuffer<T> dtab(table), ddout(dout), dout_emb(rows * dim);
    DeviceBuffer<std::int32_t> dids(ids);
    DeviceBuffer<float> dgrad(dtable0);
    dout_emb.fill_bytes(0xFF);
    embedding_forward<T>(dout_emb.get(), dtab.get(), dids.get(), rows, local, start, dim, nullptr);
    embedding_backward<T>(dgrad.get(), ddout.get(), dids.get(), rows, local, start, dim, nullptr);
    TRIDENT_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<double> out_ref(rows * dim, 0.0), grad_ref(dtable0.begin(), dtable0.end());
    for (std::int64_t r = 0; r < rows; ++r) {
        const std::int64_t l = ids[r] - start;
        if (l < 0 || l >= local) continue;
        for (std::int64_t c = 0; c < dim; ++c) {
            out_ref[r * dim + c] = to_float(table[l * dim + c]);
            grad_ref[l * dim + c] += to_float(dout[r * dim + c]);
        }
    }
    EXPECT_EQ(relative_error(dout_emb.to_host(), out_ref), 0.0) << "forward is a copy";
    EXPECT_LT(relative_error(dgrad.to_host(), grad_ref), 1e-6) << "backward";
}

TEST_F(EmbeddingTest, VocabShardBf16) {
    check_embedding<bf16>(257, 1000, 512);
}
TEST_F(EmbeddingTest, VocabShardFp32OddDim) {
    check_embedding<float>(100, 64, 77);
}

} // namespace
} // namespace trident::kernels::cuda::testing
