// The distributed optimizer's slices beside experts and the checkpoint shard that records them:
// each set's slices tile its elements across the group's ranks with nothing twice and nothing
// left out; pack/unpack and the moment index agree with hand-worked cases; a shard with
// several moment runs reads back as written, and a version-1 shard (one moment begin) still
// reads.
#include "../../executor/src/checkpoint_shard.h"
#include "../../executor/src/sharded_sets.h"
#include "trident/core/spec_error.h"

#include <cstring>
#include <gtest/gtest.h>

namespace trident::executor {
namespace {

// Dense a[5], expert b[3], dense c[4], expert d[2]: flat 0..13.
ParameterStore interleaved() {
    ParameterStore s;
    s.add("a", 5, {.decay = true});
    s.add("b", 3, {.decay = true, .expert = true});
    s.add("c", 4, {});
    s.add("d", 2, {.decay = true, .expert = true});
    s.values.assign(s.values.size(), 0.0f);
    for (std::size_t i = 0; i < s.values.size(); ++i) s.values[i] = float(i);
    return s;
}

TEST(ShardedSets, SlicesTileEachSetOverItsRanks) {
    const ParameterStore store = interleaved();
    ASSERT_EQ(store.values.size(), 14u);
    for (bool experts : {false, true})
        for (std::int64_t ranks : {1, 2, 3, 4}) {
            std::vector<int> seen(14, 0);
            for (std::int64_t r = 0; r < ranks; ++r) {
                const ShardedSet s = sharded_set(store, experts, ranks, r);
                std::int64_t n = 0;
                for (const FlatRun& run : s.owned()) {
                    for (std::int64_t i = run.begin; i < run.begin + run.length; ++i) ++seen[i];
                    n += run.length;
                }
                EXPECT_EQ(n, s.owned_elements());
            }
            for (std::int64_t i = 0; i < 14; ++i) {
                const bool expert = (i >= 5 && i < 8) || i >= 12;
                EXPECT_EQ(seen[std::size_t(i)], expert == experts ? 1 : 0)
                    << "element " << i << " experts " << experts << " ranks " << ranks;
            }
        }
    // Dense over 2 ranks: a0..a4 c0..c3 (9 elements) in slices of 5; rank 1 owns c0..c3.
    const ShardedSet dense1 = sharded_set(store, false, 2, 1);
    EXPECT_EQ(dense1.slice, 5);
    ASSERT_EQ(dense1.owned(), (std::vector<FlatRun>{{8, 4}}));
    std::vector<float> packed(10, -1.0f);
    dense1.pack(store.values.data(), packed.data());
    EXPECT_EQ(packed, (std::vector<float>{0, 1, 2, 3, 4, 8, 9, 10, 11, 0}));
    std::vector<float> mine(5, -1.0f);
    dense1.pack_owned(store.values.data(), mine.data());
    EXPECT_EQ(mine, (std::vector<float>{8, 9, 10, 11, 0}));
    std::vector<float> flat(14, -1.0f);
    dense1.unpack(packed.data(), flat.data());
    EXPECT_EQ(flat, (std::vector<float>{0, 1, 2, 3, 4, -1, -1, -1, 8, 9, 10, 11, -1, -1}));
}

TEST(ShardedSets, AdamRunsFollowTheOwnedOrder) {
    const ParameterStore store = interleaved();
    OptimizerShard s;
    // Rank 0 of 2 for the dense set (a0..a4), then rank 0 of 1 for the experts (b, d).
    for (const auto& set : {sharded_set(store, false, 2, 0), sharded_set(store, true, 1, 0)})
        for (const FlatRun& r : set.owned()) s.owned.push_back(r);
    add_optimizer_runs(store, 0, s);
    // Owned order: a (flat 0..4), b (5..7), d (12..13); a and b are contiguous in both orders
    // and both decayed, so they merge; d starts a new run at owned 8.
    ASSERT_EQ(s.decay_runs.size(), 2u);
    EXPECT_EQ(s.decay_runs[0].begin, 0);
    EXPECT_EQ(s.decay_runs[0].end, 8);
    EXPECT_EQ(s.decay_runs[1].begin, 8);
    EXPECT_EQ(s.decay_runs[1].end, 10);
    EXPECT_EQ(s.decay_runs[1].flat, 12);
    ASSERT_EQ(s.norm_runs.size(), 3u);
    EXPECT_FALSE(s.norm_runs[0].flag);
    EXPECT_TRUE(s.norm_runs[1].flag);
    EXPECT_TRUE(s.norm_runs[2].flag);
}

TEST(CheckpointShard, SeveralMomentRunsRoundTripAndVersionOneStillReads) {
    ParameterStore store = interleaved();
    std::vector<float> m = {1, 2, 3, 4, 5, 6}, v = {6, 5, 4, 3, 2, 1};
    std::int64_t skipped = 2;
    TrainerState state{store.values, m, v, {{8, 4}, {12, 2}}, &skipped, &store};
    const auto bytes = checkpoint_detail::serialize_shard(3, 7, state);
    const checkpoint_detail::Shard shard = checkpoint_detail::parse_shard(bytes, "x");
    EXPECT_EQ(shard.moment_runs, state.moment_runs);
    EXPECT_EQ(shard.adam_m, m);
    const checkpoint_detail::MomentIndex index(shard.moment_runs);
    EXPECT_EQ(index.of(7), -1);
    EXPECT_EQ(index.of(8), 0);
    EXPECT_EQ(index.of(11), 3);
    EXPECT_EQ(index.of(12), 4);
    EXPECT_EQ(index.of(13), 5);
    // Moments claimed beyond the parameters are refused.
    TrainerState bad = state;
    bad.moment_runs = {{8, 4}, {13, 2}};
    EXPECT_THROW(checkpoint_detail::parse_shard(checkpoint_detail::serialize_shard(3, 7, bad), "x"),
                 core::SpecError);
    // Version 1: the same bytes with the version word 1 and one i64 begin for the runs.
    TrainerState one{store.values,
                     std::span<float>(m).first(4),
                     std::span<float>(v).first(4),
                     {{8, 4}},
                     &skipped,
                     &store};
    std::vector<std::uint8_t> v2 = checkpoint_detail::serialize_shard(0, 1, one);
    const auto append = [](std::vector<std::uint8_t>& out, const void* data, std::size_t n) {
        const std::size_t at = out.size();
        out.resize(at + n);
        std::memcpy(out.data() + at, data, n);
    };
    // v2 ends with the moment runs (count + one run), the parameters (14), m and v (4 each).
    const std::size_t table_end = v2.size() - (8 + 16) - (8 + 14 * 4) - 2 * (8 + 4 * 4);
    std::vector<std::uint8_t> v1;
    append(v1, v2.data(), 8); // the magic
    const std::uint32_t version1 = 1;
    append(v1, &version1, 4);
    append(v1, v2.data() + 12, table_end - 12); // rank … tensor table
    const std::int64_t begin = 8;
    append(v1, &begin, 8);
    append(v1, v2.data() + table_end + 24, v2.size() - table_end - 24);
    const checkpoint_detail::Shard old = checkpoint_detail::parse_shard(v1, "v1");
    EXPECT_EQ(old.moment_runs, (std::vector<FlatRun>{{8, 4}}));
    EXPECT_EQ(old.adam_v, (std::vector<float>{6, 5, 4, 3}));
}

} // namespace
} // namespace trident::executor
