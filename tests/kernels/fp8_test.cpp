// FP8 quantize → dequantize: the representable grids of E4M3 and E5M2 (OCP FP8 spec, Micikevicius
// et al. 2022, Table 1), ties to even, saturation, subnormals, and block scales.
#include "trident/kernels/fp8.h"

#include <cmath>
#include <gtest/gtest.h>
#include <limits>
#include <vector>

using namespace trident::kernels::cpu;

TEST(Fp8, RoundsToTheE4M3Grid) {
    EXPECT_EQ(fp8_max(Fp8Kind::e4m3), 448.0f);
    EXPECT_EQ(fp8_round(1.0f, Fp8Kind::e4m3), 1.0f);
    EXPECT_EQ(fp8_round(0.1f, Fp8Kind::e4m3), 0.1015625f); // 1.625 · 2^-4
    EXPECT_EQ(fp8_round(-3.3f, Fp8Kind::e4m3), -3.25f);    // step 0.25 in [2, 4)
    EXPECT_EQ(fp8_round(1.0625f, Fp8Kind::e4m3), 1.0f);    // halfway: to the even mantissa
    EXPECT_EQ(fp8_round(1.1875f, Fp8Kind::e4m3), 1.25f);   // halfway the other way
    EXPECT_EQ(fp8_round(447.0f, Fp8Kind::e4m3), 448.0f);
    EXPECT_EQ(fp8_round(1000.0f, Fp8Kind::e4m3), 448.0f); // saturates, no infinity
    EXPECT_EQ(fp8_round(-1e9f, Fp8Kind::e4m3), -448.0f);
    // Subnormals: multiples of 2^-9 below 2^-6; half the smallest rounds to zero (even).
    EXPECT_EQ(fp8_round(std::ldexp(3.0f, -9), Fp8Kind::e4m3), std::ldexp(3.0f, -9));
    EXPECT_EQ(fp8_round(std::ldexp(1.0f, -10), Fp8Kind::e4m3), 0.0f);
    EXPECT_EQ(fp8_round(std::ldexp(1.5f, -10), Fp8Kind::e4m3), std::ldexp(1.0f, -9));
    EXPECT_TRUE(std::isnan(fp8_round(std::numeric_limits<float>::quiet_NaN(), Fp8Kind::e4m3)));
}

TEST(Fp8, RoundsToTheE5M2Grid) {
    EXPECT_EQ(fp8_max(Fp8Kind::e5m2), 57344.0f);
    EXPECT_EQ(fp8_round(0.1f, Fp8Kind::e5m2), 0.09375f); // 1.5 · 2^-4: two mantissa bits
    EXPECT_EQ(fp8_round(1.125f, Fp8Kind::e5m2), 1.0f);   // halfway between 1 and 1.25: even
    EXPECT_EQ(fp8_round(60000.0f, Fp8Kind::e5m2), 57344.0f);
    EXPECT_EQ(fp8_round(std::ldexp(1.0f, -16), Fp8Kind::e5m2), std::ldexp(1.0f, -16));
    EXPECT_EQ(fp8_round(std::ldexp(1.0f, -18), Fp8Kind::e5m2), 0.0f);
}

TEST(Fp8, EveryGridValueIsAFixedPoint) {
    // All 126 positive finite E4M3 values are their own rounding, and lie between neighbours.
    int count = 0;
    for (int e = -6; e <= 8; ++e)
        for (int m = 0; m < 8; ++m) {
            const float v = std::ldexp(1.0f + m / 8.0f, e);
            if (v > 448.0f) continue;
            EXPECT_EQ(fp8_round(v, Fp8Kind::e4m3), v);
            ++count;
        }
    for (int m = 1; m < 8; ++m) { // subnormals
        EXPECT_EQ(fp8_round(std::ldexp(float(m), -9), Fp8Kind::e4m3), std::ldexp(float(m), -9));
        ++count;
    }
    EXPECT_EQ(count, 126);
}

TEST(Fp8, ScaledQuantizationKeepsRelativeErrorWithinHalfAStep) {
    std::vector<float> x(1000), q(1000);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * float(i)) * 1e-3f;
    const float amax = abs_max(x.data(), 1000);
    const float scale = fp8_scale(amax, Fp8Kind::e4m3);
    fake_quantize(q.data(), x.data(), 1000, scale, Fp8Kind::e4m3);
    for (std::size_t i = 0; i < x.size(); ++i) {
        // Normal range after scaling: relative error at most 2^-4 (half of 3 mantissa bits).
        if (std::fabs(x[i]) * scale >= std::ldexp(1.0f, -6)) {
            EXPECT_LE(std::fabs(q[i] - x[i]), std::ldexp(1.0f, -4) * std::fabs(x[i]) + 1e-12f) << i;
        }
    }
    EXPECT_EQ(abs_max(q.data(), 1000), amax); // the largest maps to 448 exactly and back
    EXPECT_EQ(fp8_scale(0.0f, Fp8Kind::e4m3), 1.0f);
    // A tiny amax would overflow max / amax: the scale stays finite, zeros stay zeros.
    const float tiny = 1e-38f, huge_scale = fp8_scale(tiny, Fp8Kind::e4m3);
    EXPECT_TRUE(std::isfinite(huge_scale));
    float zero_and_tiny[2] = {0.0f, tiny};
    fake_quantize(zero_and_tiny, zero_and_tiny, 2, huge_scale, Fp8Kind::e4m3);
    EXPECT_EQ(zero_and_tiny[0], 0.0f);
    EXPECT_GT(zero_and_tiny[1], 0.0f);
}

