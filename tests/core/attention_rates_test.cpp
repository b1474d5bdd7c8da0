// The Blackwell attention tables against the published per-shape measurements they were not
// derived from: the B200 profile models FlashAttention-4-class kernels from one anchor (head
// dim 128, sequence 8192, non-causal), and here follows the FA4 paper's whole sweep — forward
// and backward, causal and not, sequences 1K to 32K (arXiv 2603.05451, figures fa4_{fwd,bwd}_
// {noncausal,causal}_hdim128; hidden 2048 = 16 heads of 128, batch = 32K tokens / sequence).
#include "trident/core/presets.h"
#include "trident/core/profile.h"
#include "trident/core/step_numbers.h"

#include <cmath>
#include <gtest/gtest.h>
#include <vector>

using namespace trident::core;

TEST(AttentionRates, B200FollowsFlashAttention4sPublishedSweep) {
    const Profile b200 =
        Profile::from_json(resolve_reference("b200-sxm-180gb", PresetKind::profile, "profile"));
    struct Row {
        bool causal, backward;
        double tflops[6]; // sequences 1K, 2K, 4K, 8K, 16K, 32K
    };
    const Row fa4[] = {{false, false, {1355, 1468, 1532, 1579, 1601, 1613}},
                       {true, false, {744, 1053, 1279, 1426, 1526, 1576}},
                       {false, true, {936, 1166, 1331, 1430, 1457, 1412}},
                       {true, true, {614, 887, 1102, 1284, 1402, 1446}}};
    std::vector<double> errors;
    for (const Row& row : fa4)
        for (int i = 0; i < 6; ++i) {
            const std::int64_t seq = 1024LL << i, batch_heads = 16 * (32768 / seq);
            const double flops = 4.0 * double(batch_heads) * double(seq) * double(seq) * 128.0 *
                                 (row.causal ? 0.5 : 1.0) * (row.backward ? 2.5 : 1.0);
            const double modelled =
                flops /
                b200.attention(Dtype::bf16, batch_heads, seq, 128, row.causal, row.backward)
                    .seconds /
                1e12;
            const double error = modelled / row.tflops[i] - 1.0;
            EXPECT_LT(std::abs(error), 0.20) << (row.causal ? "causal" : "non-causal")
                                             << (row.backward ? " backward" : " forward") << " at "
                                             << seq << ": " << modelled << " TFLOP/s";
            errors.push_back(std::abs(error));
        }
    EXPECT_LT(median(errors), 0.07);
}
