// MoE token dispatchers (Megatron-Core's allgather, alltoall, flex) move the bytes their
// definitions say, and an uneven router makes the busiest expert-parallel rank slower.
#include "../support/preset_profile.h"
#include "trident/core/job_loader.h"
#include "trident/core/presets.h"
#include "trident/core/spec_error.h"
#include "trident/simulator/flops.h"
#include "trident/simulator/layer_ops.h"
#include "trident/simulator/report.h"
#include "trident/simulator/simulate.h"

#include <algorithm>
#include <gtest/gtest.h>
#include <numeric>
#include <random>
#include <set>
#include <sstream>

using namespace trident;
using simulator::OpKind;
using simulator::Phase;

namespace {

core::ModelSpec preset_model(const std::string& name) {
    return core::model_from_json(core::resolve_reference(name, core::PresetKind::model, "m"));
}

// Bytes of the forward collectives named `name` over `group` in the first MoE layer.
double forward_bytes(const core::ModelSpec& m, const simulator::LayerView& v, std::string_view name,
                     core::GroupKind group) {
    std::int64_t layer = 0;
    while (!m.is_moe_layer(layer)) ++layer;
    double bytes = 0;
    for (const simulator::Op& op : simulator::layer_ops(m, v, layer))
        if (op.kind == OpKind::collective && op.phase == Phase::forward && op.name == name &&
            op.group == group)
            bytes += op.bytes * double(op.count);
    return bytes;
}

simulator::LayerView view(std::int64_t tp, std::int64_t ep, core::TokenDispatcher d) {
    simulator::LayerView v;
    v.tp = tp;
    v.ep = ep;
    v.sequence_parallel = tp > 1;
    v.micro_batch = 1;
    v.seq = 4096;
    v.dispatcher = d;
    return v;
}

// One MoE layout of `model` on `nodes` DGX H100 nodes: tp 1, pp 1, ep, one sequence a rank.
core::JobInputs moe_inputs(const std::string& model, std::int64_t nodes, std::int64_t ep) {
    core::JobInputs in;
    in.model = model;
    in.cluster = "dgx-h100";
    in.nodes = nodes;
    in.tp = 1;
    in.pp = 1;
    in.ep = ep;
    in.dp = "auto";
    in.micro_batch_size = 1;
    in.global_batch_size = 8 * nodes;
    in.seq_length = 4096;
    in.distributed_optimizer = true;
    return in;
}

core::JobSpec moe_job(const std::string& model, std::int64_t nodes, std::int64_t ep) {
    return core::load_job(moe_inputs(model, nodes, ep));
}

} // namespace

TEST(MoeDispatch, EachDispatcherMovesWhatItsDefinitionSays) {
    // Mixtral 8x7B, 4,096 tokens on a rank, hidden 4,096 in BF16, top-2 of 8, ep 8 (one
    // expert a rank).
    const core::ModelSpec m = preset_model("mixtral-8x7b");
    const double tokens = 4096, row = 4096 * 2.0; // bytes of one token's hidden state
    using D = core::TokenDispatcher;
    using G = core::GroupKind;
    // alltoall: each of the top-2 copies crosses the ep group.
    EXPECT_DOUBLE_EQ(forward_bytes(m, view(1, 8, D::alltoall), "dispatch", G::expert),
                     tokens * 2 * row);
    // allgather: the 8 ranks gather every token's row, plus 5 bytes per expert of routing.
    EXPECT_DOUBLE_EQ(forward_bytes(m, view(1, 8, D::allgather), "dispatch", G::tensor_expert),
                     tokens * row * 8);
    EXPECT_DOUBLE_EQ(forward_bytes(m, view(1, 8, D::allgather), "routing map", G::tensor_expert),
                     tokens * 8 * 5 * 8);
    // flex: one expert per rank, so each token goes to exactly two ranks, with its 2 fp32
    // probabilities.
    EXPECT_NEAR(forward_bytes(m, view(1, 8, D::flex), "dispatch", G::tensor_expert),
                tokens * (2 * row + 2 * 4.0), 1e-3);
}

