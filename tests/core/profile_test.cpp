// Profile lookups: exact at table points, interpolated between them, named fallbacks outside,
// and clear errors for what a profile lacks.
#include "trident/core/presets.h"
#include "trident/core/profile.h"
#include "trident/core/spec_error.h"

#include <cmath>
#include <gtest/gtest.h>

using namespace trident::core;

namespace {

const Profile& a100() {
    static const Profile p =
        Profile::from_json(resolve_reference("a100-sxm4-80gb", PresetKind::profile, "profile"));
    return p;
}

// A tiny hand-written profile: every value known.
Json tiny() {
    return Json::parse(R"({
      "format": "trident.profile/1", "name": "tiny",
      "provenance": {"kind": "derived", "method": "test"},
      "device": {"peak_flops_per_s": {"bf16": 1.0e12}, "memory_bytes": 1.0e9,
                 "memory_bandwidth_bytes_per_s": 1.0e11},
      "kernels": {
        "gemm": {"bf16": [[256,256,256,1e-3],[256,256,1024,4e-3],[256,1024,256,4e-3],[256,1024,1024,16e-3],
                          [1024,256,256,4e-3],[1024,256,1024,16e-3],[1024,1024,256,16e-3],[1024,1024,1024,64e-3]]},
        "attention": {"bf16": [[1,128,64,1,1e-5,2.5e-5],[1,512,64,1,1.6e-4,4e-4],
                               [4,128,64,1,4e-5,1e-4],[4,512,64,1,6.4e-4,1.6e-3]]},
        "memory_bound": {"layernorm": [[1000,1e-6],[1000000,1e-5]]}
      },
      "fabrics": {"nvlink": {"alpha_s": 1e-6, "bus_bandwidth_bytes_per_s": 1e11,
                  "collectives": {"all_reduce": [[2,1000,1e-5],[2,1000000,1e-4],[8,1000,4e-5],[8,1000000,4e-4]]}}}
    })");
}

} // namespace

TEST(Profile, ExactAtTablePointsAndInterpolatedBetween) {
    const Profile p = Profile::from_json(tiny());
    EXPECT_NEAR(p.gemm(Dtype::bf16, 256, 256, 256).seconds, 1e-3, 1e-15);
    EXPECT_TRUE(p.gemm(Dtype::bf16, 256, 256, 256).fallback.empty());
    // Halfway in log(k) between 4e-3 and 16e-3 is their geometric mean.
    const Timing mid = p.gemm(Dtype::bf16, 1024, 256, 512);
    EXPECT_NEAR(mid.seconds, 8e-3, 1e-12);
    EXPECT_TRUE(mid.fallback.empty());
    EXPECT_NEAR(p.attention(Dtype::bf16, 2, 256, 64, true, false).seconds,
                std::sqrt(std::sqrt(1e-5 * 1.6e-4 * 4e-5 * 6.4e-4)), 1e-12);
    EXPECT_NEAR(p.memory_bound(MemoryKernel::layernorm, std::sqrt(1e9)).seconds, std::sqrt(1e-11),
                1e-15);
    // Group 4 lies halfway between 2 and 8 in log(group).
    EXPECT_NEAR(p.collective("nvlink", Collective::all_reduce, 4, 1000).seconds, 2e-5, 1e-15);
}

