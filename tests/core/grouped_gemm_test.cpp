// Grouped GEMMs (MoE experts): the 4-D log grid, the profile's grouped table and its fallbacks,
// and the shipped H100/H800 tables against published grouped-GEMM micro-benchmarks (not the
// ones their one fitted constant came from).
#include "trident/core/log_grid.h"
#include "trident/core/presets.h"
#include "trident/core/profile.h"
#include "trident/core/spec_error.h"

#include <cmath>
#include <gtest/gtest.h>

using namespace trident::core;

namespace {

const Profile& preset(const std::string& name) {
    static std::map<std::string, Profile> cache;
    auto it = cache.find(name);
    if (it == cache.end())
        it = cache
                 .emplace(name, Profile::from_json(
                                    resolve_reference(name, PresetKind::profile, "profile")))
                 .first;
    return it->second;
}

double tflops(const Profile& p, Dtype d, std::int64_t g, std::int64_t m, std::int64_t n,
              std::int64_t k) {
    return 2.0 * double(g * m) * double(n) * double(k) / p.grouped_gemm(d, g, m, n, k).seconds /
           1e12;
}

// Every corner of a 2×2×2×2 grid holds time = groups·m·n·k / 1e12.
Json grouped_rows() {
    Json rows = Json::array();
    for (double g : {2.0, 8.0})
        for (double m : {16.0, 256.0})
            for (double n : {256.0, 1024.0})
                for (double k : {16.0, 256.0}) rows.push_back({g, m, n, k, g * m * n * k / 1e12});
    return rows;
}

Json tiny_with_grouped() {
    Json j = Json::parse(R"({
      "format": "trident.profile/1", "name": "tiny",
      "provenance": {"kind": "derived", "method": "test"},
      "device": {"peak_flops_per_s": {"bf16": 1.0e12}, "memory_bytes": 1.0e9,
                 "memory_bandwidth_bytes_per_s": 1.0e11},
      "kernels": {
        "gemm": {"bf16": [[16,256,16,1e-3],[16,256,256,2e-3],[16,1024,16,3e-3],[16,1024,256,4e-3],
                          [256,256,16,5e-3],[256,256,256,6e-3],[256,1024,16,7e-3],[256,1024,256,8e-3]]},
        "attention": {"bf16": [[1,128,64,1,1e-5,2.5e-5]]},
        "memory_bound": {"layernorm": [[1000,1e-6],[1000000,1e-5]]}
      },
      "fabrics": {"nvlink": {"alpha_s": 1e-6, "bus_bandwidth_bytes_per_s": 1e11, "collectives": {}}}
    })");
    j["kernels"]["grouped_gemm"]["bf16"] = grouped_rows();
    return j;
}

} // namespace

TEST(LogGrid, ExactAtPointsMultilinearInLogBetweenAndEmptyOutside) {
    std::vector<std::vector<double>> rows;
    for (const auto& r : grouped_rows()) rows.push_back(r.get<std::vector<double>>());
    const LogGrid g = LogGrid::from_rows(rows, 4, "t", "groups×m×n×k");
    const double corner[4] = {8, 16, 1024, 256};
    EXPECT_NEAR(*g.at(corner), 8.0 * 16 * 1024 * 256 / 1e12, 1e-18);
    // A product of powers is linear in log space, so the interpolation is exact inside.
    const double inside[4] = {4, 64, 512, 64};
    EXPECT_NEAR(*g.at(inside), 4.0 * 64 * 512 * 64 / 1e12, 1e-15);
    const double outside[4] = {16, 64, 512, 64};
    EXPECT_FALSE(g.at(outside).has_value());
    EXPECT_DOUBLE_EQ(g.front(1), 16.0);
    EXPECT_DOUBLE_EQ(g.back(2), 1024.0);
    rows.pop_back();
    EXPECT_THROW(LogGrid::from_rows(rows, 4, "t", "groups×m×n×k"), SpecError);
}

TEST(GroupedGemm, TableLookupScalingOutsideAndFallbackWithoutATable) {
    const Profile p = Profile::from_json(tiny_with_grouped());
    const Timing in = p.grouped_gemm(Dtype::bf16, 4, 64, 512, 64);
    EXPECT_TRUE(in.fallback.empty());
    EXPECT_NEAR(in.seconds, 4.0 * 64 * 512 * 64 / 1e12, 1e-15);
    // More groups than the table: the edge's time scaled by the group count.
    const Timing many = p.grouped_gemm(Dtype::bf16, 32, 64, 512, 64);
    EXPECT_NEAR(many.seconds, 4 * 8.0 * 64 * 512 * 64 / 1e12, 1e-15);
    EXPECT_NE(many.fallback.find("outside the table"), std::string::npos);
    // Fewer tokens per group than the table: padded to its smallest, never faster.
    EXPECT_NEAR(p.grouped_gemm(Dtype::bf16, 4, 4, 512, 64).seconds, 4.0 * 16 * 512 * 64 / 1e12,
                1e-15);
    // One group is a plain GEMM.
    EXPECT_DOUBLE_EQ(p.grouped_gemm(Dtype::bf16, 1, 256, 256, 256).seconds, 6e-3);
    // Without a table: one GEMM after another, and said.
    Json j = tiny_with_grouped();
    j["kernels"].erase("grouped_gemm");
    const Timing none = Profile::from_json(j).grouped_gemm(Dtype::bf16, 3, 256, 256, 256);
    EXPECT_NEAR(none.seconds, 3 * 6e-3, 1e-15);
    EXPECT_NE(none.fallback.find("no table"), std::string::npos);
}