TEST(Fp8, BlocksTakeTheirOwnScales) {
    // Two 1×4 blocks of one row: a large value in the first block does not coarsen the second.
    const std::vector<float> x = {1000.0f, 1.0f, 0.0f, 0.0f, 0.0013f, 0.0011f, 0.0f, 0.0f};
    std::vector<float> blocks(8), whole(8);
    fake_quantize_blocks(blocks.data(), x.data(), 1, 8, 1, 4, Fp8Kind::e4m3);
    fake_quantize_blocks(whole.data(), x.data(), 1, 8, 1, 8, Fp8Kind::e4m3);
    EXPECT_NEAR(blocks[4], 0.0013f, 0.0013f / 16);
    EXPECT_NEAR(blocks[5], 0.0011f, 0.0011f / 16);
    EXPECT_FLOAT_EQ(blocks[0], 1000.0f);
    // One scale for the whole row: 0.0013 · 448/1000 is under half the smallest subnormal.
    EXPECT_EQ(whole[4], 0.0f);
    EXPECT_EQ(whole[5], 0.0f);
    // 2-D tiles: a 3×3 matrix in 2×2 tiles has four scales, edges clipped. Each tile's
    // largest value maps to 448 and back exactly, and so do values at a power-of-two ratio.
    std::vector<float> m = {1, 2, 100, 3, 4, 200, 0.5f, 0.25f, 0.125f}, out(9);
    fake_quantize_blocks(out.data(), m.data(), 3, 3, 2, 2, Fp8Kind::e4m3);
    for (std::size_t i : {1u, 2u, 4u, 5u, 6u, 7u, 8u}) EXPECT_EQ(out[i], m[i]) << i;
    EXPECT_NEAR(out[3], 3.0f, 3.0f / 16); // 336 on the 448 scale: a tie, rounded to 320
    EXPECT_NE(out[3], 3.0f);
}

TEST(Fp8, MxScalesArePowersOfTwoRoundedUp) {
    // 448 fits E4M3 at scale 1; anything above needs the next power of two.
    EXPECT_EQ(mx_decode_scale(448.0f, Fp8Kind::e4m3), 1.0f);
    EXPECT_EQ(mx_decode_scale(449.0f, Fp8Kind::e4m3), 2.0f);
    EXPECT_EQ(mx_decode_scale(224.0f, Fp8Kind::e4m3), 0.5f);
    EXPECT_EQ(mx_decode_scale(300.0f, Fp8Kind::e4m3), 1.0f);
    EXPECT_EQ(mx_decode_scale(57344.0f * 4, Fp8Kind::e5m2), 4.0f);
    EXPECT_EQ(mx_decode_scale(0.0f, Fp8Kind::e4m3), 1.0f);
    // E8M0 holds 2^-127 … 2^127.
    EXPECT_EQ(mx_decode_scale(1e-45f, Fp8Kind::e4m3), std::ldexp(1.0f, -127));
}

TEST(Fp8, MxBlocksRunAlongTheContraction) {
    // A 32 × 64 matrix: row 0 holds one large value in its first 32 columns, so contracting
    // over columns (1×32 blocks) only that block is coarse; contracting over rows (32×1
    // blocks) it coarsens its column only.
    const std::int64_t rows = 32, cols = 64;
    std::vector<float> x(static_cast<std::size_t>(rows * cols));
    for (std::int64_t i = 0; i < rows * cols; ++i) x[std::size_t(i)] = 0.001f * float(1 + i % 7);
    x[0] = 1000.0f;
    std::vector<float> by_row(x.size()), by_column(x.size());
    fake_quantize_mx(by_row.data(), x.data(), rows, cols, false, Fp8Kind::e4m3);
    fake_quantize_mx(by_column.data(), x.data(), rows, cols, true, Fp8Kind::e4m3);
    // Largest values keep their 3 mantissa bits: 1000 → 1024 (step 64 at scale 4: 250 → 256).
    EXPECT_EQ(by_row[0], 1024.0f);
    EXPECT_EQ(by_column[0], 1024.0f);
    // Row 0's first block at scale 4: 0.002 is under half E4M3's smallest subnormal · 4.
    EXPECT_EQ(by_row[1], 0.0f);
    EXPECT_NEAR(by_row[32], x[32], x[32] / 16); // row 0's second block: its own scale
    EXPECT_NEAR(by_row[cols + 1], x[std::size_t(cols + 1)], x[std::size_t(cols + 1)] / 16);
    // Column 0 shares the coarse scale (row 1's value lost), column 1 does not.
    EXPECT_EQ(by_column[std::size_t(cols)], 0.0f);
    EXPECT_NEAR(by_column[1], x[1], x[1] / 16);
    // Every value is an E4M3 value times its block's power of two: quantizing again changes
    // nothing.
    std::vector<float> again(x.size());
    fake_quantize_mx(again.data(), by_row.data(), rows, cols, false, Fp8Kind::e4m3);
    EXPECT_EQ(again, by_row);
    // A NaN stays in its block.
    x[5] = std::nanf("");
    fake_quantize_mx(by_row.data(), x.data(), rows, cols, false, Fp8Kind::e4m3);
    EXPECT_TRUE(std::isnan(by_row[5]));
    EXPECT_FALSE(std::isnan(by_row[32]));
}