TEST(MoeDispatch, FlexSendsATokenOncePerRankHoldingItsExperts) {
    // DeepSeek-V3: 256 experts, top-8, ep 64 (4 experts a rank), node-limited to 4 of 8
    // groups of 32: the token's 8 experts lie among the 32 ranks of its 4 groups' 128
    // experts, and one of those ranks holds none with probability prod_{i<8} (124 - i) /
    // (128 - i).
    const core::ModelSpec m = preset_model("deepseek-v3");
    double none = 1;
    for (int i = 0; i < 8; ++i) none *= (124.0 - i) / (128.0 - i);
    const double ranks = 32 * (1 - none); // about 7.36 of the 8 copies alltoall sends
    EXPECT_GT(ranks, 7.3);
    EXPECT_LT(ranks, 7.45);
    const double row = 7168 * 2.0;
    EXPECT_NEAR(forward_bytes(m, view(1, 64, core::TokenDispatcher::flex), "dispatch",
                              core::GroupKind::tensor_expert),
                4096 * (ranks * row + 8 * 4.0), 1e-3 * 4096 * row);
}

TEST(MoeLoad, TheBusiestRankSetsTheExperts) {
    core::MoeSpec e;
    e.num_experts = 8;
    e.top_k = 2;
    EXPECT_DOUBLE_EQ(e.slowest_rank_load(2), 1.0); // forced
    e.load_balance = core::LoadBalance::aux_loss;
    // The hottest expert at 1.52 times the mean, its rank's 3 others at the mean.
    EXPECT_DOUBLE_EQ(e.slowest_rank_load(2), 1.0 + 0.52 / 4);
    EXPECT_DOUBLE_EQ(e.slowest_rank_load(8), 1.52);
    // A measured histogram: ranks {0-3} and {4-7} take 7 and 4 of 11 tokens; mean 5.5.
    e.load_balance = core::LoadBalance::histogram;
    e.tokens_per_expert = {4, 1, 1, 1, 1, 1, 1, 1};
    EXPECT_DOUBLE_EQ(e.slowest_rank_load(2), 7.0 / 5.5);
    EXPECT_DOUBLE_EQ(e.slowest_rank_load(8), 4.0 / (11.0 / 8.0));
}

TEST(MoeLoad, AnUnevenRouterSlowsTheStep) {
    const core::JobSpec forced = moe_job("mixtral-8x7b", 1, 8);
    core::JobSpec uneven = forced;
    uneven.model.moe->load_balance = core::LoadBalance::aux_loss;
    const auto& h100 = test::preset_profile("h100-sxm5-80gb");
    const double t0 = simulator::simulate(forced, h100).step_time_s;
    const double t1 = simulator::simulate(uneven, h100).step_time_s;
    EXPECT_GT(t1, 1.1 * t0); // the experts are most of the step, at 1.52 times the tokens
    // The expert GEMMs of the busiest rank take 1.52 times the tokens.
    const simulator::LayerView v = simulator::LayerView::of(forced.plan, 4096);
    const auto expert_m = [&](const core::ModelSpec& m) {
        for (const simulator::Op& op : simulator::layer_ops(m, v, 0))
            if (op.name == "expert fc1" && op.phase == Phase::forward) return op.m;
        return std::int64_t(0);
    };
    EXPECT_EQ(expert_m(forced.model), 4096 * 2);
    EXPECT_EQ(expert_m(uneven.model), std::int64_t(std::ceil(4096 * 2 * 1.52)));
}

