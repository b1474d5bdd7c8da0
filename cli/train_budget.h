#pragma once
// `--train-tokens 15T [--gpu-hour-price P]` on simulate and plan: the time, GPU-hours and cost
// of a whole token budget at the simulated step time.
#include "trident/core/spec_error.h"
#include "trident/simulator/time_to_train.h"

#include <CLI/CLI.hpp>
#include <optional>
#include <ostream>
#include <string>

namespace trident::cli {

struct TrainBudget {
    std::string tokens; // "": not asked
    std::optional<double> gpu_hour_price;
};

inline void add_train_budget_options(CLI::App& app, TrainBudget& budget) {
    const std::string group = "Whole run";
    app.add_option("--train-tokens", budget.tokens,
                   "Token budget of the whole run (15T, 300B, 2.5e12): prints time to train, "
                   "steps and GPU-hours at the simulated step time")
        ->group(group);
    app.add_option("--gpu-hour-price", budget.gpu_hour_price,
                   "Price of one GPU-hour (any currency): adds the run's cost")
        ->group(group)
        ->check(CLI::PositiveNumber);
}

// The whole run for `job` at `step_time_s`, or nothing when no budget was asked for.
// SpecError for a malformed count, or a price without a budget.
inline std::optional<simulator::TimeToTrain>
time_to_train(const TrainBudget& budget, const core::JobSpec& job, double step_time_s) {
    if (budget.tokens.empty()) {
        if (budget.gpu_hour_price)
            throw core::SpecError("--gpu-hour-price", "goes with --train-tokens (it prices them)");
        return std::nullopt;
    }
    const double tokens = simulator::parse_token_count(budget.tokens, "--train-tokens");
    return simulator::time_to_train(job, step_time_s, tokens, budget.gpu_hour_price);
}

} // namespace trident::cli
