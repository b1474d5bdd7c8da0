#include "trident/simulator/cost_model.h"

#include "trident/core/schedule.h"
#include "trident/simulator/flops.h"

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

double CostModel::collective_s(core::GroupKind kind, std::int32_t pipeline_rank, core::Collective c,
                               double bytes) const {
    const std::int64_t rank = representative(pipeline_rank);
    const auto members = grid_.group_of(kind, rank);
    if (members.size() < 2 || bytes <= 0) return 0.0;
    const std::string& fabric = grid_.nodes_spanned(kind, rank, job_.cluster.devices_per_node) == 1
                                    ? job_.cluster.intra_node_fabric
                                    : job_.cluster.inter_node_fabric;
    const core::Timing t = profile_.collective(fabric, c, std::int64_t(members.size()), bytes);
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
        t = profile_.gemm(dtype, op.m, op.n, op.k);
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
    }
}

} // namespace

CostModel::CostModel(const core::JobSpec& job, const core::Profile& profile)
    : job_(job), profile_(profile), grid_(job.plan) {
    const core::ParallelPlan& p = job.plan;
    const LayerView base = LayerView::of(p, job.training.seq_length);
    const std::int64_t per_chunk = job.layers_per_model_chunk();
    const std::int64_t vocab = job.model.padded_vocab_size(p.tp);
    const std::int32_t last = std::int32_t(p.pp * p.vpp - 1);
    // Megatron's scatter/gather: with tp > 1 each stage sends 1/tp of the activation and the
    // receiver all-gathers it over NVLink (Narayanan et al. 2021, §4.1); sequence parallelism
    // already holds 1/tp.
    p2p_bytes_ = double(base.tokens()) * double(job.model.hidden_size) *
                 double(core::dtype_bytes(job.model.precision.params)) / double(p.tp);

    // Identical layers cost the same: time each (kind of layer, recomputation, which of its
    // collective groups cross nodes) once.
    chunks_.resize(std::size_t(p.pp * p.vpp));
    std::map<std::tuple<bool, int, int>, std::array<PassCost, 3>> cache;
    for (std::int32_t r = 0; r < p.pp; ++r) {
        int placement = 0;
        for (auto kind :
             {core::GroupKind::tensor, core::GroupKind::context, core::GroupKind::expert})
            placement = placement * 2 + (grid_.nodes_spanned(kind, representative(r),
                                                             job.cluster.devices_per_node) > 1);
        for (std::int32_t c = 0; c < p.vpp; ++c) {
            const std::int32_t vs = core::virtual_stage(c, std::int32_t(p.pp), r);
            ChunkCost& cost = chunks_[std::size_t(r * p.vpp + c)];
            for (std::int64_t layer = vs * per_chunk; layer < (vs + 1) * per_chunk; ++layer) {
                LayerView v = base;
                v.recompute = job.layer_recompute(layer);
                const auto key =
                    std::make_tuple(job.model.is_moe_layer(layer), int(v.recompute), placement);
                auto it = cache.find(key);
                if (it == cache.end())
                    it = cache.emplace(key, by_phase(layer_ops(job.model, v, layer), r)).first;
                accumulate(cost, it->second);
            }
            if (vs == 0) accumulate(cost, by_phase(embedding_ops(job.model, base, vocab), r));
            if (vs == last) accumulate(cost, by_phase(head_ops(job.model, base, vocab), r));
        }
    }
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
