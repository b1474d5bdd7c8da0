// `trident plan`'s outputs: the ranking as a table, CSV or JSON, and --explain.
#include "plan_output.h"

#include "format.h"
#include "trident/core/units.h"

#include <algorithm>
#include <cstdio>

namespace trident::cli {
namespace {

// Selective recomputation's modules joined by '+' (a CSV cell); empty otherwise.
std::string csv_modules(const core::Recompute& r) {
    if (r.granularity != core::RecomputeGranularity::selective) return "";
    std::string text = core::recompute_modules_text(r.modules);
    std::replace(text.begin(), text.end(), ',', '+');
    return text;
}

// With capacity factors searched (or set), which each candidate runs: rows that differ only
// there look alike in the table.
void print_capacities(const planner::PlanResult& r, std::ostream& out) {
    bool any = false;
    for (const planner::Candidate& c : r.best)
        any = any || (c.job.model.moe && c.job.model.moe->capacity_factor);
    if (!any) return;
    out << "capacity factor:";
    for (std::size_t i = 0; i < r.best.size(); ++i) {
        const auto& factor = r.best[i].job.model.moe->capacity_factor;
        char cell[48];
        std::snprintf(cell, sizeof cell, " #%zu %s", i + 1,
                      factor ? std::to_string(*factor).substr(0, 4).c_str() : "dropless");
        out << cell;
    }
    out << "\n";
}

} // namespace

void print_table(const planner::PlanResult& r, double budget, std::ostream& out) {
    // FLOP/s in the unit of the fastest candidate's per-device rate; memory in the unit that
    // fits each figure (a CPU model's MiB under a budget of GiB).
    double fastest = 0.0;
    for (const planner::Candidate& c : r.best) fastest = std::max(fastest, c.tflops_per_device);
    const core::Unit rate = core::flop_rate_unit(fastest * 1e12);
    char line[512];
    // MFU names its peak: the parameters' dtype's, and an FP8 layout's FP8 one beside it.
    const std::string bf16 =
        r.best.empty() ? "bf16" : core::to_string(r.best.front().job.model.precision.params);
    const std::string mfu_header = "MFU%" + bf16;
    std::snprintf(
        line, sizeof line,
        "%3s %3s %3s %4s %5s %3s %3s %4s %-17s %4s %3s %5s %-14s %-12s %9s %10s %8s %8s %7s %7s  "
        "%s\n",
        "#", "tp", "cp", "pp", "dp", "ep", "etp", "vpp", "schedule", "mbs", "sp", "zero",
        "precision", "recompute", "step s", "tokens/s", rate.name, mfu_header.c_str(), "MFU%fp8",
        "bubble%", "peak / budget");
    out << line;
    for (std::size_t i = 0; i < r.best.size(); ++i) {
        const planner::Candidate& c = r.best[i];
        const core::ParallelPlan& p = c.job.plan;
        char fp8_cell[16] = "-";
        if (p.fp8.enabled())
            std::snprintf(fp8_cell, sizeof fp8_cell,
                          p.fp8.recipe == core::Fp8Recipe::nvfp4 ? "%.1f*" : "%.1f",
                          100 * c.mfu_fp8_peak);
        std::snprintf(
            line, sizeof line,
            "%3zu %3lld %3lld %4lld %5lld %3lld %3lld %4lld %-17s %4lld %3s %5s %-14s %-12s %9.3f "
            "%10.0f %8.1f %8.1f %7s %7.1f  %s / %s\n",
            i + 1, (long long)p.tp, (long long)p.cp, (long long)p.pp, (long long)p.dp,
            (long long)p.ep, (long long)p.expert_tp(), (long long)p.vpp,
            core::to_string(p.schedule).c_str(), (long long)p.micro_batch_size,
            p.sequence_parallel ? "on" : "off", core::sharding_cell(p).c_str(),
            core::precision_name(p.fp8.recipe).c_str(), core::short_text(p.recompute).c_str(),
            c.step_time_s, c.tokens_per_s, c.tflops_per_device * 1e12 / rate.scale, 100 * c.mfu,
            fp8_cell, 100 * c.bubble_fraction, core::bytes_text(c.peak_memory_bytes).c_str(),
            core::bytes_text(budget).c_str());
        out << line;
    }
    if (std::any_of(r.best.begin(), r.best.end(), [](const planner::Candidate& c) {
            return c.job.plan.fp8.recipe == core::Fp8Recipe::nvfp4;
        }))
        out << "(* nvfp4: MFU of the FP4 peak)\n";
    print_capacities(r, out);
}

void print_csv(const planner::PlanResult& r, std::ostream& out) {
    out << "rank,tp,cp,pp,dp,ep,etp,vpp,schedule,micro_batch_size,sequence_parallel,distributed_"
           "optimizer,zero_stage,sharding_replicas,precision,"
           "recompute,recompute_num_layers,recompute_modules,step_time_s,tokens_per_s,tflops_per_"
           "device,mfu,bubble_"
           "fraction,peak_memory_bytes,capacity_factor\n";
    for (std::size_t i = 0; i < r.best.size(); ++i) {
        const planner::Candidate& c = r.best[i];
        const core::ParallelPlan& p = c.job.plan;
        out << i + 1 << ',' << p.tp << ',' << p.cp << ',' << p.pp << ',' << p.dp << ',' << p.ep
            << ',' << p.expert_tp() << ',' << p.vpp << ',' << core::to_string(p.schedule) << ','
            << p.micro_batch_size << ',' << p.sequence_parallel << ',' << p.distributed_optimizer
            << ',' << p.zero_stage() << ',' << p.sharding.instances << ','
            << core::precision_name(p.fp8.recipe) << ',' << core::to_string(p.recompute.granularity)
            << ',' << p.recompute.num_layers << ',' << csv_modules(p.recompute) << ','
            << exact_number(c.step_time_s) << ',' << exact_number(c.tokens_per_s) << ','
            << exact_number(c.tflops_per_device) << ',' << exact_number(c.mfu) << ','
            << exact_number(c.bubble_fraction) << ',' << exact_number(c.peak_memory_bytes) << ','
            << (c.job.model.moe && c.job.model.moe->capacity_factor
                    ? exact_number(*c.job.model.moe->capacity_factor)
                    : std::string())
            << '\n';
    }
}

core::Json result_json(const planner::PlanResult& r, double budget) {
    core::Json j;
    j["format"] = "trident.plan-search/1";
    j["memory_budget_bytes"] = budget;
    j["layouts"] = r.layouts;
    j["feasible"] = r.feasible;
    j["simulated"] = r.simulated;
    j["seconds"] = r.seconds;
    core::Json best = core::Json::array();
    for (const auto& c : r.best) best.push_back(planner::plan_file(c, budget));
    j["best"] = best;
    core::Json counts = core::Json::object(), examples = core::Json::object();
    for (const auto& [kind, group] : r.rejections) {
        counts[kind] = group.count;
        examples[kind] = group.field + ": " + group.example;
    }
    j["rejections"] = counts;
    j["rejection_examples"] = examples;
    return j;
}

void print_explain(const planner::PlanResult& r, std::ostream& out) {
    out << "\nrejected layouts by reason (each with one example's real values):\n";
    for (const std::string& line : planner::rejection_lines(r, r.rejections.size()))
        out << "  " << line << "\n";
    if (!r.closest_rejected.empty()) {
        out << "closest to fitting:\n";
        for (const auto& rej : r.closest_rejected) {
            const core::ParallelPlan& p = rej.plan;
            out << "  tp " << p.tp << " cp " << p.cp << " pp " << p.pp << " dp " << p.dp << " ep "
                << p.ep << (p.etp ? " etp " + std::to_string(*p.etp) : "") << " vpp " << p.vpp
                << " " << core::to_string(p.schedule) << " mbs " << p.micro_batch_size
                << (p.sequence_parallel ? " sp" : "")
                << (p.zero_stage() > 0 ? " zero" + core::sharding_cell(p) : "") << ": "
                << rej.reason << "\n";
        }
    }
    if (!r.best.empty()) {
        out << "why " << core::short_text(r.best.front().job.plan.recompute)
            << " for #1: " << r.best.front().recompute_reason << "\n";
        out << "pipeline split for #1: " << r.best.front().split_reason << "\n";
        out << "memory savers for #1: "
            << (r.best.front().memory_savers.empty() ? std::string("none")
                                                     : r.best.front().memory_savers)
            << "\n";
        const core::ParallelPlan& p = r.best.front().job.plan;
        out << "data-parallel sharding for #1: " << core::describe_sharding(p)
            << (p.tp_comm_overlap ? "; tensor-parallel communication overlapped" : "") << "\n";
        if (const auto& moe = r.best.front().job.model.moe)
            out << "MoE capacity factor for #1: "
                << (moe->capacity_factor ? std::to_string(*moe->capacity_factor) +
                                               " (copies past it dropped, the rest padded to it)"
                                         : std::string("none (dropless)"))
                << "\n";
        if (r.best.front().job.model.moe)
            out << "MoE token dispatcher for #1: "
                << core::kTokenDispatcherNames[int(p.token_dispatcher)]
                << (p.overlap_moe_expert_parallel_comm
                        ? "; its all-to-alls overlapped (merged forward-backward pairs)"
                        : "")
                << "\n";
        for (std::size_t i = 0; i < r.best.size(); ++i) {
            const planner::Candidate& c = r.best[i];
            if (!c.job.model.moe || c.moe_exchange_s <= 0) continue;
            // Why a layout lost, or what #1 pays: the exchange's span and its exposed share.
            char shares[64];
            std::snprintf(shares, sizeof shares, "%.1f %% of the step, %.1f %% exposed",
                          100 * c.moe_exchange_s / c.step_time_s,
                          100 * c.moe_exposed_s / c.step_time_s);
            out << "MoE exchange for #" << i + 1 << ": "
                << (c.moe_domains > 1 ? "crosses " + std::to_string(c.moe_domains) + " nodes"
                                      : std::string("inside one node"))
                << ", " << shares << "\n";
        }
    }
}

void print_tp_pp_map(const std::vector<planner::TpPpCell>& cells, std::int64_t devices,
                     std::ostream& out) {
    std::vector<std::int64_t> pps;
    for (const planner::TpPpCell& c : cells)
        if (std::find(pps.begin(), pps.end(), c.pp) == pps.end()) pps.push_back(c.pp);
    double fastest = 0.0;
    for (const planner::TpPpCell& c : cells)
        if (c.best) fastest = std::max(fastest, c.best->tokens_per_s);
    out << "\nbest tokens/s per device by tp (rows) and pp (columns); * the fastest:\n";
    char cell[32];
    std::snprintf(cell, sizeof cell, "%6s", "tp\\pp");
    out << cell;
    for (const std::int64_t pp : pps) {
        std::snprintf(cell, sizeof cell, " %9lld", (long long)pp);
        out << cell;
    }
    std::int64_t row = -1;
    for (const planner::TpPpCell& c : cells) {
        if (c.tp != row) {
            row = c.tp;
            std::snprintf(cell, sizeof cell, "\n%6lld", (long long)c.tp);
            out << cell;
        }
        if (c.best)
            std::snprintf(cell, sizeof cell, " %8.0f%s", c.best->tokens_per_s / double(devices),
                          c.best->tokens_per_s == fastest ? "*" : " ");
        else
            std::snprintf(cell, sizeof cell, " %9s", "-");
        out << cell;
    }
    out << "\n";
}

core::Json tp_pp_map_json(const std::vector<planner::TpPpCell>& cells) {
    core::Json rows = core::Json::array();
    for (const planner::TpPpCell& c : cells) {
        core::Json row = {{"tp", c.tp}, {"pp", c.pp}};
        if (c.best) {
            row["step_time_s"] = c.best->step_time_s;
            row["tokens_per_s"] = c.best->tokens_per_s;
            row["mfu"] = c.best->mfu;
        } else {
            row["no_layout"] = c.none_reason;
        }
        rows.push_back(row);
    }
    return rows;
}

} // namespace trident::cli