TEST(MoeLoad, TheFieldReadsNamesHistogramsAndRefusesTheRest) {
    core::Json j = core::resolve_reference("mixtral-8x7b", core::PresetKind::model, "m");
    j["moe"]["load_balance"] = "aux-loss";
    EXPECT_EQ(core::model_from_json(j).moe->load_balance, core::LoadBalance::aux_loss);
    j["moe"]["load_balance"] = {{"tokens_per_expert", {1, 2, 3, 4, 5, 6, 7, 8}}};
    const core::ModelSpec m = core::model_from_json(j);
    EXPECT_EQ(m.moe->tokens_per_expert.size(), 8u);
    EXPECT_EQ(core::to_json(m)["moe"]["load_balance"], j["moe"]["load_balance"]);
    const auto refusal = [&](const core::Json& value) -> std::string {
        j["moe"]["load_balance"] = value;
        try {
            (void)core::model_from_json(j);
        } catch (const core::SpecError& e) {
            return e.what();
        }
        return "accepted";
    };
    EXPECT_NE(refusal("balanced").find("model.moe.load_balance"), std::string::npos);
    EXPECT_NE(refusal(core::Json{{"tokens_per_expert", {1, 2}}}).find("2 entries for 8 experts"),
              std::string::npos);
    EXPECT_NE(refusal(core::Json{{"tokens_per_expert", {1, -2, 3, 4, 5, 6, 7, 8}}})
                  .find("tokens_per_expert[1]"),
              std::string::npos);
    EXPECT_NE(refusal(3).find("must be"), std::string::npos);
}

TEST(MoeDispatch, AnAllToAllAcrossNodesSendsOnlyTheOtherNodesShareOverTheNics) {
    // ep 16 over two DGX H100 nodes: each rank sends half its buffer to the other node over
    // its NIC (an all-to-all among one rank per node) and the other half to its own node's 8
    // ranks over NVLink; the slower of the two sets the time.
    const core::JobSpec job = moe_job("qwen3-30b-a3b", 2, 16);
    const core::Profile& h100 = test::preset_profile("h100-sxm5-80gb");
    const simulator::CostModel cost(job, h100);
    const double bytes = 64.0 * (1 << 20);
    const double across =
        h100.collective("infiniband", core::Collective::all_to_all, 2, bytes).seconds;
    const double within =
        h100.collective("nvlink", core::Collective::all_to_all, 8, bytes / 2).seconds;
    EXPECT_DOUBLE_EQ(
        cost.collective_s(core::GroupKind::expert, 0, core::Collective::all_to_all, bytes),
        std::max(across, within));
    // Less than timing all 16 ranks' exchange on the NICs, which would send 15/16 of it there.
    EXPECT_LT(std::max(across, within),
              h100.collective("infiniband", core::Collective::all_to_all, 16, bytes).seconds);
    // Other collectives keep the ring over the NICs.
    EXPECT_DOUBLE_EQ(
        cost.collective_s(core::GroupKind::expert, 0, core::Collective::all_gather, bytes),
        h100.collective("infiniband", core::Collective::all_gather, 16, bytes).seconds);
}

TEST(MoeDispatch, TheReportShowsEachStagesTokenExchange) {
    const core::JobSpec job = moe_job("mixtral-8x7b", 1, 8);
    const simulator::Report r = simulator::simulate(job, test::preset_profile("h100-sxm5-80gb"));
    const simulator::StageReport& s = r.stages[0];
    EXPECT_GT(s.moe_exchange_s, 0.0);
    EXPECT_LE(s.moe_exchange_s, s.collective_s); // ep 8, tp 1: the exchange is all of it
    EXPECT_NEAR(s.moe_exchange_s, s.collective_s, 1e-12);
    std::ostringstream text;
    simulator::print_report(r, text);
    EXPECT_NE(text.str().find("MoE token exchange (alltoall dispatcher"), std::string::npos)
        << text.str();
    EXPECT_EQ(simulator::report_json(r)["stages"][0]["moe_exchange_s"].get<double>(),
              s.moe_exchange_s);
}

