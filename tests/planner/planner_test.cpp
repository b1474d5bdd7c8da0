// The planner: its best layouts equal an exhaustive simulation, recomputation is the cheapest
// that fits, impossible requests say why, and the library honours cancellation and progress.
#include "../support/preset_profile.h"
#include "trident/core/job_loader.h"
#include "trident/core/presets.h"
#include "trident/core/spec_error.h"
#include "trident/core/units.h"
#include "trident/planner/memory_budget.h"
#include "trident/planner/planner.h"

#include <gtest/gtest.h>

using namespace trident;

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

const core::Profile& profile(const std::string& name) {
    return test::preset_profile(name);
}

core::JobSpec specs(const std::string& model, const std::string& cluster, std::int64_t nodes,
                    std::int64_t gbs, std::int64_t seq) {
    core::JobInputs in;
    in.model = model;
    in.cluster = cluster;
    in.nodes = nodes;
    in.global_batch_size = gbs;
    in.seq_length = seq;
    return core::load_specs(in);
}

planner::PlanResult run(const core::JobSpec& s, const planner::SearchSpace& space, double budget,
                        bool exhaustive = false, std::size_t top = 5) {
    planner::PlanOptions o;
    o.memory_budget_bytes = budget;
    o.top_k = top;
    o.exhaustive = exhaustive;
    return planner::plan(s, profile(s.cluster.device), space, o);
}

} // namespace

TEST(Planner, BestEqualsExhaustiveSimulation) {
    struct Case {
        const char* model;
        const char* cluster;
        std::int64_t nodes, gbs, seq;
        double budget_gib;
    };
    for (const Case& c : {Case{"gpt2-350m", "dgx-a100-80gb", 1, 64, 1024, 20},
                          Case{"llama3-8b", "dgx-h100", 2, 64, 4096, 40},
                          Case{"mixtral-8x7b", "dgx-h100", 4, 64, 4096, 60},
                          Case{"megatron-gpt-18b", "dgx-a100-80gb", 4, 256, 2048, 30}}) {
        const auto s = specs(c.model, c.cluster, c.nodes, c.gbs, c.seq);
        const auto pruned = run(s, {}, c.budget_gib * kGiB, false, 5);
        const auto all = run(s, {}, c.budget_gib * kGiB, true, 5);
        ASSERT_FALSE(all.best.empty()) << c.model;
        EXPECT_EQ(all.simulated, all.feasible) << c.model;
        EXPECT_LT(pruned.simulated, all.simulated) << c.model << ": the bound pruned nothing";
        ASSERT_EQ(pruned.best.size(), all.best.size()) << c.model;
        for (std::size_t i = 0; i < all.best.size(); ++i) {
            EXPECT_DOUBLE_EQ(pruned.best[i].step_time_s, all.best[i].step_time_s)
                << c.model << " #" << i;
            EXPECT_EQ(core::to_json(pruned.best[i].job.plan), core::to_json(all.best[i].job.plan))
                << c.model << " #" << i;
        }
        for (std::size_t i = 1; i < all.best.size(); ++i)
            EXPECT_LE(all.best[i - 1].step_time_s, all.best[i].step_time_s);
    }
}

