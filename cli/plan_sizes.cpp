#include "plan_sizes.h"

#include "trident/core/spec_error.h"

#include <algorithm>
#include <cstdio>

namespace trident::cli {
namespace {

const char* kObjectiveNames[] = {"step-time", "time-to-train", "cost"};

} // namespace

std::string layout_cell(const core::ParallelPlan& p) {
    std::string text = "tp " + std::to_string(p.tp);
    if (p.cp > 1) text += " cp " + std::to_string(p.cp);
    text += " pp " + std::to_string(p.pp) + " dp " + std::to_string(p.dp);
    if (p.ep > 1) text += " ep " + std::to_string(p.ep);
    text += " " + core::to_string(p.schedule);
    if (p.vpp > 1 && p.schedule == core::ScheduleKind::interleaved_1f1b)
        text += " vpp " + std::to_string(p.vpp);
    // What decides memory and speed as much as the degrees: precision, ZeRO, recomputation.
    return text + " mbs " + std::to_string(p.micro_batch_size) + " · " +
           core::precision_name(p.fp8.recipe) + " · zero " + core::sharding_cell(p) + " · " +
           core::short_text(p.recompute);
}

Objective parse_objective(const std::string& text, const TrainBudget& budget) {
    for (int i = 0; i < 3; ++i)
        if (text == kObjectiveNames[i]) {
            const Objective o = Objective(i);
            if (o != Objective::step_time && budget.tokens.empty())
                throw core::SpecError("--objective", text + " needs --train-tokens (the run it "
                                                            "measures)");
            return o;
        }
    throw core::SpecError("--objective",
                          "'" + text + "' is not one of step-time, time-to-train, cost");
}

double objective_value(Objective objective, double step_time_s,
                       const std::optional<simulator::TimeToTrain>& run) {
    if (objective == Objective::step_time) return step_time_s;
    return objective == Objective::time_to_train ? run->wall_s : run->gpu_hours;
}

void rank_by_objective(std::vector<planner::Candidate>& best, Objective objective,
                       const TrainBudget& budget, const SegmentTimer& timer) {
    if (objective == Objective::step_time) return;
    std::vector<std::pair<double, planner::Candidate>> keyed;
    for (planner::Candidate& c : best)
        keyed.emplace_back(objective_value(objective, c.step_time_s,
                                           time_to_train(budget, c.job, c.step_time_s, timer)),
                           std::move(c));
    std::stable_sort(keyed.begin(), keyed.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    best.clear();
    for (auto& [key, c] : keyed) best.push_back(std::move(c));
}

std::size_t finish_sizes(std::vector<SizeResult>& sizes, Objective objective,
                         const TrainBudget& budget, const SegmentTimer& timer) {
    double base_per_device = 0.0; // the smallest size with a layout
    std::size_t best = sizes.size();
    double best_value = 0.0;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
        SizeResult& s = sizes[i];
        if (!s.best) continue;
        const double per_device = s.best->tokens_per_s / double(s.devices);
        if (base_per_device == 0.0) base_per_device = per_device;
        s.scaling_efficiency = per_device / base_per_device;
        s.run = time_to_train(budget, s.best->job, s.best->step_time_s, timer);
        const double value = objective_value(objective, s.best->step_time_s, s.run);
        if (best == sizes.size() || value < best_value) {
            best = i;
            best_value = value;
        }
    }
    return best;
}

void print_sizes(const std::vector<SizeResult>& sizes, std::size_t best, Objective objective,
                 std::ostream& out) {
    const bool runs = std::any_of(sizes.begin(), sizes.end(),
                                  [](const SizeResult& s) { return s.run.has_value(); });
    char line[512];
    std::snprintf(line, sizeof line, "%6s %6s  %-76s %8s %10s %8s %8s %8s", "nodes", "GPUs",
                  "best layout", "step s", "tokens/s", "tok/s/GPU", "MFU%bf16", "scaling");
    out << line;
    if (runs) {
        std::snprintf(line, sizeof line, " %8s %10s %12s %10s", "goodput", "days", "GPU-hours",
                      "cost");
        out << line;
    }
    out << "\n";
    for (std::size_t i = 0; i < sizes.size(); ++i) {
        const SizeResult& s = sizes[i];
        if (!s.best) {
            std::snprintf(line, sizeof line, "%6lld %6lld  no layout fits: ", (long long)s.nodes,
                          (long long)s.devices);
            out << line << s.none_reason << "\n";
            continue;
        }
        const planner::Candidate& c = *s.best;
        std::snprintf(line, sizeof line, "%6lld %6lld  %-76s %8.3f %10.0f %8.0f %8.1f %7.1f%%",
                      (long long)s.nodes, (long long)s.devices, layout_cell(c.job.plan).c_str(),
                      c.step_time_s, c.tokens_per_s, c.tokens_per_s / double(s.devices),
                      100 * c.mfu, 100 * s.scaling_efficiency);
        out << line;
        if (s.run) {
            const double goodput = s.run->goodput ? s.run->goodput->fraction : 1.0;
            std::snprintf(line, sizeof line, " %7.1f%% %10.2f %12.0f", 100 * goodput,
                          s.run->wall_s / 86400.0, s.run->gpu_hours);
            out << line;
            if (s.run->cost) {
                std::snprintf(line, sizeof line, " %10.0f", *s.run->cost);
                out << line;
            }
        }
        out << (i == best ? "  <- best" : "") << "\n";
    }
    if (best < sizes.size())
        out << "best by " << kObjectiveNames[int(objective)] << ": " << sizes[best].nodes
            << " nodes" << (runs ? "" : " (--train-tokens adds time to train and cost)") << "\n";
}

core::Json sizes_json(const std::vector<SizeResult>& sizes, std::size_t best, Objective objective,
                      double memory_budget_bytes) {
    core::Json j;
    j["format"] = "trident.plan-sizes/1";
    j["objective"] = kObjectiveNames[int(objective)];
    j["memory_budget_bytes"] = memory_budget_bytes;
    core::Json rows = core::Json::array();
    for (const SizeResult& s : sizes) {
        core::Json row = {{"nodes", s.nodes}, {"devices", s.devices}};
        if (!s.best) {
            row["best"] = nullptr;
            row["no_layout"] = s.none_reason;
        } else {
            row["best"] = planner::plan_file(*s.best, memory_budget_bytes);
            row["step_time_s"] = s.best->step_time_s;
            row["tokens_per_s"] = s.best->tokens_per_s;
            row["tokens_per_s_per_device"] = s.best->tokens_per_s / double(s.devices);
            row["mfu"] = s.best->mfu;
            row["scaling_efficiency"] = s.scaling_efficiency;
            if (s.run) row["time_to_train"] = simulator::to_json(*s.run);
        }
        rows.push_back(row);
    }
    j["sizes"] = rows;
    j["best_nodes"] = best < sizes.size() ? core::Json(sizes[best].nodes) : core::Json(nullptr);
    return j;
}

} // namespace trident::cli
