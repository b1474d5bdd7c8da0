#include "trident/simulator/cost_model.h"

#include "trident/core/schedule.h"
#include "trident/core/spec_error.h"
#include "trident/simulator/flops.h"

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
         (within_stage && (p.tp * p.cp * p.dp) % job_.cluster.devices_per_node == 0)))
        return group_shape(kind, 0);
    GroupShape& g = group_shapes_.at(std::size_t(kind) * std::size_t(job_.plan.pp) +
                                     std::size_t(pipeline_rank));
    if (g.size < 0) {
        const std::int64_t rank = representative(pipeline_rank);
        g.size = std::int64_t(grid_.group_of(kind, rank).size());
        g.inter_node = grid_.nodes_spanned(kind, rank, job_.cluster.devices_per_node) > 1;
    }
    return g;
}

double CostModel::collective_s(core::GroupKind kind, std::int32_t pipeline_rank, core::Collective c,
                               double bytes) const {
    const GroupShape& g = group_shape(kind, pipeline_rank);
    if (g.size < 2 || bytes <= 0) return 0.0;
    const std::string& fabric =
        g.inter_node ? job_.cluster.inter_node_fabric : job_.cluster.intra_node_fabric;
    const core::Timing t = profile_.collective(fabric, c, g.size, bytes);
    if (!t.fallback.empty()) ++fallbacks_[t.fallback];
    return t.seconds;
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
    case OpKind::gemm:
        if (op.fp8) {
            t = profile_.gemm(core::Dtype::fp8, op.m, op.n, op.k);
            t.seconds /= fp8_rate_;
        } else {
            t = profile_.gemm(dtype, op.m, op.n, op.k);
        }
        break;
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
        return double(op.count) * collective_s(op.group, pipeline_rank, op.collective, op.bytes);
    }
    if (!t.fallback.empty()) ++fallbacks_[t.fallback];
    return double(op.count) * t.seconds;
}

std::array<PassCost, 3> CostModel::by_phase(const std::vector<Op>& ops,
                                            std::int32_t pipeline_rank) const {
    std::array<PassCost, 3> passes{};
    for (const Op& op : ops) {
        PassCost& c = passes[std::size_t(op.phase)];
        const double s = op_s(op, pipeline_rank);
        if (op.kind == OpKind::collective)
            c.collective_s += s;
        else if (op.recompute)
            c.recompute_s += s;
        else
            c.compute_s += s;
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
    }
}

} // namespace

CostModel::CostModel(const core::JobSpec& job, const core::Profile& profile,
                     const std::vector<StageParameters>* parameters, LayerCostCache* layer_costs)
    : job_(job), profile_(profile), grid_(job.plan), fp8_rate_(fp8_rate(job, profile)) {
    if (parameters) parameters_ = *parameters;
    const core::ParallelPlan& p = job.plan;
    const LayerView base = LayerView::of(p, job.training.seq_length);
    const core::PipelineSplit split = job.pipeline_split();
    const std::int64_t vocab = job.model.padded_vocab_size(p.tp);
    const std::int32_t last = std::int32_t(p.pp * p.vpp - 1);
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
        return LayerCostCache::Key{
            p.tp, p.cp,      p.ep, p.micro_batch_size, p.sequence_parallel,    p.flash_attention,
            kind, recompute, fp8,  placement,          job.training.seq_length};
    };
    const auto cached = [&](const LayerCostCache::Key& key, auto&& ops, std::int32_t r) {
        auto it = cache.entries.find(key);
        if (it == cache.entries.end()) it = cache.entries.emplace(key, by_phase(ops(), r)).first;
        return it->second;
    };
    for (std::int32_t r = 0; r < p.pp; ++r) {
        int placement = 0;
        for (auto kind :
             {core::GroupKind::tensor, core::GroupKind::context, core::GroupKind::expert})
            placement = placement * 2 + group_shape(kind, r).inter_node;
        for (std::int32_t c = 0; c < p.vpp; ++c) {
            const std::int32_t vs = core::virtual_stage(c, std::int32_t(p.pp), r);
            ChunkCost& cost = chunks_[std::size_t(r * p.vpp + c)];
            const std::int64_t first = split.first_layer(vs);
            for (std::int64_t layer = first; layer < first + split.layers_of(vs); ++layer) {
                LayerView v = base;
                v.recompute = job.recompute_at(layer - first);
                v.fp8 = job.layer_fp8(layer);
                accumulate(cost, cached(
                                     key_of(job.model.is_moe_layer(layer), int(v.recompute),
                                            int(v.fp8), placement),
                                     [&] { return layer_ops(job.model, v, layer); }, r));
            }
            if (vs == 0)
                accumulate(cost, cached(
                                     key_of(2, 0, 0, placement),
                                     [&] { return embedding_ops(job.model, base, vocab); }, r));
            if (vs == last)
                accumulate(cost, cached(
                                     key_of(3, 0, 0, placement),
                                     [&] { return head_ops(job.model, base, vocab); }, r));
        }
    }
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
        for (const PassCost& pc : cost.by_phase(ops, 0)) s += pc.total_s();
        return s;
    };
    PipelineLoads loads;
    loads.embedding_s = seconds(embedding_ops(job.model, base, vocab));
    loads.head_s = seconds(head_ops(job.model, base, vocab));
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
    if (parameters_.empty()) parameters_ = parameters_per_stage(job_);
    return parameters_.at(std::size_t(pipeline_rank));
}

const ChunkCost& CostModel::chunk(std::int32_t pipeline_rank, std::int32_t chunk) const {
    return chunks_.at(std::size_t(pipeline_rank * job_.plan.vpp + chunk));
}

double CostModel::p2p_s(std::int32_t from_rank, std::int32_t to_rank) const {
    const std::int64_t a = representative(from_rank), b = representative(to_rank);
    const bool same_node = a / job_.cluster.devices_per_node == b / job_.cluster.devices_per_node;
    const std::string& fabric =
        same_node ? job_.cluster.intra_node_fabric : job_.cluster.inter_node_fabric;
    const core::Timing t = profile_.collective(fabric, core::Collective::send_recv, 2, p2p_bytes_);
    if (!t.fallback.empty()) ++fallbacks_[t.fallback];
    double seconds = t.seconds;
    if (job_.plan.tp > 1 && !job_.plan.sequence_parallel) // the receiver's all-gather
        seconds += collective_s(core::GroupKind::tensor, to_rank, core::Collective::all_gather,
                                p2p_bytes_ * double(job_.plan.tp));
    return seconds;
}

} // namespace trident::simulator