// The local experts run as one grouped GEMM at the per-expert shape: Qwen3-30B-A3B (128
// experts, top-8, expert FFN 768, SwiGLU, hidden 2048) at ep 8 holds 16 experts a rank, each
// taking 8 ranks · 4096 tokens · 8 / 128 = 2048 tokens.
TEST(MoeExperts, RunAsOneGroupedGemmAtTheirPerExpertShape) {
    const core::ModelSpec m = preset_model("qwen3-30b-a3b");
    const simulator::LayerView v = view(1, 8, core::TokenDispatcher::alltoall);
    std::vector<simulator::Op> fc1;
    for (const simulator::Op& op : simulator::layer_ops(m, v, 0))
        if (op.name == "expert fc1") fc1.push_back(op);
    ASSERT_EQ(fc1.size(), 3u);
    for (const auto& op : fc1) {
        EXPECT_TRUE(op.grouped);
        EXPECT_EQ(op.count, 16);
        EXPECT_DOUBLE_EQ(op.flops, 2.0 * 2048 * 1536 * 2048); // per expert
    }
    const auto shape = [](const simulator::Op& op) {
        return std::array<std::int64_t, 3>{op.m, op.n, op.k};
    };
    EXPECT_EQ(shape(fc1[0]), (std::array<std::int64_t, 3>{2048, 1536, 2048})); // forward
    EXPECT_EQ(shape(fc1[1]), (std::array<std::int64_t, 3>{2048, 2048, 1536})); // dgrad
    EXPECT_EQ(shape(fc1[2]),
              (std::array<std::int64_t, 3>{2048, 1536, 2048})); // wgrad: k × n, depth the tokens
    EXPECT_EQ(fc1[2].phase, Phase::backward_weight);
    // The grouped table runs them slower than one GEMM over all 16 experts' tokens would; finer
    // experts (ep 1: 128 of 256 tokens each), the same FLOPs, slower still.
    const auto& h100 = test::preset_profile("h100-sxm5-80gb");
    const double grouped = h100.grouped_gemm(core::Dtype::bf16, 16, 2048, 1536, 2048).seconds;
    EXPECT_GT(grouped, h100.gemm(core::Dtype::bf16, 16 * 2048, 1536, 2048).seconds);
    EXPECT_GT(h100.grouped_gemm(core::Dtype::bf16, 128, 256, 1536, 2048).seconds, 1.3 * grouped);
    // Over a whole layer's expert GEMMs (the same FLOPs a rank at either degree).
    const auto experts_s = [&](std::int64_t ep) {
        const simulator::LayerView w = view(1, ep, core::TokenDispatcher::alltoall);
        double s = 0;
        for (const simulator::Op& op : simulator::layer_ops(m, w, 0))
            if (op.grouped)
                s += h100.grouped_gemm(core::Dtype::bf16, op.count, op.m, op.n, op.k).seconds;
        return s;
    };
    EXPECT_GT(experts_s(1), 1.3 * experts_s(8));
}

namespace {

// A token's expected destinations against a Monte-Carlo count: choose router_group_topk of the
// contiguous groups at random, then top_k distinct experts among theirs, and count the holders
// (num_experts / holders contiguous experts each) that receive any.
double sampled_destinations(const core::MoeSpec& e, std::int64_t holders, std::mt19937& rng) {
    const std::int64_t groups = e.router_num_groups > 0 ? e.router_num_groups : 1;
    const std::int64_t chosen = e.router_num_groups > 0 ? e.router_group_topk : 1;
    const std::int64_t per_group = e.num_experts / groups, per_holder = e.num_experts / holders;
    double total = 0;
    const int samples = 20000;
    for (int s = 0; s < samples; ++s) {
        std::vector<std::int64_t> g = std::vector<std::int64_t>(std::size_t(groups)), pool;
        std::iota(g.begin(), g.end(), 0);
        std::shuffle(g.begin(), g.end(), rng);
        for (std::int64_t i = 0; i < chosen; ++i)
            for (std::int64_t x = 0; x < per_group; ++x)
                pool.push_back(g[std::size_t(i)] * per_group + x);
        std::shuffle(pool.begin(), pool.end(), rng);
        std::set<std::int64_t> hit;
        for (std::int64_t i = 0; i < e.top_k; ++i) hit.insert(pool[std::size_t(i)] / per_holder);
        total += double(hit.size());
    }
    return total / samples;
}

} // namespace