TEST(Planner, RecomputationIsTheCheapestThatFits) {
    // One fixed layout of GPT-3 175B; shrink the budget step by step. Without flash attention
    // the s² scores make selective recomputation worth something, so all three kinds appear.
    const auto s = specs("gpt3-175b", "dgx-a100-80gb", 16, 128, 2048);
    planner::SearchSpace space;
    space.flash_attention = false;
    space.tp = {8};
    space.pp = {8};
    space.micro_batch = {2};
    space.schedules = {core::ScheduleKind::one_f_one_b};
    space.sequence_parallel = {false};
    space.distributed_optimizer = {true};
    int last_rank = -1; // none 0, selective 1, full k: 1 + k
    int seen_full = 0, seen_none = 0, seen_selective = 0;
    for (double budget = 160; budget >= 20; budget -= 2) {
        const auto r = run(s, space, budget * kGiB, false, 1);
        if (r.best.empty()) {
            EXPECT_GT(r.smallest_peak_bytes, budget * kGiB); // the error names what it would need
            break;
        }
        const auto& c = r.best.front();
        const auto& rc = c.job.plan.recompute;
        EXPECT_LE(c.peak_memory_bytes, budget * kGiB);
        const int rank = rc.granularity == core::RecomputeGranularity::none ? 0
                         : rc.granularity == core::RecomputeGranularity::selective
                             ? 1
                             : 1 + int(rc.num_layers);
        EXPECT_GE(rank, last_rank) << "budget " << budget;
        last_rank = rank;
        seen_full += rc.granularity == core::RecomputeGranularity::full;
        seen_none += rc.granularity == core::RecomputeGranularity::none;
        seen_selective += rc.granularity == core::RecomputeGranularity::selective;
        // One layer fewer would not have fitted: the choice is minimal.
        if (rc.granularity == core::RecomputeGranularity::full && rc.num_layers > 1) {
            planner::SearchSpace pinned = space;
            pinned.recompute = core::Recompute{core::RecomputeGranularity::full,
                                               core::RecomputeMethod::block, rc.num_layers - 1};
            EXPECT_TRUE(run(s, pinned, budget * kGiB, false, 1).best.empty())
                << "budget " << budget;
        }
        EXPECT_FALSE(c.recompute_reason.empty());
    }
    EXPECT_GT(seen_none, 0);
    EXPECT_GT(seen_selective, 0);
    EXPECT_GT(seen_full, 3);
    EXPECT_EQ(last_rank, 1 + 12); // ends recomputing all 12 layers of each stage
}

TEST(Planner, ImpossibleRequestsSayWhy) {
    // Seven nodes: 56 devices. Only uneven stages fit GPT-3's 96 layers (pp 7 or 14) …
    const auto odd = run(specs("gpt3-175b", "dgx-a100-80gb", 7, 1536, 2048), {}, 72 * kGiB);
    ASSERT_FALSE(odd.best.empty());
    EXPECT_EQ(odd.best.front().job.plan.pp % 7, 0);
    EXPECT_FALSE(odd.best.front().job.pipeline_split().even());
    // … and a tensor degree that divides none of its 96 heads is refused with the numbers.
    planner::SearchSpace tp5;
    tp5.tp = {5};
    const auto five = run(specs("gpt3-175b", "dgx-a100-80gb", 5, 1536, 2048), tp5, 72 * kGiB);
    EXPECT_TRUE(five.best.empty());
    EXPECT_GT(five.rejections.count("parallel.tp: N must divide num_attention_heads N"), 0u);
    // A budget too small: the smallest need is reported.
    const auto tight = run(specs("gpt3-175b", "dgx-a100-80gb", 4, 64, 2048), {}, 4 * kGiB);
    EXPECT_TRUE(tight.best.empty());
    EXPECT_GT(tight.smallest_peak_bytes, 4 * kGiB);
    EXPECT_FALSE(tight.smallest_layout.empty());
    EXPECT_FALSE(tight.closest_rejected.empty());
}

TEST(Planner, PinnedDimensionsAreHonoured) {
    planner::SearchSpace space;
    space.tp = {4};
    space.schedules = {core::ScheduleKind::zero_bubble_h1};
    const auto r = run(specs("llama3-70b", "dgx-h100", 8, 128, 4096), space, 72 * kGiB);
    ASSERT_FALSE(r.best.empty());
    for (const auto& c : r.best) {
        EXPECT_EQ(c.job.plan.tp, 4);
        EXPECT_EQ(c.job.plan.schedule, core::ScheduleKind::zero_bubble_h1);
    }
}

