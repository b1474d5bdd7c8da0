// The derived GEMM tables against the published per-shape measurements they are fitted to
// (profiles/tools/gemm_measurements.py): what real shapes sustain, not a sweep's best shape.
// Training-sized shapes only (the tile model is coarser for GEMMs of a few microseconds).
#include "trident/core/presets.h"
#include "trident/core/profile.h"
#include "trident/core/spec_error.h"

#include <gtest/gtest.h>

using namespace trident::core;

namespace {

Profile preset(const std::string& name) {
    return Profile::from_json(resolve_reference(name, PresetKind::profile, "profile"));
}

double tflops(const Profile& p, Dtype d, std::int64_t m, std::int64_t n, std::int64_t k) {
    return 2.0 * double(m) * double(n) * double(k) / p.gemm(d, m, n, k).seconds / 1e12;
}

struct Measured {
    const char* profile;
    Dtype dtype;
    std::int64_t m, n, k;
    double tflops;
    const char* source;
};

} // namespace

TEST(GemmRates, TablesGiveThePublishedRatesOfRealShapes) {
    const double flux_h800 = 2.0 * 4096 * 6144 * 12288 / 0.846e-3 / 1e12; // 731
    const double flux_a800 = 2.0 * 4096 * 6144 * 12288 / 2.438e-3 / 1e12; // 254
    const double grace = 1822.0 / 1745.0; // GB200 over B200 (MAMF), carried to GB300 from B300
    const Measured rows[] = {
        {"a100-sxm4-80gb", Dtype::bf16, 4096, 6144, 12288, flux_a800, "bytedance/flux A800"},
        {"h100-sxm5-80gb", Dtype::bf16, 4096, 6144, 12288, flux_h800, "bytedance/flux H800"},
        {"h100-sxm5-80gb", Dtype::fp8, 8192, 8192, 8192, 1290.1, "Azure ND H100 v5"},
        {"h100-sxm5-80gb", Dtype::fp8, 16384, 16384, 16384, 1377.3, "Azure ND H100 v5"},
        {"h100-sxm5-80gb", Dtype::fp8, 6144, 12288, 12288, 1351.4, "Azure ND H100 v5"},
        {"h200-sxm-141gb", Dtype::fp8, 8192, 8192, 8192, 1300.6, "Azure ND H200 v5"},
        {"b200-sxm-180gb", Dtype::bf16, 4096, 4096, 4096, 1410.0, "pytorch/ao PR #2427"},
        {"b200-sxm-180gb", Dtype::bf16, 8192, 8192, 8192, 1420.0, "pytorch/ao PR #2427"},
        {"b200-sxm-180gb", Dtype::bf16, 2048, 4096, 4096, 1444.4, "vllm PR #19566"},
        {"b200-sxm-180gb", Dtype::fp8, 15360, 4096, 3072, 3432.5, "MAMF"},
        {"gb200-186gb", Dtype::fp8, 4096, 4096, 4096, 2834.6, "Azure ND GB200 v6"},
        {"gb200-186gb", Dtype::fp8, 8192, 8192, 8192, 2876.6, "Azure ND GB200 v6"},
        {"gb300-288gb", Dtype::bf16, 15872, 16384, 4096,
         grace * 2.0 * 15872 * 16384 * 4096 / 1.393e-3 / 1e12, "TE GEMM profiling guide, B300"},
        {"gb300-288gb", Dtype::bf16, 15872, 4096, 16384,
         grace * 2.0 * 15872 * 4096 * 16384 / 1.426e-3 / 1e12, "TE GEMM profiling guide, B300"},
    };
    for (const Measured& r : rows) {
        const double rate = tflops(preset(r.profile), r.dtype, r.m, r.n, r.k);
        EXPECT_NEAR(rate, r.tflops, 0.12 * r.tflops)
            << r.profile << " " << r.m << "x" << r.n << "x" << r.k << " (" << r.source << ")";
    }
}

TEST(GemmRates, LargeShapesLevelOffBelowTheBestASweepFinds) {
    // MAMF is the best of thousands of shapes (H100 BF16 794.5 TFLOP/s); shapes that fill the
    // GPU for long run at the clock its power limit holds, below it.
    const Profile h100 = preset("h100-sxm5-80gb");
    EXPECT_LE(tflops(h100, Dtype::bf16, 16384, 16384, 16384), 794.5);
    EXPECT_LE(tflops(h100, Dtype::fp8, 16384, 16384, 16384), 1402.6);
    const Profile b200 = preset("b200-sxm-180gb");
    const double big = tflops(b200, Dtype::bf16, 16384, 16384, 16384);
    EXPECT_LE(big, 1745.0);
    // A plateau (ao PR #2427 measures 1410-1450 from 4096³ to 8192³), not a climb to the peak.
    EXPECT_LE(big, 1.05 * tflops(b200, Dtype::bf16, 8192, 8192, 8192));
}

TEST(GemmRates, Fp16UsesTheBf16TablesOfAProfileWithoutFp16Ones) {
    // One tensor-core rate for FP16 and BF16 (the datasheets): a BF16-measured profile times an
    // FP16 job with its BF16 tables; a dtype with no table of its own kind still fails.
    const Profile a100 = preset("a100-sxm4-80gb");
    EXPECT_DOUBLE_EQ(a100.gemm(Dtype::fp16, 4096, 4096, 4096).seconds,
                     a100.gemm(Dtype::bf16, 4096, 4096, 4096).seconds);
    EXPECT_DOUBLE_EQ(a100.peak_flops_per_s(Dtype::fp16), a100.peak_flops_per_s(Dtype::bf16));
    EXPECT_THROW(a100.gemm(Dtype::fp4, 4096, 4096, 4096), SpecError);
}