TEST(MoeRouting, ExpectedDestinationsMatchSampledRouting) {
    std::mt19937 rng(11);
    core::MoeSpec e = preset_model("deepseek-v3").moe.value();
    ASSERT_EQ(e.router_num_groups, 8);
    ASSERT_EQ(e.router_group_topk, 4);
    for (std::int64_t holders : {4, 8, 16, 64, 256})
        EXPECT_NEAR(e.expected_destinations(holders), sampled_destinations(e, holders, rng),
                    0.02 * e.expected_destinations(holders))
            << holders << " holders";
    // Node-limited: at most 4 of 8 nodes; unlimited, 5.29 of 8 (and 7.68 of 64 ranks):
    // 8·(1 − C(224, 8)/C(256, 8)) and 64·(1 − C(252, 8)/C(256, 8)).
    EXPECT_LT(e.expected_destinations(8), 4.0);
    core::MoeSpec unlimited = e;
    unlimited.router_num_groups = unlimited.router_group_topk = 0;
    EXPECT_NEAR(unlimited.expected_destinations(64), sampled_destinations(unlimited, 64, rng),
                0.02 * 7.68);
    EXPECT_NEAR(unlimited.expected_destinations(64), 7.676, 0.001);
    EXPECT_NEAR(unlimited.expected_destinations(8), 5.295, 0.001);
}

// DeepEP over 8 nodes (ep 64): a token crosses InfiniBand once per destination node, and
// node-limited routing caps those at 4, so the exchange takes less than with unlimited routing
// (and less than NCCL's all-to-all, which sends every copy).
TEST(MoeRouting, DeepEpAcrossNodesSendsATokenOncePerDestinationNode) {
    const auto step_exchange = [](bool node_limited, core::TokenDispatcher d) {
        core::JobSpec job = moe_job("deepseek-v3", 8, 64);
        job.plan.token_dispatcher = d;
        if (!node_limited) job.model.moe->router_num_groups = job.model.moe->router_group_topk = 0;
        const auto& h800 = test::preset_profile("h800-sxm5-80gb");
        const simulator::Report r = simulator::simulate(job, h800);
        double s = 0;
        for (const auto& stage : r.stages) s = std::max(s, stage.moe_exchange_s);
        return s;
    };
    const double limited = step_exchange(true, core::TokenDispatcher::flex);
    const double unlimited = step_exchange(false, core::TokenDispatcher::flex);
    EXPECT_LT(limited, 0.75 * unlimited);
    EXPECT_LT(limited, step_exchange(true, core::TokenDispatcher::alltoall));
}

namespace {

// Bytes of the memory passes named `name` in the first MoE layer, forward and backward.
std::pair<double, double> memory_bytes(const core::ModelSpec& m, const simulator::LayerView& v,
                                       std::string_view name) {
    std::int64_t layer = 0;
    while (!m.is_moe_layer(layer)) ++layer;
    std::pair<double, double> bytes{0.0, 0.0};
    for (const simulator::Op& op : simulator::layer_ops(m, v, layer))
        if (op.kind == OpKind::memory_bound && op.name == name)
            (op.phase == Phase::forward ? bytes.first : bytes.second) +=
                op.bytes * double(op.count);
    return bytes;
}

} // namespace