TEST(Profile, OutsideTheTableFallsBackAndSaysSo) {
    const Profile p = Profile::from_json(tiny());
    const Timing big = p.gemm(Dtype::bf16, 4096, 4096, 4096);
    EXPECT_FALSE(big.fallback.empty());
    // Roofline at the table's best efficiency: the 1024³ GEMM ran at 2·1024³/64e-3 FLOP/s.
    EXPECT_NEAR(big.seconds, 64e-3 * 64, 1e-9);
    const Timing attention = p.attention(Dtype::bf16, 16, 512, 64, true, false);
    EXPECT_FALSE(attention.fallback.empty());
    EXPECT_NEAR(attention.seconds, 4 * 6.4e-4, 1e-12); // FLOP-scaled from batch_heads 4
    const Timing wide = p.collective("nvlink", Collective::all_reduce, 16, 1000);
    EXPECT_NE(wide.fallback.find("alpha-beta"), std::string::npos);
    // α–β: 2(n−1)·α + 2(n−1)/n · bytes / busbw.
    EXPECT_NEAR(wide.seconds, 30 * 1e-6 + 2.0 * 15 / 16 * 1000 / 1e11, 1e-15);
    EXPECT_FALSE(p.memory_bound(MemoryKernel::layernorm, 1e8).fallback.empty());
}

TEST(Profile, MissingEntriesAreErrorsNotZeros) {
    const Profile p = Profile::from_json(tiny());
    EXPECT_THROW(p.gemm(Dtype::fp32, 256, 256, 256), SpecError);
    EXPECT_THROW(p.memory_bound(MemoryKernel::adamw, 1000), SpecError);
    EXPECT_THROW(p.collective("infiniband", Collective::all_reduce, 2, 1000), SpecError);
    EXPECT_THROW(p.attention(Dtype::bf16, 1, 128, 64, false, false),
                 SpecError); // no non-causal rows
    EXPECT_THROW(p.peak_flops_per_s(Dtype::fp8), SpecError);
    // FP16 is BF16's rate (find_rate_table), never a zero.
    EXPECT_DOUBLE_EQ(p.peak_flops_per_s(Dtype::fp16), p.peak_flops_per_s(Dtype::bf16));
}

TEST(Profile, GridHolesAndBadRowsAreRejected) {
    Json j = tiny();
    j["kernels"]["gemm"]["bf16"].erase(3);
    try {
        Profile::from_json(j);
        FAIL();
    } catch (const SpecError& e) {
        EXPECT_EQ(e.field(), "profile.kernels.gemm.bf16");
    }
    j = tiny();
    j["kernels"]["memory_bound"]["layernorm"][0][1] = -1.0;
    EXPECT_THROW(Profile::from_json(j), SpecError);
    j = tiny();
    j["provenance"]["kind"] = "guessed";
    EXPECT_THROW(Profile::from_json(j), SpecError);
}

TEST(Profile, ShippedProfilesAreDerivedAndSane) {
    for (const auto& name : preset_names(PresetKind::profile)) {
        const Profile p =
            Profile::from_json(resolve_reference(name, PresetKind::profile, "profile"));
        EXPECT_EQ(p.provenance().kind, "derived") << name;
        EXPECT_FALSE(p.provenance().sources.empty()) << name;
        // A large GEMM runs at 60-95 % of peak, never above it.
        const double t = p.gemm(Dtype::bf16, 8192, 8192, 8192).seconds;
        const double efficiency = 2.0 * 8192.0 * 8192 * 8192 / t / p.peak_flops_per_s(Dtype::bf16);
        EXPECT_GT(efficiency, 0.6) << name;
        EXPECT_LT(efficiency, 0.95) << name;
        // nccl-tests busbw of a 1 GiB all-reduce over 8 GPUs on NVLink: 150 GB/s to below the
        // fastest NVLink's 900 GB/s per direction (NVLink 5).
        const double bytes = 1 << 30;
        const double busbw = bytes /
                             p.collective("nvlink", Collective::all_reduce, 8, bytes).seconds *
                             bus_bandwidth_factor(Collective::all_reduce, 8);
        EXPECT_GT(busbw, 150e9) << name;
        EXPECT_LT(busbw, 900e9) << name;
    }
    // Bigger GEMMs never take less time.
    EXPECT_LE(a100().gemm(Dtype::bf16, 4096, 4096, 4096).seconds,
              a100().gemm(Dtype::bf16, 4096, 4096, 6000).seconds);
}
