// Uneven pipeline stages: Megatron-Core's split rules, the listed layouts and Megatron's layout
// string, and the cost-balanced split against a brute force over every split.
#include "trident/core/pipeline_split.h"
#include "trident/core/presets.h"
#include "trident/core/spec_error.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <gtest/gtest.h>
#include <numeric>
#include <random>

namespace trident::core {
namespace {

ModelSpec llama3_405b() {
    return model_from_json(resolve_reference("llama3-405b", PresetKind::model, "model"));
}

ModelSpec model_with_layers(std::int64_t layers) {
    ModelSpec m = llama3_405b();
    m.num_layers = layers;
    return m;
}

ParallelPlan plan(std::int64_t pp, std::int64_t vpp = 1) {
    ParallelPlan p;
    p.pp = pp;
    p.vpp = vpp;
    if (vpp > 1) p.schedule = ScheduleKind::interleaved_1f1b;
    return p;
}

std::string error_of(const ModelSpec& m, const ParallelPlan& p) {
    try {
        pipeline_split(m, p);
    } catch (const SpecError& e) {
        return e.field() + ": " + e.reason();
    }
    return "(no error)";
}

TEST(PipelineSplit, EvenByDefault) {
    const PipelineSplit s = pipeline_split(model_with_layers(96), plan(8, 2));
    EXPECT_EQ(s.layers, std::vector<std::int64_t>(16, 6));
    EXPECT_EQ(s.first_layer(5), 30);
    EXPECT_EQ(s.stage_of(31), 5);
    EXPECT_EQ(s.position(31), 1);
    EXPECT_TRUE(s.even());
    EXPECT_EQ(layout_text(s), "6 per stage");
}

TEST(PipelineSplit, Llama3With16StagesAndShorterEnds) {
    // Dubey et al. 2024: 126 layers on pp 16, the first and last stage one layer shorter.
    const ModelSpec m = llama3_405b();
    ASSERT_EQ(m.num_layers, 126);
    ParallelPlan counted = plan(16);
    counted.account_for_embedding = counted.account_for_loss = true;
    std::vector<std::int64_t> expected(16, 8);
    expected.front() = expected.back() = 7;
    EXPECT_EQ(pipeline_split(m, counted).layers, expected);
    ParallelPlan first_last = plan(16);
    first_last.first_stage_layers = 7;
    first_last.last_stage_layers = 7;
    EXPECT_EQ(pipeline_split(m, first_last).layers, expected);
    EXPECT_EQ(layout_text(pipeline_split(m, first_last)), "7,8×14,7");
    // With virtual stages each rank's layers are split evenly over its chunks, and virtual
    // stage c·pp + r is rank r's chunk c: 126 + 2 = 128 over pp 16 · vpp 2 gives 4 per chunk,
    // one fewer on virtual stage 0 and on the last.
    ParallelPlan interleaved = plan(16, 2);
    interleaved.account_for_embedding = interleaved.account_for_loss = true;
    const PipelineSplit v = pipeline_split(m, interleaved);
    EXPECT_EQ(v.layers.front(), 3);
    EXPECT_EQ(v.layers.back(), 3);
    EXPECT_EQ(v.layers[16], 4);
    // 128 slots over pp 16 · vpp 8 (Megatron-Bridge's 405B runs): one a chunk, the first chunk
    // the embedding alone and the last the loss alone — more virtual stages than layers.
    ParallelPlan one_each = plan(16, 8);
    one_each.account_for_embedding = one_each.account_for_loss = true;
    const PipelineSplit e = pipeline_split(m, one_each);
    ASSERT_EQ(e.stages(), 128);
    EXPECT_EQ(e.layers.front(), 0);
    EXPECT_EQ(e.layers.back(), 0);
    EXPECT_EQ(std::accumulate(e.layers.begin(), e.layers.end(), std::int64_t(0)), 126);
    // Without the counting, 128 stages of 126 layers are refused.
    EXPECT_NE(error_of(m, plan(16, 8)).find("exceed the 126 layers"), std::string::npos);
}

TEST(PipelineSplit, FirstStageCountWithVirtualStages) {
    // 30 layers, pp 4 · vpp 2: the first rank 6 (3 per chunk), the last 8, the middle two share
    // the other 16; virtual stage c·4 + r holds rank r's chunk c.
    ParallelPlan p = plan(4, 2);
    p.first_stage_layers = 6;
    p.last_stage_layers = 8;
    EXPECT_EQ(pipeline_split(model_with_layers(30), p).layers,
              (std::vector<std::int64_t>{3, 4, 4, 4, 3, 4, 4, 4}));
}

TEST(PipelineSplit, RefusalsNameTheNumbers) {
    EXPECT_EQ(error_of(model_with_layers(126), plan(16, 2)),
              "parallel.vpp: 126 layers cannot fill pp 16 · vpp 2 evenly; give "
              "--decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers, "
              "--account-for-embedding-in-pipeline-split / --account-for-loss-in-pipeline-split "
              "or --pipeline-layout, or let the planner split (trident plan)");
    ParallelPlan first = plan(4);
    first.first_stage_layers = 5;
    EXPECT_EQ(error_of(model_with_layers(30), first),
              "parallel.decoder_first_pipeline_num_layers: leaves 25 of the 30 layers for the "
              "other 3 pipeline ranks, which must share them evenly");
    first.account_for_loss = true;
    EXPECT_NE(error_of(model_with_layers(30), first).find("cannot be combined"), std::string::npos);
    ParallelPlan listed = plan(4);
    listed.pipeline_layout = {8, 8, 8};
    EXPECT_EQ(error_of(model_with_layers(30), listed),
              "parallel.pipeline_layout: has 3 entries but pp·vpp = 4·1 = 4 virtual stages");
    listed.pipeline_layout = {8, 8, 8, 8};
    EXPECT_EQ(error_of(model_with_layers(30), listed),
              "parallel.pipeline_layout: sums to 32 layers but the model has 30");
    listed.pipeline_layout = {15, 0, 7, 8};
    EXPECT_NE(error_of(model_with_layers(30), listed)
                  .find("pipeline_layout[1]: virtual stage 1 "
                        "holds no layers"),
              std::string::npos);
    EXPECT_EQ(error_of(model_with_layers(4), plan(8)),
              "parallel.pp: pp·vpp = 8·1 = 8 virtual stages exceed the 4 layers");
}

TEST(PipelineSplit, MegatronLayoutStringRoundTrips) {
    EXPECT_EQ(parse_megatron_layout("Et*3|(tt|)*2t|tL", "f"),
              (std::vector<std::int64_t>{3, 2, 2, 1, 1}));
    // DeepSeek-V3's style: the embedding alone first, the loss alone last.
    EXPECT_EQ(parse_megatron_layout("E|t*4|t*4|L", "f"), (std::vector<std::int64_t>{0, 4, 4, 0}));
    const PipelineSplit s = split_of({7, 8, 8, 7});
    EXPECT_EQ(megatron_layout_string(s), "Et*7|t*8|t*8|t*7L");
    EXPECT_EQ(parse_megatron_layout(megatron_layout_string(s), "f"), s.layers);
    for (const char* bad : {"t|tL", "Et|t", "Et|Lt|t", "Et(t|tL", "Et*|tL", "Etx|tL", "Etm|L"})
        EXPECT_THROW(parse_megatron_layout(bad, "parallel.pipeline_layout"), SpecError) << bad;
}

// The heaviest stage of a split under item costs (embedding, layers…, loss).
double heaviest(double first, const std::vector<double>& cost, double last,
                const std::vector<std::int64_t>& layers) {
    double worst = 0.0;
    std::size_t at = 0;
    for (std::size_t st = 0; st < layers.size(); ++st) {
        double s = st == 0 ? first : 0.0;
        if (st + 1 == layers.size()) s += last;
        for (std::int64_t k = 0; k < layers[st]; ++k) s += cost[at++];
        worst = std::max(worst, s);
    }
    return worst;
}

TEST(PipelineSplit, BalancedLayoutIsTheBestSplit) {
    // Ten equal layers, a light embedding and a loss three layers heavy over four stages: the
    // loss stage takes one layer, the bottleneck is 4 (3.5 cannot hold 10 layers in 3 stages).
    const std::vector<double> ten(10, 1.0);
    EXPECT_EQ(balanced_layout(0.5, ten, 3.0, 4), (std::vector<std::int64_t>{1, 4, 4, 1}));
    EXPECT_EQ(balanced_layout(0.0, ten, 0.0, 1), (std::vector<std::int64_t>{10}));
    EXPECT_TRUE(balanced_layout(0.0, std::vector<double>(2, 1.0), 0.0, 5).empty());
    // Against every split of small random cases (middle stages hold a layer at least).
    std::mt19937 rng(11);
    std::uniform_real_distribution<double> u(0.1, 3.0);
    for (int trial = 0; trial < 300; ++trial) {
        const std::int64_t n = 1 + std::int64_t(rng() % 8), stages = 1 + std::int64_t(rng() % 4);
        std::vector<double> cost;
        for (std::int64_t i = 0; i < n; ++i) cost.push_back(u(rng));
        const double first = u(rng), last = u(rng);
        double best = INFINITY;
        std::vector<std::int64_t> layers(static_cast<std::size_t>(stages), 0);
        const std::function<void(std::int64_t, std::int64_t)> all = [&](std::int64_t st,
                                                                        std::int64_t left) {
            if (st == stages - 1) {
                layers[std::size_t(st)] = left;
                best = std::min(best, heaviest(first, cost, last, layers));
                return;
            }
            const std::int64_t least = (st == 0) ? 0 : 1;
            for (std::int64_t k = least; k <= left; ++k) {
                layers[std::size_t(st)] = k;
                all(st + 1, left - k);
            }
        };
        all(0, n);
        const auto got = balanced_layout(first, cost, last, stages);
        if (!std::isfinite(best)) {
            EXPECT_TRUE(got.empty());
            continue;
        }
        ASSERT_EQ(std::int64_t(got.size()), stages) << trial;
        EXPECT_EQ(std::accumulate(got.begin(), got.end(), std::int64_t{0}), n);
        for (std::size_t st = 1; st + 1 < got.size(); ++st) EXPECT_GE(got[st], 1);
        EXPECT_NEAR(heaviest(first, cost, last, got), best, 1e-9 * best) << trial;
    }
}

} // namespace
} // namespace trident::core