TEST(MoeRouter, TopKAndTheRouterLossesPassOverTheScores) {
    // Qwen3-30B-A3B, one 4096-token sequence: scores are 4096 × 128 fp32; top-8 writes a
    // probability (fp32) and an index (int64) per choice and scatters 8 gradients back.
    core::ModelSpec m = preset_model("qwen3-30b-a3b");
    const simulator::LayerView v = view(1, 8, core::TokenDispatcher::alltoall);
    const double scores = 4096.0 * 128 * 4;
    const auto top_k = memory_bytes(m, v, "router top-k");
    EXPECT_DOUBLE_EQ(top_k.first, scores + 4096.0 * 8 * 12);
    EXPECT_DOUBLE_EQ(top_k.second, scores + 4096.0 * 8 * 4);
    m.moe->aux_loss_coeff = 0.01;
    m.moe->z_loss_coeff = 0.0;
    EXPECT_DOUBLE_EQ(memory_bytes(m, v, "router aux loss").first, scores);
    EXPECT_DOUBLE_EQ(memory_bytes(m, v, "router z-loss").first, 0.0);
    m.moe->aux_loss_coeff = 0.0;
    m.moe->z_loss_coeff = 1e-3;
    EXPECT_DOUBLE_EQ(memory_bytes(m, v, "router aux loss").first, 0.0);
    EXPECT_DOUBLE_EQ(memory_bytes(m, v, "router z-loss").second, 2 * scores);
    // The flags set the model's fields; a dense model has no router to weigh.
    core::JobInputs in = moe_inputs("qwen3-30b-a3b", 1, 8);
    in.moe_z_loss_coeff = 1e-3;
    in.moe_aux_loss_coeff = 0.0;
    const core::JobSpec job = core::load_job(in);
    EXPECT_DOUBLE_EQ(job.model.moe->z_loss_coeff, 1e-3);
    EXPECT_DOUBLE_EQ(job.model.moe->aux_loss_coeff, 0.0);
    in.model = "gpt3-1.3b";
    in.ep = 1;
    EXPECT_THROW(core::load_job(in), core::SpecError);
}

TEST(MoeLoad, ACapacityFactorReplacesTheImbalanceItCaps) {
    // Mixtral 8x7B at ep 8 (one expert a rank) under the auxiliary loss: the busiest rank takes
    // 1.52 × the mean. With a capacity factor of 1.25 every expert is padded to exactly 1.25 ×
    // the mean and what the router sends beyond it is dropped: 1.25, not 1.25 × 1.52.
    core::ModelSpec m = preset_model("mixtral-8x7b");
    m.moe->load_balance = core::LoadBalance::aux_loss;
    const simulator::LayerView v = view(1, 8, core::TokenDispatcher::alltoall);
    const double tokens_k = 4096.0 * 2; // top-2
    EXPECT_NEAR(simulator::routed_copies(*m.moe, v), tokens_k * 1.52, 1e-6);
    const double dropless_bytes = forward_bytes(m, v, "dispatch", core::GroupKind::expert);
    m.moe->capacity_factor = 1.25;
    EXPECT_DOUBLE_EQ(m.moe->expert_load(8), 1.25);
    EXPECT_NEAR(simulator::routed_copies(*m.moe, v), tokens_k * 1.25, 1e-6);
    EXPECT_NEAR(forward_bytes(m, v, "dispatch", core::GroupKind::expert),
                dropless_bytes * 1.25 / 1.52, 1e-6 * dropless_bytes);
    // Forced balance: a capacity of 1.0 pads nothing and drops nothing.
    m.moe->load_balance = core::LoadBalance::forced;
    m.moe->capacity_factor = 1.0;
    EXPECT_NEAR(simulator::routed_copies(*m.moe, v), tokens_k, 1e-6);
}

TEST(MoeLoad, EachPassWaitsForItsOwnBusiestRank) {
    // Two passes, each with one hot expert on a different rank: the run's histogram is even
    // (ranks 6 and 6), but each pass's busiest rank takes 4 of its 6 (4/3 of the mean 3).
    core::MoeSpec e;
    e.num_experts = 4;
    e.top_k = 2;
    const core::Json measured = {{"tokens_per_expert", {4, 2, 2, 4}},
                                 {"passes", {{3, 1, 1, 1}, {1, 1, 1, 3}}}};
    core::read_load_balance(measured, "moe.load_balance", e);
    EXPECT_DOUBLE_EQ(e.slowest_rank_load(2), 4.0 / 3.0);
    EXPECT_DOUBLE_EQ(e.slowest_rank_load(1), 1.0);
    EXPECT_DOUBLE_EQ(e.slowest_rank_load(4), 2.0); // 3 of the mean 1.5
    // Without the passes: the summed histogram, even.
    e.tokens_per_expert_passes.clear();
    e.busiest_by_ep.clear();
    EXPECT_DOUBLE_EQ(e.slowest_rank_load(2), 1.0);
    // Capped at 1.25 × each pass's mean expert (1.5): the hot expert computes 1.875 of its 3,
    // its rank (1.875 + 1) / (2 · 1.5).
    core::read_load_balance(measured, "moe.load_balance", e);
    e.capacity_factor = 1.25;
    EXPECT_DOUBLE_EQ(e.expert_load(2), (1.25 + 1.0 / 1.5) / 2.0);
    // Written back as read.
    EXPECT_EQ(core::load_balance_json(e), measured);
    // A pass of another width is refused, naming it.
    const core::Json bad = {{"tokens_per_expert", {4, 2, 2, 4}},
                            {"passes", {{3, 1, 1, 1}, {1, 1}}}};
    try {
        core::read_load_balance(bad, "moe.load_balance", e);
        ADD_FAILURE() << "accepted a pass of 2 entries";
    } catch (const core::SpecError& error) {
        EXPECT_NE(std::string(error.what()).find("moe.load_balance.passes[1]"), std::string::npos)
            << error.what();
    }
}