TEST(Planner, CancellationAndProgress) {
    const auto s = specs("gpt3-175b", "dgx-a100-80gb", 64, 512, 2048);
    std::atomic<bool> cancel{false};
    std::int64_t calls = 0;
    planner::PlanOptions o;
    o.memory_budget_bytes = 72 * kGiB;
    o.cancel = &cancel;
    o.on_progress = [&](const planner::Progress& p) {
        ++calls;
        EXPECT_LE(p.done, p.total);
        if (p.phase == "simulate") cancel = true; // stop as soon as simulation starts
    };
    const auto r = planner::plan(s, profile("a100-sxm4-80gb"), {}, o);
    EXPECT_TRUE(r.cancelled);
    EXPECT_GT(calls, 1);
    EXPECT_LE(r.simulated, 1);
}

TEST(Planner, ExportsAPlanSimulateAccepts) {
    const auto r = run(specs("llama3-8b", "dgx-h100", 1, 32, 4096), {}, 70 * kGiB);
    ASSERT_FALSE(r.best.empty());
    const core::Json file = planner::plan_file(r.best.front(), 70 * kGiB);
    EXPECT_EQ(file["format"], "trident.plan/1");
    EXPECT_TRUE(file["planner"].contains("recompute_reason"));
    const std::string args = planner::megatron_arguments(r.best.front().job);
    EXPECT_NE(
        args.find("--tensor-model-parallel-size " + std::to_string(r.best.front().job.plan.tp)),
        std::string::npos);
    EXPECT_NE(args.find("--swiglu"), std::string::npos);
    EXPECT_NE(args.find("--group-query-attention"), std::string::npos);
    EXPECT_NE(args.find("--untie-embeddings-and-output-weights"), std::string::npos);
}

TEST(Planner, ExportsMegatronsVocabularyAndEpsilonFlagsWhenNotDefault) {
    core::JobInputs in;
    in.model = "llama3-8b";
    in.cluster = "dgx-h100";
    in.nodes = 1;
    in.global_batch_size = 32;
    in.seq_length = 4096;
    in.tp = 8;
    in.pp = 1;
    in.dp = "1";
    in.micro_batch_size = 1;
    const std::string defaults = planner::megatron_arguments(core::load_job(in));
    EXPECT_EQ(defaults.find("--make-vocab-size-divisible-by"), std::string::npos);
    EXPECT_EQ(defaults.find("--norm-epsilon"), std::string::npos);
    in.make_vocab_size_divisible_by = 64;
    in.norm_epsilon = 1e-6;
    const core::JobSpec job = core::load_job(in);
    EXPECT_EQ(job.model.padded_vocab_size(8), 128512); // 128256 up to 251 · 512 (not 1024)
    const std::string args = planner::megatron_arguments(job);
    EXPECT_NE(args.find("--make-vocab-size-divisible-by 64"), std::string::npos) << args;
    EXPECT_NE(args.find("--norm-epsilon 1e-06"), std::string::npos) << args;
}

TEST(MemoryBudget, ReadsTheWordsUsersWrite) {
    using trident::planner::parse_memory_budget;
    const double capacity = 80 * trident::core::kGiB;
    EXPECT_DOUBLE_EQ(parse_memory_budget("70GiB", capacity, "f"), 70 * trident::core::kGiB);
    EXPECT_DOUBLE_EQ(parse_memory_budget("80GB", capacity, "f"), 80e9);
    EXPECT_DOUBLE_EQ(parse_memory_budget("90%", capacity, "f"), 0.9 * capacity);
    EXPECT_DOUBLE_EQ(parse_memory_budget("0.5", capacity, "f"), 0.5 * capacity);
    EXPECT_DOUBLE_EQ(parse_memory_budget("75e9", capacity, "f"), 75e9);
    EXPECT_DOUBLE_EQ(parse_memory_budget(" 70 GiB ", capacity, "f"), 70 * trident::core::kGiB);
    for (const char* bad : {"", "lots", "-5GiB", "70 parsecs", "70GiB extra", "0"}) {
        try {
            parse_memory_budget(bad, capacity, "--memory-budget");
            ADD_FAILURE() << "accepted '" << bad << "'";
        } catch (const trident::core::SpecError& e) {
            EXPECT_EQ(e.field(), "--memory-budget");
        }
    }
}
