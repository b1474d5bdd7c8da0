#pragma once
// The whole run in `trident plan`: ranking by an objective over the whole run
// (--objective step-time | time-to-train | cost) and the what-if over cluster sizes
// (--nodes 64,128,256): the best layout per size with its scaling efficiency, time to train
// and cost.
#include "train_budget.h"
#include "trident/planner/planner.h"

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace trident::cli {

enum class Objective { step_time, time_to_train, cost };

// "step-time", "time-to-train" or "cost"; the last two need --train-tokens.
Objective parse_objective(const std::string& text, const TrainBudget& budget);

// What `objective` minimises: the step time, or the run's expected wall time or GPU-hours
// (failures and saves counted where the cluster gives their rates; `run` is set for those).
double objective_value(Objective objective, double step_time_s,
                       const std::optional<simulator::TimeToTrain>& run);

// Reorders `best` by the objective (stable: ties keep the planner's order).
void rank_by_objective(std::vector<planner::Candidate>& best, Objective objective,
                       const TrainBudget& budget, const SegmentTimer& timer);

// One cluster size of a --nodes list: its best layout, or why it has none.
struct SizeResult {
    std::int64_t nodes = 0;
    std::int64_t devices = 0;
    std::optional<planner::Candidate> best;
    std::string none_reason; // the planner's one-line reason when no layout fits
    std::optional<simulator::TimeToTrain> run;
    double scaling_efficiency = 0.0; // tokens/s per device over the smallest size's
};

// Fills each size's run and scaling efficiency; returns the index of the best size by the
// objective, or sizes.size() when no size has a layout.
std::size_t finish_sizes(std::vector<SizeResult>& sizes, Objective objective,
                         const TrainBudget& budget, const SegmentTimer& timer);

// "tp 8 pp 4 dp 16 interleaved-1f1b vpp 5 mbs 1": a layout in one table cell.
std::string layout_cell(const core::ParallelPlan& p);

void print_sizes(const std::vector<SizeResult>& sizes, std::size_t best, Objective objective,
                 std::ostream& out);
core::Json sizes_json(const std::vector<SizeResult>& sizes, std::size_t best, Objective objective,
                      double memory_budget_bytes);

} // namespace trident::cli