TEST(MoeLoad, PaddingIsHardwareWorkNotModelWork) {
    // Mixtral at ep 8 padded to 1.25: the step is slower and the hardware does more, but the
    // model FLOPs (MFU's numerator) stay every token's top-2, as dropless.
    const core::JobSpec dropless = moe_job("mixtral-8x7b", 1, 8);
    core::JobSpec padded = dropless;
    padded.model.moe->capacity_factor = 1.25;
    padded.model.moe->pad_to_capacity = true;
    const auto& h100 = test::preset_profile("h100-sxm5-80gb");
    const simulator::Report a = simulator::simulate(dropless, h100),
                            b = simulator::simulate(padded, h100);
    EXPECT_GT(b.step_time_s, a.step_time_s);
    EXPECT_DOUBLE_EQ(b.model_flops, a.model_flops);
    const simulator::StepFlops fa = simulator::step_flops(dropless),
                               fb = simulator::step_flops(padded);
    EXPECT_GT(fb.hardware, fa.hardware);
    EXPECT_LT(b.mfu, a.mfu);
}

TEST(MoeLoad, OnlyPaddingMakesEveryExpertTakeItsWholeCapacity) {
    // A capacity factor over the routing's load drops nothing and, without padding, costs
    // nothing; padded (--moe-pad-expert-input-to-capacity) every expert computes its capacity.
    core::MoeSpec e;
    e.num_experts = 8;
    e.top_k = 2;
    e.capacity_factor = 1.5;
    EXPECT_DOUBLE_EQ(e.expert_load(2), 1.0); // forced balance: nothing over capacity
    e.pad_to_capacity = true;
    EXPECT_DOUBLE_EQ(e.expert_load(2), 1.5);
    // A histogram, each expert capped at 1.5 × the mean expert's 11/8 tokens (2.0625): expert 0's
    // 4 tokens become 2.0625, so rank {0-3} takes 5.0625 of the mean rank's 5.5.
    e.pad_to_capacity = false;
    e.load_balance = core::LoadBalance::histogram;
    e.tokens_per_expert = {4, 1, 1, 1, 1, 1, 1, 1};
    EXPECT_DOUBLE_EQ(e.expert_load(2), (1.5 * 11.0 / 8.0 + 3.0) / 5.5);
    EXPECT_DOUBLE_EQ(e.slowest_rank_load(2), 7.0 / 5.5); // dropless: all of them
    // A factor under 1 drops even balanced tokens: a rank computes the factor.
    e.load_balance = core::LoadBalance::forced;
    e.capacity_factor = 0.75;
    EXPECT_DOUBLE_EQ(e.expert_load(2), 0.75);
    // Under the auxiliary loss at 4 experts a rank, only the hottest expert is capped.
    e.load_balance = core::LoadBalance::aux_loss;
    e.capacity_factor = 1.25;
    EXPECT_DOUBLE_EQ(e.expert_load(2), (1.25 + 3.0) / 4.0);
}
