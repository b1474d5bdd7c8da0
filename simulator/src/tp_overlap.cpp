// Tensor-parallel collectives timed with the GEMMs they meet (Op::pairing): what Megatron-Core
// and Transformer Engine run, not an ideal hide-everything model.
//
// Without --tp-comm-overlap only the backward's collectives that need not wait overlap: the
// re-gather of a column-parallel layer's input beside its dgrad and the reduce-scatter (or
// all-reduce) of its input gradient beside its wgrad, launched asynchronously on NCCL's own
// SMs. The forward's all-gathers and reduce-scatters, and the gather of a row-parallel
// layer's output gradient, wait for or are waited on by their GEMMs.
//
// With it, Transformer Engine's userbuffers (transformer_engine/pytorch/module/base.py,
// initialize_ub's default config) run each as its method:
//   ring exchange (qkv/fc1 forward, proj/fc2 dgrad): the GEMM in tp pieces of m/tp rows, each
//     computed while the next piece arrives from a neighbour over the copy engines (no SMs):
//     (tp − 1) · max(piece GEMM, piece transfer) + piece GEMM;
//   pipeline (proj/fc2 forward): the GEMM in 4 pieces on the SMs 16 leave it (set_sm_margin),
//     each piece reduce-scattered while the next computes: g + 3 · max(g, r) + r;
//   bulk (the backward's re-gather and reduce-scatter): the collective on 16 SMs beside the
//     whole GEMM.
// Every piece is timed on the profile's own GEMM and collective tables, so what smaller GEMMs
// and messages lose comes out of the same measurements as everything else (Wang et al. 2023,
// "Overlap Communication with Dependent Computation via Decomposition", ASPLOS: the gain
// depends on the pieces' efficiency). A bulk overlap on s of the device's SMs: the GEMM runs on
// the others while both run, T = max(C, G + min(C, G) · s/SMs).
#include "trident/simulator/cost_model.h"

#include <algorithm>

namespace trident::simulator {
namespace {

// Transformer Engine's pipelined reduce-scatter cuts the GEMM in num_splits = 4 (base.py).
constexpr double kPipelineSplits = 4.0;

double bulk_s(double gemm_s, double comm_s, double sm_share) {
    return std::max(comm_s, gemm_s + std::min(comm_s, gemm_s) * sm_share);
}

} // namespace

CostModel::PairedTime CostModel::tp_pair_time(const std::vector<Op>& ops,
                                              const std::vector<double>& seconds, std::size_t i,
                                              std::int32_t r) const {
    const Op& op = ops[i];
    const double comm = seconds[i];
    const PairedTime alone{comm, 0.0};
    if (op.partner < 0 || op.pairing == TpPairing::none || comm <= 0) return alone;
    const Op& gemm = ops[std::size_t(op.partner)];
    // A collective meets its GEMM inside one pass, or — the backward's reduce-scatter and its
    // wgrad — across B and W when they run back to back (a zero-bubble schedule defers W).
    const bool together =
        gemm.phase == op.phase ||
        (op.phase == Phase::backward_input && gemm.phase == Phase::backward_weight &&
         !core::defers_weight_gradients(job_.plan.schedule));
    if (!together) return alone;
    const double g_s = seconds[std::size_t(op.partner)];
    const bool userbuffers = job_.plan.tp_comm_overlap;
    const auto piece_s = [&](double pieces) {
        Op part = gemm;
        part.m = std::max<std::int64_t>(1, std::int64_t(double(gemm.m) / pieces + 0.5));
        return op_s(part, r);
    };
    // The exposed part never exceeds the collective alone; beyond it the pair loses compute.
    const auto split = [&](double free_s, double total_s) {
        const double exposed = std::clamp(free_s - g_s, 0.0, comm);
        return PairedTime{exposed, std::max(0.0, total_s - g_s - exposed)};
    };
    switch (op.pairing) {
    case TpPairing::gather_into: {
        if (!userbuffers) return alone;
        const double tp = double(job_.plan.tp);
        const GroupShape& g = group_shape(core::GroupKind::tensor, r);
        const std::string& fabric =
            g.inter_node ? job_.cluster.inter_node_fabric : job_.cluster.intra_node_fabric;
        const double piece = piece_s(tp);
        const double hop =
            profile_.collective(fabric, core::Collective::send_recv, 2, op.bytes / tp).seconds;
        const double t = (tp - 1.0) * std::max(piece, hop) + piece;
        return split(t, t);
    }
    case TpPairing::scatter_out: {
        if (!userbuffers) return alone;
        const double f = profile_.tp_overlap_slowdown();
        const double piece = piece_s(kPipelineSplits), slowed = piece / (1.0 - f);
        const double scatter =
            collective_s(core::GroupKind::tensor, r, op.collective, op.bytes / kPipelineSplits);
        const auto pipelined = [&](double g) {
            return g + (kPipelineSplits - 1.0) * std::max(g, scatter) + scatter;
        };
        return split(pipelined(piece), pipelined(slowed));
    }
    case TpPairing::beside: {
        if (!job_.plan.async_tp_backward && !userbuffers) return alone;
        const double f = userbuffers ? profile_.tp_overlap_slowdown()
                                     : overlap_slowdown(core::GroupKind::tensor, r);
        return split(std::max(comm, g_s), bulk_s(g_s, comm, f));
    }
    case TpPairing::none:
        break;
    }
    return alone;
}

} // namespace trident::simulator
