// Sizes and FLOP rates for people: the unit that fits the figure.
#include "trident/core/units.h"

#include <gtest/gtest.h>

using namespace trident::core;

TEST(Units, BytesTakeTheBinaryUnitThatFits) {
    EXPECT_EQ(bytes_text(0), "0 B");
    EXPECT_EQ(bytes_text(512), "512 B");
    EXPECT_EQ(bytes_text(1024), "1.0 KiB");
    EXPECT_EQ(bytes_text(47267840), "45.1 MiB");
    EXPECT_EQ(bytes_text(72.0 * kGiB), "72.0 GiB");
    EXPECT_EQ(bytes_text(3.5 * kGiB * 1024), "3.5 TiB");
    EXPECT_EQ(bytes_text(1.5 * kGiB, 2), "1.50 GiB");
    EXPECT_STREQ(byte_unit(5.1 * 1048576).name, "MiB");
}

TEST(Units, FlopRatesTakeTheDecimalUnitThatFits) {
    EXPECT_EQ(flop_rate_text(8.4e10), "84.0 GFLOP/s");
    EXPECT_EQ(flop_rate_text(1.632e14), "163.2 TFLOP/s");
    EXPECT_EQ(flop_rate_text(2.25e15), "2.2 PFLOP/s");
    EXPECT_EQ(flop_rate_text(3.9e7), "39.0 MFLOP/s");
    EXPECT_EQ(in_unit(3.9e10, flop_rate_unit(2e12)), "0.0 TFLOP/s"); // a column's unit
}
