#include "trident/core/rank_grid.h"
#include "trident/core/spec_error.h"

#include <algorithm>
#include <gtest/gtest.h>
#include <set>

using namespace trident::core;

namespace {
ParallelPlan plan(std::int64_t tp, std::int64_t cp, std::int64_t dp, std::int64_t pp,
                  std::int64_t ep = 1) {
    ParallelPlan p;
    p.tp = tp;
    p.cp = cp;
    p.dp = dp;
    p.pp = pp;
    p.ep = ep;
    return p;
}
using Groups = std::vector<std::vector<std::int64_t>>;
} // namespace

TEST(RankGrid, MegatronDocumentationExample) {
    // Megatron-LM's initialize_model_parallel docstring: 16 GPUs, tp 2, pp 4 (so dp 2).
    const RankGrid g(plan(2, 1, 2, 4));
    EXPECT_EQ(g.groups(GroupKind::tensor),
              (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}}));
    EXPECT_EQ(g.groups(GroupKind::data),
              (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}}));
    EXPECT_EQ(g.groups(GroupKind::pipeline),
              (Groups{{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15}}));
    EXPECT_EQ(g.groups(GroupKind::embedding), (Groups{{0, 12}, {1, 13}, {2, 14}, {3, 15}}));
    EXPECT_TRUE(g.group_of(GroupKind::embedding, 5).empty());
}

TEST(RankGrid, CoordinatesRoundTrip) {
    const RankGrid g(plan(2, 2, 3, 2, 3));
    for (std::int64_t r = 0; r < g.world_size(); ++r) {
        const RankCoord c = g.coord(r);
        EXPECT_EQ(g.rank(c.tp, c.cp, c.dp, c.pp), r);
        EXPECT_EQ(c.cp + 2 * c.dp, c.ep + 3 * c.edp); // same cp·dp index in both views
    }
}

TEST(RankGrid, EveryKindPartitionsTheRanks) {
    // cp·dp = 8 ranks per stage, ep 2 (expert-dp 4), in 2 hybrid-sharding replicas.
    ParallelPlan hybrid = plan(2, 2, 4, 3, 2);
    hybrid.sharding.instances = 2;
    // Folded experts: 16 ranks a stage as etp 1 × ep 8 × expert-dp 2, or etp 2 × ep 4 × 2.
    ParallelPlan folded = plan(2, 2, 4, 3, 8), halves = plan(4, 1, 4, 3, 4);
    folded.etp = 1;
    halves.etp = 2;
    halves.sharding.instances = 2;
    for (const RankGrid& g :
         {RankGrid(plan(2, 2, 4, 3, 4)), RankGrid(hybrid), RankGrid(folded), RankGrid(halves)})
        for (std::size_t k = 0; k < kGroupKindNames.size(); ++k) {
            const auto kind = static_cast<GroupKind>(k);
            if (kind == GroupKind::embedding) continue; // covers first and last stage only
            std::multiset<std::int64_t> seen;
            for (const auto& group : g.groups(kind)) {
                seen.insert(group.begin(), group.end());
                for (auto r : group) EXPECT_EQ(g.group_of(kind, r), group) << kGroupKindNames[k];
            }
            EXPECT_EQ(seen.size(), std::size_t(g.world_size())) << kGroupKindNames[k];
            for (std::int64_t r = 0; r < g.world_size(); ++r)
                EXPECT_EQ(seen.count(r), 1u) << kGroupKindNames[k] << " rank " << r;
        }
}

TEST(RankGrid, HybridShardingGroups) {
    ParallelPlan p = plan(2, 1, 8, 1, 2); // 16 ranks: dp 8, ep 2 (expert-dp 4), 2 replicas
    p.sharding.instances = 2;
    const RankGrid g(p);
    // Dense: shards of 4 consecutive data ranks (at tp stride 2), replicas 4 apart.
    EXPECT_EQ(g.group_of(GroupKind::data_shard, 3), (std::vector<std::int64_t>{1, 3, 5, 7}));
    EXPECT_EQ(g.group_of(GroupKind::data_replica, 3), (std::vector<std::int64_t>{3, 11}));
    // Experts: the expert-dp ranks of one expert rank (data ranks 1, 3, 5, 7) in shards of 2.
    EXPECT_EQ(g.group_of(GroupKind::expert_data_shard, 2), (std::vector<std::int64_t>{2, 6}));
    EXPECT_EQ(g.group_of(GroupKind::expert_data_replica, 2), (std::vector<std::int64_t>{2, 10}));
}

