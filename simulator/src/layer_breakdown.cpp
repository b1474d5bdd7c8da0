#include "trident/simulator/layer_breakdown.h"

#include "trident/core/rank_grid.h"
#include "trident/simulator/cost_model.h"

#include <cstdio>
#include <ostream>
#include <string>

namespace trident::simulator {

double LayerBreakdown::total_s() const {
    double s = 0.0;
    for (const OpTime& t : ops) s += t.seconds;
    return s;
}

double LayerBreakdown::phase_s(Phase phase) const {
    double s = 0.0;
    for (const OpTime& t : ops)
        if (t.op.phase == phase) s += t.seconds;
    return s;
}

std::vector<LayerBreakdown> layer_breakdowns(const core::JobSpec& job,
                                             const core::Profile& profile) {
    const CostModel cost(job, profile);
    const LayerView base = LayerView::of(job.plan, job.training.seq_length);
    const std::int64_t vocab = job.model.padded_vocab_size(job.plan.tp);
    const auto timed = [&](std::string title, const std::vector<Op>& ops) {
        LayerBreakdown b{std::move(title), {}};
        for (const Op& op : ops) b.ops.push_back({op, cost.operation_s(op, 0)});
        return b;
    };
    std::vector<LayerBreakdown> out;
    bool dense_seen = false, moe_seen = false;
    for (std::int64_t layer = 0; layer < job.model.num_layers; ++layer) {
        const bool moe = job.model.is_moe_layer(layer);
        if (moe ? moe_seen : dense_seen) continue;
        (moe ? moe_seen : dense_seen) = true;
        LayerView v = base;
        v.recompute = job.recompute_at(0);
        v.fp8 = job.layer_fp8(layer);
        out.push_back(timed("layer " + std::to_string(layer) + (moe ? " (MoE)" : " (dense)"),
                            layer_ops(job.model, v, layer)));
    }
    out.push_back(timed("embedding", embedding_ops(job.model, base, vocab)));
    out.push_back(timed("loss head", head_ops(job.model, base, vocab)));
    for (std::int64_t d = 0; d < job.model.mtp_num_layers; ++d)
        out.push_back(timed("MTP module " + std::to_string(d + 1),
                            mtp_ops(job.model, mtp_view(job, base, d), vocab, d)));
    return out;
}

namespace {

std::string text(const char* format, double a, double b = 0.0, double c = 0.0, double d = 0.0) {
    char buffer[96];
    std::snprintf(buffer, sizeof buffer, format, a, b, c, d);
    return buffer;
}

std::string phase_name(const Op& op) {
    if (op.recompute) return "B*";
    switch (op.phase) {
    case Phase::forward:
        return "F";
    case Phase::backward_input:
        return "B";
    case Phase::backward_weight:
        return "W";
    }
    return "?";
}

// The operation's shape and what it moves, as a user reads it.
std::string shape(const Op& op) {
    switch (op.kind) {
    case OpKind::gemm: {
        std::string s = text("%.0fx%.0fx%.0f", double(op.m), double(op.n), double(op.k));
        if (op.count > 1) s += text(op.grouped ? " ·%.0f groups" : " ·%.0f", double(op.count));
        return s + (op.fp8 ? " fp8" : "");
    }
    case OpKind::attention:
        return text("%.0f heads·seq %.0f·d %.0f", double(op.batch_heads), double(op.seq),
                    double(op.head_dim));
    case OpKind::memory_bound:
        return std::string(core::kMemoryKernelNames[std::size_t(op.kernel)]) +
               text(" %.1f MB", op.bytes / 1e6);
    case OpKind::collective:
        return std::string(core::kCollectiveNames[std::size_t(op.collective)]) + " over " +
               std::string(core::kGroupKindNames[std::size_t(op.group)]) +
               text(" %.1f MB", op.bytes / 1e6);
    }
    return "";
}

// TFLOP/s for GEMMs and attention, GB/s moved for the rest.
std::string rate(const OpTime& t) {
    if (t.seconds <= 0) return "";
    const Op& op = t.op;
    if (op.kind == OpKind::gemm || op.kind == OpKind::attention) {
        const double flops =
            op.flops * double(op.count) * (op.kind == OpKind::attention ? op.work_fraction : 1.0);
        return text("%.0f TFLOP/s", flops / t.seconds / 1e12);
    }
    return text("%.0f GB/s", op.bytes * double(op.count) / t.seconds / 1e9);
}

std::string pad(std::string s, std::size_t width) {
    if (s.size() < width) s.append(width - s.size(), ' ');
    return s;
}

} // namespace

void print_layer_breakdowns(const std::vector<LayerBreakdown>& breakdowns, std::ostream& out) {
    out << "per-operation time of one micro-batch on pipeline rank 0 (B* = recomputation):\n";
    for (const LayerBreakdown& b : breakdowns) {
        const double total = b.total_s();
        out << "\n"
            << b.title
            << text(": %.3f ms (F %.3f, B %.3f, W %.3f)\n", total * 1e3,
                    b.phase_s(Phase::forward) * 1e3, b.phase_s(Phase::backward_input) * 1e3,
                    b.phase_s(Phase::backward_weight) * 1e3);
        out << "  phase  operation              shape                                  ms   share"
               "  rate\n";
        for (const OpTime& t : b.ops) {
            if (t.seconds <= 0) continue;
            out << "  " << pad(phase_name(t.op), 7) << pad(std::string(t.op.name), 23)
                << pad(shape(t.op), 36) << text("%7.3f", t.seconds * 1e3)
                << text("%7.1f%%", total > 0 ? 100.0 * t.seconds / total : 0.0) << "  " << rate(t)
                << "\n";
        }
    }
}

} // namespace trident::simulator
