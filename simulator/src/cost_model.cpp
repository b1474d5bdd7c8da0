#include "trident/simulator/cost_model.h"

#include "trident/core/internal_error.h"
#include "trident/core/schedule.h"
#include "trident/core/spec_error.h"
#include "trident/simulator/flops.h"
#include "trident/simulator/moe_overlap.h"
#include "trident/simulator/sharding_overlap.h"

#include <algorithm>
#include <tuple>

namespace trident::simulator {

using core::ActionKind;

const PassCost& ChunkCost::of(ActionKind kind) const {
    if (kind == ActionKind::forward) return forward;
    if (kind == ActionKind::backward_input) return backward_input;
    return backward_weight;
}

std::int64_t CostModel::representative(std::int32_t pipeline_rank) const {
    return grid_.rank(0, 0, 0, pipeline_rank);
}

const CostModel::GroupShape& CostModel::group_shape(core::GroupKind kind,
                                                    std::int32_t pipeline_rank) const {
    // Without hybrid-sharding replicas the shard groups are the data groups, and the replica
    // groups single ranks.
    if (job_.plan.sharding.instances == 1) {
        if (kind == core::GroupKind::data_shard) kind = core::GroupKind::data_context;
        if (kind == core::GroupKind::expert_data_shard) kind = core::GroupKind::expert_data;
        static const GroupShape single{1, false, 1};
        if (kind == core::GroupKind::data_replica || kind == core::GroupKind::expert_data_replica)
            return single;
    }
    const std::size_t kinds = core::kGroupKindNames.size();
    if (group_shapes_.empty()) group_shapes_.resize(kinds * std::size_t(job_.plan.pp));
    // Groups inside a stage are the same on every stage when a stage fills whole nodes (the
    // stage's ranks shifted by whole nodes): ask pipeline rank 0.
    const core::ParallelPlan& p = job_.plan;
    // The pipeline and model groups of every stage's representative are one and the same.
    const bool across_stages = kind == core::GroupKind::pipeline || kind == core::GroupKind::model;
    const bool within_stage = !across_stages && kind != core::GroupKind::embedding;
    if (pipeline_rank != 0 &&
        (across_stages ||
         (within_stage && (p.tp * p.cp * p.dp) % job_.cluster.fabric_domain() == 0)))
        return group_shape(kind, 0);
    GroupShape& g = group_shapes_.at(std::size_t(kind) * std::size_t(job_.plan.pp) +
                                     std::size_t(pipeline_rank));
    if (g.size < 0) {
        const std::array<std::int64_t, 9> key = {p.tp,
                                                 p.cp,
                                                 p.dp,
                                                 p.pp,
                                                 p.ep,
                                                 p.expert_tp(),
                                                 p.sharding.instances,
                                                 std::int64_t(kind),
                                                 pipeline_rank};
        if (shared_) {
            const auto it = shared_->group_shapes.find(key);
            if (it != shared_->group_shapes.end()) {
                g = {it->second.size, it->second.inter_node, it->second.domains};
                return g;
            }
        }
        std::vector<std::int64_t> members = grid_.group_of(kind, representative(pipeline_rank));
        g.size = std::int64_t(members.size());
        // Across the NVLink domain (a node, or an NVL72 rack): the inter-node fabric.
        g.domains = core::domains_spanned(std::move(members), job_.cluster.fabric_domain());
        g.inter_node = g.domains > 1;
        if (shared_)
            shared_->group_shapes.emplace(key,
                                          LayerCostCache::Shape{g.size, g.inter_node, g.domains});
    }
    return g;
}

double CostModel::collective_s(core::GroupKind kind, std::int32_t pipeline_rank, core::Collective c,
                               double bytes) const {
    const GroupShape& g = group_shape(kind, pipeline_rank);
    if (g.size < 2 || bytes <= 0) return 0.0;
    // Identical stages ask for the same collectives: each answered once.
    for (const TimedCollective& t : timed_collectives_)
        if (t.size == g.size && t.inter_node == g.inter_node && t.domains == g.domains &&
            t.collective == c && t.bytes == bytes) {
            if (!t.fallback.empty()) ++fallbacks_[t.fallback];
            return t.seconds;
        }
    const std::string& fabric =
        g.inter_node ? job_.cluster.inter_node_fabric : job_.cluster.intra_node_fabric;
    const bool spanning = c == core::Collective::all_to_all && g.splits_by_domain();
    const core::Timing t = spanning ? spanning_all_to_all(g, bytes, bytes / double(g.domains))
                                    : profile_.collective(fabric, c, g.size, bytes);
    if (!t.fallback.empty()) ++fallbacks_[t.fallback];
    if (timed_collectives_.size() < 64)
        timed_collectives_.push_back(
            {g.size, g.inter_node, g.domains, c, bytes, t.seconds, t.fallback});
    return t.seconds;
}

core::Timing CostModel::spanning_all_to_all(const GroupShape& g, double across_bytes,
                                            double within_bytes) const {
    const core::Timing across = profile_.collective(
        job_.cluster.inter_node_fabric, core::Collective::all_to_all, g.domains, across_bytes);
    const core::Timing within =
        profile_.collective(job_.cluster.intra_node_fabric, core::Collective::all_to_all,
                            g.size / g.domains, within_bytes);
    core::Timing t = across.seconds >= within.seconds ? across : within;
    if (t.fallback.empty())
        t.fallback = across.fallback.empty() ? within.fallback : across.fallback;
    return t;
}

// DeepEP's internode dispatch and combine (github.com/deepseek-ai/DeepEP; DeepSeek-V3 report
// §3.2.2): over a group spanning N NVLink domains a token crosses the network once per
// destination domain — moe.expected_destinations(N), fewer under node-limited routing — and
// NVLink forwards it to the ranks holding its experts; the legs pipeline, the slower sets the
// time. Inside one domain it is one all-to-all of `bytes`.
double CostModel::deepep_all_to_all_s(const Op& op, std::int32_t pipeline_rank) const {
    const GroupShape& g = group_shape(op.group, pipeline_rank);
    if (!g.splits_by_domain() || !job_.model.moe)
        return collective_s(op.group, pipeline_rank, op.collective, op.bytes);
    const double domains = job_.model.moe->expected_destinations(g.domains);
    const core::Timing t = spanning_all_to_all(g, op.domain_copy_bytes * domains, op.bytes);
    if (!t.fallback.empty()) ++fallbacks_[t.fallback];
    return t.seconds;
}

double CostModel::overlap_slowdown(core::GroupKind kind, std::int32_t pipeline_rank) const {
    const GroupShape& g = group_shape(kind, pipeline_rank);
    return profile_.overlap_slowdown(g.inter_node ? job_.cluster.inter_node_fabric
                                                  : job_.cluster.intra_node_fabric);
}

double CostModel::memory_bound_s(core::MemoryKernel kernel, double bytes) const {
    const core::Timing t = profile_.memory_bound(kernel, bytes);
    if (!t.fallback.empty()) ++fallbacks_[t.fallback];
    return t.seconds;
}

double CostModel::op_s(const Op& op, std::int32_t pipeline_rank) const {
    const core::Dtype dtype = job_.model.precision.params;
    core::Timing t;
    switch (op.kind) {
    case OpKind::gemm: {
        const core::Dtype d = op.fp8 ? core::quantized_dtype(job_.plan.fp8.recipe) : dtype;
        if (op.grouped) {
            t = profile_.grouped_gemm(d, op.count, op.m, op.n, op.k);
            t.seconds /= double(op.count); // the groups' time, counted once below
        } else {
            t = profile_.gemm(d, op.m, op.n, op.k);
        }
        if (op.fp8) t.seconds /= fp8_rate_;
        break;
    }
    case OpKind::attention: {
        const bool backward = op.phase != Phase::forward && !op.recompute;
        t = profile_.attention(dtype, op.batch_heads, op.seq, op.head_dim, op.causal, backward);
        t.seconds *= op.work_fraction;
        break;
    }
    case OpKind::memory_bound:
        t = profile_.memory_bound(op.kernel, op.bytes);
        break;
    case OpKind::collective:
        if (op.domain_copy_bytes > 0)
            return double(op.count) * deepep_all_to_all_s(op, pipeline_rank);
        return double(op.count) * collective_s(op.group, pipeline_rank, op.collective, op.bytes);
    }
    if (!t.fallback.empty()) ++fallbacks_[t.fallback];
    return double(op.count) * t.seconds;
}

std::array<PassCost, 3> CostModel::by_phase(const std::vector<Op>& ops,
                                            std::int32_t pipeline_rank) const {
    std::array<PassCost, 3> passes{};
    std::vector<double> seconds(ops.size());
    for (std::size_t i = 0; i < ops.size(); ++i) seconds[i] = op_s(ops[i], pipeline_rank);
    for (std::size_t i = 0; i < ops.size(); ++i) {
        const Op& op = ops[i];
        PassCost& c = passes[std::size_t(op.phase)];
        const double s = seconds[i];
        if (s > 0) c.kernels += 1; // a batched GEMM is one launch; a one-rank collective none
        if (op.kind == OpKind::collective) {
            if (op.group == core::GroupKind::tensor) {
                const PairedTime t = tp_pair_time(ops, seconds, i, pipeline_rank);
                c.tp_collective_s += s;
                c.tp_hidden_s += s - t.exposed_s;
                c.contention_s += t.contention_s;
                c.collective_s += t.exposed_s;
            } else {
                c.collective_s += s;
            }
            if (op.name == "dispatch" || op.name == "combine" || op.name == "routing map")
                c.moe_exchange_s += s;
        } else if (op.recompute)
            c.recompute_s += s;
        else
            c.compute_s += s;
        if (op.kind != OpKind::collective && op.name.starts_with("shared ")) c.shared_expert_s += s;
        c.flops += op.flops * double(op.count);
        if (op.kind == OpKind::gemm) c.gemm_s += s;
        if (op.fp8) c.fp8_gemm_s += s;
        if (op.name == std::string_view("fp8 cast")) c.fp8_cast_s += s;
    }
    return passes;
}

namespace {

void accumulate(ChunkCost& chunk, const std::array<PassCost, 3>& add) {
    PassCost* passes[3] = {&chunk.forward, &chunk.backward_input, &chunk.backward_weight};
    for (std::size_t phase = 0; phase < 3; ++phase) {
        passes[phase]->compute_s += add[phase].compute_s;
        passes[phase]->recompute_s += add[phase].recompute_s;
        passes[phase]->collective_s += add[phase].collective_s;
        passes[phase]->flops += add[phase].flops;
        passes[phase]->gemm_s += add[phase].gemm_s;
        passes[phase]->fp8_gemm_s += add[phase].fp8_gemm_s;
        passes[phase]->fp8_cast_s += add[phase].fp8_cast_s;
        passes[phase]->tp_collective_s += add[phase].tp_collective_s;
        passes[phase]->tp_hidden_s += add[phase].tp_hidden_s;
        passes[phase]->moe_exchange_s += add[phase].moe_exchange_s;
        passes[phase]->moe_hidden_s += add[phase].moe_hidden_s;
        passes[phase]->shared_expert_s += add[phase].shared_expert_s;
        passes[phase]->contention_s += add[phase].contention_s;
        passes[phase]->kernels += add[phase].kernels;
        passes[phase]->host_s += add[phase].host_s;
    }
}

// --moe-shared-expert-overlap (Megatron-Core): the shared experts run on their own stream
// while the pass's token exchange is in flight — fc1 during the dispatch, fc2 during the
// combine, and their gradients beside the exchange's backward (with W's when W runs with B)
// — so the shorter of the two is hidden, and the SMs the exchange takes slow the experts.
void overlap_shared_experts(std::array<PassCost, 3>& unit, double slowdown, bool weight_deferred) {
    const double shared[2] = {unit[0].shared_expert_s,
                              unit[1].shared_expert_s +
                                  (weight_deferred ? 0.0 : unit[2].shared_expert_s)};
    for (int phase = 0; phase < 2; ++phase) {
        PassCost& pass = unit[std::size_t(phase)];
        const double hidden = std::min(pass.moe_exchange_s, shared[phase]);
        pass.collective_s -= hidden;
        pass.moe_hidden_s += hidden;
        pass.contention_s += hidden * slowdown;
    }
}

// The host issues a pass's kernels one after another while the GPU runs them: when they are
// small the GPU waits for the host (the overhead-bound regime; H. He 2022, "Making Deep
// Learning Go Brrrr From First Principles"). Over a pass the host runs ahead during long
// kernels, so only the sum matters: the pass takes at least kernels × host_op_issue_s.
void issue_bound(std::array<PassCost, 3>& unit, double host_op_issue_s) {
    for (PassCost& pass : unit) {
        const double gpu_s =
            pass.compute_s + pass.recompute_s + pass.collective_s + pass.contention_s;
        pass.host_s = std::max(0.0, pass.kernels * host_op_issue_s - gpu_s);
    }
}

// What a layer's (or the embedding's, kind 2, the head's, kind 3, or an MTP module's, kind 4)
// F/B/W costs depend on.
LayerCostCache::Key layer_cost_key(const core::JobSpec& job, std::int64_t kind, int recompute,
                                   int fp8, int placement) {
    const core::ParallelPlan& p = job.plan;
    return {p.tp,
            p.cp,
            p.ep,
            p.expert_tp(),
            p.micro_batch_size,
            p.sequence_parallel,
            p.flash_attention,
            std::int64_t(p.tp_comm_overlap) + 2 * std::int64_t(p.async_tp_backward),
            std::int64_t(core::defers_weight_gradients(p.schedule)) +
                2 * std::int64_t(p.moe_shared_expert_overlap),
            std::int64_t(p.token_dispatcher),
            kind,
            recompute,
            fp8,
            placement,
            job.training.seq_length};
}

} // namespace

std::array<PassCost, 3> CostModel::unit_costs(const std::vector<Op>& ops,
                                              std::int32_t pipeline_rank) const {
    std::array<PassCost, 3> costs = by_phase(ops, pipeline_rank);
    const core::ParallelPlan& p = job_.plan;
    if (p.moe_shared_expert_overlap)
        overlap_shared_experts(costs, overlap_slowdown(moe_exchange_group(p), pipeline_rank),
                               core::defers_weight_gradients(p.schedule));
    issue_bound(costs, profile_.host_op_issue_s());
    return costs;
}

CostModel::CostModel(const core::JobSpec& job, const core::Profile& profile,
                     const std::vector<StageParameters>* parameters, LayerCostCache* layer_costs)
    : job_(job), profile_(profile), grid_(job.plan), fp8_rate_(fp8_rate(job, profile)) {
    given_parameters_ = parameters;
    shared_ = layer_costs;
    const core::ParallelPlan& p = job.plan;
    const LayerView base = LayerView::of(p, job.training.seq_length);
    const core::PipelineSplit split = job.pipeline_split();
    const std::int64_t vocab = job.model.padded_vocab_size(p.tp);
    const std::int32_t last = std::int32_t(p.model_stages() - 1);
    // Megatron's scatter/gather: with tp > 1 each stage sends 1/tp of the activation and the
    // receiver all-gathers it over NVLink (Narayanan et al. 2021, §4.1); sequence parallelism
    // already holds 1/tp.
    p2p_bytes_ = double(base.tokens()) * double(job.model.hidden_size) *
                 double(core::dtype_bytes(job.model.precision.params)) / double(p.tp);

    // Identical layers cost the same: time each (kind of layer, recomputation, FP8 recipe,
    // which of its collective groups cross nodes) once — per job when the caller shares a
    // cache across layouts.
    chunks_.resize(std::size_t(p.pp * p.vpp));
    LayerCostCache own;
    LayerCostCache& cache = layer_costs ? *layer_costs : own;
    const auto key_of = [&](std::int64_t kind, int recompute, int fp8, int placement) {
        return layer_cost_key(job, kind, recompute, fp8, placement);
    };
    // Consecutive layers mostly share a key: the last one found is kept at hand.
    const LayerCostCache::Key* last_key = nullptr;
    const std::array<PassCost, 3>* last_costs = nullptr;
    const auto cached = [&](const LayerCostCache::Key& key, auto&& ops,
                            std::int32_t r) -> const std::array<PassCost, 3>* {
        if (last_key && *last_key == key) return last_costs;
        auto it = cache.entries.find(key);
        if (it == cache.entries.end()) {
            it = cache.entries.emplace(key, unit_costs(ops(), r)).first;
        }
        last_key = &it->first;
        last_costs = &it->second;
        return last_costs;
    };
    std::vector<const std::array<PassCost, 3>*> units; // a chunk's FSDP units, in order
    for (std::int32_t r = 0; r < p.pp; ++r) {
        int placement = 0;
        for (auto kind :
             {core::GroupKind::tensor, core::GroupKind::context, core::GroupKind::expert,
              core::GroupKind::expert_tensor, core::GroupKind::tensor_expert})
            placement = placement * 2 + group_shape(kind, r).inter_node;
        for (std::int32_t c = 0; c < p.vpp; ++c) {
            const std::int32_t vs = core::virtual_stage(p.schedule, c, std::int32_t(p.pp), r);
            ChunkCost& cost = chunks_[std::size_t(r * p.vpp + c)];
            units.clear();
            if (vs == 0)
                units.push_back(cached(
                    key_of(2, 0, 0, placement),
                    [&] { return embedding_ops(job.model, base, vocab); }, r));
            const std::int64_t first = split.first_layer(vs);
            for (std::int64_t layer = first; layer < first + split.layers_of(vs); ++layer) {
                LayerView v = base;
                v.recompute = job.recompute_at(layer - first);
                v.fp8 = job.layer_fp8(layer);
                units.push_back(cached(
                    key_of(job.model.is_moe_layer(layer), v.recompute_key(), int(v.fp8), placement),
                    [&] { return layer_ops(job.model, v, layer); }, r));
            }
            if (vs == last) {
                units.push_back(cached(
                    key_of(3, 0, 0, placement), [&] { return head_ops(job.model, base, vocab); },
                    r));
                // Multi-token prediction after the head, one FSDP unit per module (all alike).
                for (std::int64_t d = 0; d < job.model.mtp_num_layers; ++d) {
                    const LayerView v = mtp_view(job, base, d);
                    units.push_back(cached(
                        key_of(4, v.recompute_key(), int(v.fp8), placement),
                        [&] { return mtp_ops(job.model, v, vocab, d); }, r));
                }
            }
            for (const auto* unit : units) accumulate(cost, *unit);
            if (p.zero_stage() >= 2) add_sharding(cost, units, r, c);
        }
    }
}

CostModel::ShardUnitTimes CostModel::shard_unit_times(const core::ShardUnit& u,
                                                      std::int32_t r) const {
    const core::ParallelPlan& p = job_.plan;
    const core::Precision& prec = job_.model.precision;
    // A unit's collectives: dense parameters over the shard group, experts over the expert
    // shard group; gathers carry the weights as gathered_weight_bytes says.
    const auto over_groups = [&](core::Collective op, double bytes) {
        const bool gather = op == core::Collective::all_gather;
        const auto carried = [&](std::int64_t n, std::int64_t fp8) {
            return gather ? gathered_weight_bytes(double(n), double(fp8), bytes, p.fp8)
                          : bytes * double(n);
        };
        return collective_s(core::GroupKind::data_shard, r, op,
                            carried(u.dense, u.fp8 - u.fp8_expert)) +
               collective_s(core::GroupKind::expert_data_shard, r, op,
                            carried(u.expert, u.fp8_expert));
    };
    ShardUnitTimes t{u, 0.0, 0.0, 0.0};
    if (p.zero_stage() >= 3)
        t.gather_s =
            over_groups(core::Collective::all_gather, double(core::dtype_bytes(prec.params)));
    t.scatter_s =
        over_groups(core::Collective::reduce_scatter, double(core::dtype_bytes(prec.grads)));
    // FP8 weights are cast from each gathered unit, in the forward and again in the backward
    // (the FP8 copies are freed with the unit); under the FP8 parameter gather the weight
    // arrives in FP8 and only its transpose is made.
    if (p.zero_stage() >= 3 && p.fp8.enabled() && u.fp8 > 0)
        t.cast_s = memory_bound_s(core::MemoryKernel::elementwise,
                                  fp8_weight_cast_bytes(p.fp8, double(u.fp8)));
    return t;
}

void CostModel::add_sharding(ChunkCost& cost,
                             const std::vector<const std::array<PassCost, 3>*>& units,
                             std::int32_t r, std::int32_t c) const {
    const core::ParallelPlan& p = job_.plan;
    const std::vector<core::ShardUnit>& params = parameters(r).units.at(std::size_t(c));
    if (params.size() != units.size())
        throw core::InternalError("FSDP units of stage " + std::to_string(r) + " chunk " +
                                  std::to_string(c) + ": " + std::to_string(params.size()) +
                                  " parameter units, " + std::to_string(units.size()) + " timed");
    // Most units are alike (every dense layer, every MoE layer): each kind timed once.
    std::vector<ShardUnitTimes> kinds;
    const auto timed = [&](const core::ShardUnit& u) -> const ShardUnitTimes& {
        for (const ShardUnitTimes& t : kinds)
            if (t.unit.dense == u.dense && t.unit.expert == u.expert && t.unit.fp8 == u.fp8 &&
                t.unit.fp8_expert == u.fp8_expert)
                return t;
        kinds.push_back(shard_unit_times(u, r));
        return kinds.back();
    };
    const std::size_t n = units.size();
    std::vector<double> gather(n, 0.0), scatter(n, 0.0), none(n, 0.0), forward(n), backward(n);
    for (std::size_t i = 0; i < n; ++i) {
        // The backward walks the units from the last: index it in that order.
        const std::size_t b = n - 1 - i;
        const ShardUnitTimes& t = timed(params[i]);
        gather[i] = t.gather_s;
        scatter[b] = t.scatter_s;
        forward[i] = (*units[i])[0].total_s();
        backward[b] = (*units[i])[1].total_s() + (*units[i])[2].total_s();
        if (t.cast_s > 0) {
            forward[i] += t.cast_s;
            backward[b] += t.cast_s;
            for (PassCost* pass : {&cost.forward, &cost.backward_input}) {
                pass->compute_s += t.cast_s;
                pass->fp8_cast_s += t.cast_s;
            }
        }
    }
    const std::int64_t ahead = p.sharding.prefetch_units;
    // What the compute hides of the stream still takes its SMs from that compute.
    const double slowdown = overlap_slowdown(core::GroupKind::data_shard, r);
    const auto book = [&](PassCost& pass, const StreamOverlap& o) {
        pass.sharding_s = o.exposed_s;
        pass.sharding_stream_s = o.stream_s;
        pass.contention_s += std::max(0.0, o.stream_s - o.exposed_s) * slowdown;
    };
    if (p.zero_stage() >= 3) book(cost.forward, stream_overlap(gather, forward, none, ahead));
    std::reverse(gather.begin(), gather.end());
    // B and W of a unit run back to back in a fused backward; with W deferred (zero-bubble) the
    // gradients exist only after it, so the whole backward's exposure is W's.
    book(cost.backward_weight, stream_overlap(gather, backward, scatter, ahead));
}

CostModel::CostModel(const core::JobSpec& job, const core::Profile& profile, NoChunks)
    : job_(job), profile_(profile), grid_(job.plan), fp8_rate_(fp8_rate(job, profile)) {}

double fp8_rate(const core::JobSpec& job, const core::Profile& profile) {
    const core::Fp8Recipe recipe = job.plan.fp8.recipe;
    if (recipe == core::Fp8Recipe::none) return 1.0;
    const std::string name(core::kFp8RecipeNames[int(recipe)]);
    const double rate = profile.fp8_gemm_rate(name);
    if (rate > 0) return rate;
    std::string runs;
    for (const auto& [known, value] : profile.fp8_recipes())
        runs += (runs.empty() ? "" : ", ") + known;
    if (recipe == core::Fp8Recipe::nvfp4)
        throw core::SpecError("parallel.fp4", "profile " + profile.name() +
                                                  " does not run NVFP4 (it has no fp4 GEMM table: "
                                                  "NVFP4 needs Blackwell" +
                                                  (runs.empty() ? "" : "; it runs " + runs) + ")");
    throw core::SpecError("parallel.fp8.recipe",
                          "profile " + profile.name() + " does not run FP8 recipe '" + name +
                              "' (" +
                              (runs.empty() ? "it has no FP8 GEMM table: FP8 needs Hopper or later"
                                            : "it runs " + runs) +
                              ")");
}

PipelineLoads pipeline_loads(const core::JobSpec& job, const core::Profile& profile) {
    const CostModel cost(job, profile, CostModel::NoChunks{});
    const LayerView base = LayerView::of(job.plan, job.training.seq_length);
    const std::int64_t vocab = job.model.padded_vocab_size(job.plan.tp);
    const auto seconds = [&](const std::vector<Op>& ops) {
        double s = 0.0;
        for (const PassCost& pc : cost.unit_costs(ops, 0)) s += pc.total_s();
        return s;
    };
    PipelineLoads loads;
    loads.embedding_s = seconds(embedding_ops(job.model, base, vocab));
    loads.head_s = seconds(head_ops(job.model, base, vocab));
    for (std::int64_t d = 0; d < job.model.mtp_num_layers; ++d) // MTP sits with the head
        loads.head_s += seconds(mtp_ops(job.model, mtp_view(job, base, d), vocab, d));
    LayerView v = base;
    v.recompute = job.recompute_at(0);
    // Layers differ only by being MoE or dense and by running in FP8 or not.
    std::map<std::pair<bool, int>, double> kinds;
    for (std::int64_t layer = 0; layer < job.model.num_layers; ++layer) {
        v.fp8 = job.layer_fp8(layer);
        const auto key = std::make_pair(job.model.is_moe_layer(layer), int(v.fp8));
        auto it = kinds.find(key);
        if (it == kinds.end())
            it = kinds.emplace(key, seconds(layer_ops(job.model, v, layer))).first;
        loads.layer_s.push_back(it->second);
    }
    return loads;
}

double PipelineLoads::heaviest_stage_s(const core::PipelineSplit& split) const {
    double heaviest = 0.0;
    for (std::int64_t vs = 0; vs < split.stages(); ++vs) {
        double s = vs == 0 ? embedding_s : 0.0;
        if (vs == split.stages() - 1) s += head_s;
        for (std::int64_t l = 0; l < split.layers_of(vs); ++l)
            s += layer_s[std::size_t(split.first_layer(vs) + l)];
        heaviest = std::max(heaviest, s);
    }
    return heaviest;
}

const StageParameters& CostModel::parameters(std::int32_t pipeline_rank) const {
    if (given_parameters_) return given_parameters_->at(std::size_t(pipeline_rank));
    if (parameters_.empty()) parameters_ = parameters_per_stage(job_);
    return parameters_.at(std::size_t(pipeline_rank));
}

const ChunkCost& CostModel::chunk(std::int32_t pipeline_rank, std::int32_t chunk) const {
    return chunks_.at(std::size_t(pipeline_rank * job_.plan.vpp + chunk));
}

double CostModel::send_recv_s(std::int32_t from_rank, std::int32_t to_rank, double bytes) const {
    const std::int64_t a = representative(from_rank), b = representative(to_rank);
    const std::int64_t domain = job_.cluster.fabric_domain();
    const bool same_node = a / domain == b / domain;
    const std::string& fabric =
        same_node ? job_.cluster.intra_node_fabric : job_.cluster.inter_node_fabric;
    const core::Timing t = profile_.collective(fabric, core::Collective::send_recv, 2, bytes);
    if (!t.fallback.empty()) ++fallbacks_[t.fallback];
    return t.seconds;
}

double CostModel::p2p_s(std::int32_t from_rank, std::int32_t to_rank) const {
    double seconds = send_recv_s(from_rank, to_rank, p2p_bytes_);
    if (job_.plan.tp > 1 && !job_.plan.sequence_parallel) // the receiver's all-gather
        seconds += collective_s(core::GroupKind::tensor, to_rank, core::Collective::all_gather,
                                p2p_bytes_ * double(job_.plan.tp));
    return seconds;
}

} // namespace trident::simulator