TEST(GroupedGemm, BadTablesAreRejectedByField) {
    Json j = tiny_with_grouped();
    j["kernels"]["grouped_gemm"]["bf16"].erase(5);
    try {
        Profile::from_json(j);
        FAIL();
    } catch (const SpecError& e) {
        EXPECT_EQ(e.field(), "profile.kernels.grouped_gemm.bf16");
        EXPECT_NE(std::string(e.what()).find("groups×m×n×k grid"), std::string::npos);
    }
    j = tiny_with_grouped();
    j["kernels"]["grouped_gemm"]["fp8"] = grouped_rows(); // no fp8 gemm table beside it
    EXPECT_THROW(Profile::from_json(j), SpecError);
}

// Published grouped-GEMM figures the derivation did not use (its overlap exponent came from TE
// PR #2045): torch._grouped_mm (pytorch/ao PR #2490), the Qwen3-30B-A3B up-projection
// (Knarf04/grouped_gemm, tgale96/grouped_gemm PR #37), DeepGEMM's README (H800, FP8 blockwise).
// The table prices TE's four-stream cuBLAS loop, so it may sit between the loop and a
// single-kernel grouped GEMM; within 35 % of each.
TEST(GroupedGemm, ShippedTablesFollowPublishedMicroBenchmarks) {
    const Profile& h100 = preset("h100-sxm5-80gb");
    EXPECT_NEAR(tflops(h100, Dtype::bf16, 16, 512, 8192, 5120), 522, 0.35 * 522);
    EXPECT_NEAR(tflops(h100, Dtype::bf16, 16, 512, 5120, 8192), 547, 0.35 * 547);
    // Qwen3-30B up_proj forward + both backward GEMMs: 128 experts × 512 tokens, 1536 × 2048.
    const double s = h100.grouped_gemm(Dtype::bf16, 128, 512, 1536, 2048).seconds +
                     h100.grouped_gemm(Dtype::bf16, 128, 512, 2048, 1536).seconds +
                     h100.grouped_gemm(Dtype::bf16, 128, 2048, 1536, 512).seconds;
    const double qwen = 3 * 2.0 * 128 * 512 * 1536 * 2048 / s / 1e12;
    EXPECT_GT(qwen, 0.65 * 388); // the cuBLAS loop
    EXPECT_LT(qwen, 1.35 * 482); // CUTLASS SM90 cooperative
    const Profile& h800 = preset("h800-sxm5-80gb");
    const double blockwise = h800.fp8_gemm_rate("blockwise");
    const auto deepgemm = [&](std::int64_t g, std::int64_t m, std::int64_t n, std::int64_t k) {
        return blockwise * tflops(h800, Dtype::fp8, g, m, n, k);
    };
    EXPECT_NEAR(deepgemm(4, 8192, 4096, 7168), 1297, 0.35 * 1297);
    EXPECT_NEAR(deepgemm(4, 8192, 7168, 2048), 1099, 0.35 * 1099);
    EXPECT_NEAR(deepgemm(2, 512, 4096, 7168), 1040, 0.35 * 1040);
    EXPECT_NEAR(deepgemm(4, 256, 4096, 7168), 932, 0.35 * 932);
}

// Few tokens per expert is what makes fine-grained experts slow: at 128 per group a grouped
// GEMM runs well below its efficiency at 4096, on every shipped device.
TEST(GroupedGemm, EfficiencyFallsWithTokensPerExpert) {
    for (const auto& name : preset_names(PresetKind::profile)) {
        const Profile& p = preset(name);
        const double small = tflops(p, Dtype::bf16, 32, 128, 2048, 2048);
        const double large = tflops(p, Dtype::bf16, 32, 4096, 2048, 2048);
        EXPECT_LT(small, 0.75 * large) << name;
        EXPECT_LT(large, p.peak_flops_per_s(Dtype::bf16) / 1e12) << name;
        // One grouped kernel over 32 experts is never slower than 32 GEMMs one after another.
        EXPECT_LE(p.grouped_gemm(Dtype::bf16, 32, 128, 2048, 2048).seconds,
                  32 * p.gemm(Dtype::bf16, 128, 2048, 2048).seconds * 1.0001)
            << name;
    }
}