TEST(RankGrid, GroupSizes) {
    const RankGrid g(plan(4, 2, 8, 2, 4));
    EXPECT_EQ(g.group_of(GroupKind::tensor, 0).size(), 4u);
    EXPECT_EQ(g.group_of(GroupKind::context, 0).size(), 2u);
    EXPECT_EQ(g.group_of(GroupKind::data, 0).size(), 8u);
    EXPECT_EQ(g.group_of(GroupKind::data_context, 0).size(), 16u);
    EXPECT_EQ(g.group_of(GroupKind::pipeline, 0).size(), 2u);
    EXPECT_EQ(g.group_of(GroupKind::expert, 0).size(), 4u);
    EXPECT_EQ(g.group_of(GroupKind::expert_data, 0).size(), 4u);
    EXPECT_EQ(g.group_of(GroupKind::model, 0).size(), 8u);
}

TEST(RankGrid, ExpertGroupsAreConsecutiveDataRanks) {
    // tp 1, dp 8, ep 4: experts are exchanged among dp ranks 0-3 and 4-7 (Megatron-Core),
    // and replicas of the same experts sit 4 apart.
    const RankGrid g(plan(1, 1, 8, 1, 4));
    EXPECT_EQ(g.groups(GroupKind::expert), (Groups{{0, 1, 2, 3}, {4, 5, 6, 7}}));
    EXPECT_EQ(g.groups(GroupKind::expert_data), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
    // With tp 2 the same holds per tensor rank.
    const RankGrid t(plan(2, 1, 4, 1, 2));
    EXPECT_EQ(t.group_of(GroupKind::expert, 1), (std::vector<std::int64_t>{1, 3}));
    EXPECT_EQ(t.group_of(GroupKind::expert_data, 1), (std::vector<std::int64_t>{1, 5}));
}

TEST(RankGrid, FoldedExpertsSpreadOverTheTensorRanks) {
    // Megatron-Core's expert RankGenerator: a stage's tp·cp·dp ranks as etp × ep × expert-dp,
    // etp fastest. tp 4 · dp 2, ep 8, etp 1: one expert group over the whole 8-rank stage.
    ParallelPlan p = plan(4, 1, 2, 1, 8);
    p.etp = 1;
    const RankGrid g(p);
    EXPECT_EQ(g.groups(GroupKind::expert), (Groups{{0, 1, 2, 3, 4, 5, 6, 7}}));
    EXPECT_EQ(g.group_of(GroupKind::expert_tensor, 5), (std::vector<std::int64_t>{5}));
    EXPECT_EQ(g.group_of(GroupKind::expert_data, 5), (std::vector<std::int64_t>{5}));
    EXPECT_EQ(g.group_of(GroupKind::tensor, 5), (std::vector<std::int64_t>{4, 5, 6, 7}));
    EXPECT_EQ(g.coord(5).ep, 5);
    // tp 4 · dp 2, ep 2, etp 2: expert-tp pairs, experts 2 apart, replicas 4 apart.
    p.ep = 2;
    p.etp = 2;
    const RankGrid h(p);
    EXPECT_EQ(h.group_of(GroupKind::expert_tensor, 6), (std::vector<std::int64_t>{6, 7}));
    EXPECT_EQ(h.group_of(GroupKind::expert, 6), (std::vector<std::int64_t>{4, 6}));
    EXPECT_EQ(h.group_of(GroupKind::tensor_expert, 6), (std::vector<std::int64_t>{4, 5, 6, 7}));
    EXPECT_EQ(h.group_of(GroupKind::expert_data, 6), (std::vector<std::int64_t>{2, 6}));
    EXPECT_EQ(p.expert_dp(), 2);
    // Without etp the expert view is the one above: expert-tp is the tensor group.
    const RankGrid d(plan(4, 1, 2, 2, 2));
    for (std::int64_t r = 0; r < d.world_size(); ++r)
        EXPECT_EQ(d.group_of(GroupKind::expert_tensor, r), d.group_of(GroupKind::tensor, r));
    // etp·ep must tile the stage.
    p.ep = 8;
    EXPECT_THROW(RankGrid{p}, SpecError);
}

TEST(RankGrid, TensorGroupsStayInsideANode) {
    const RankGrid g(plan(8, 1, 16, 8));
    for (const auto& group : g.groups(GroupKind::tensor)) {
        EXPECT_EQ(group.front() / 8, group.back() / 8);
    }
}

TEST(RankGrid, RankOutOfRangeIsAnError) {
    const RankGrid g(plan(2, 1, 2, 2));
    EXPECT_THROW(g.coord(8), std::exception);
    EXPECT_THROW(g.coord(-1), std::exception);
}
