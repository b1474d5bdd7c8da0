#pragma once
// `--train-tokens 15T [--gpu-hour-price P]` on simulate and plan: the time, GPU-hours and cost
// of a whole token budget at the simulated step time, with the cluster's failures and the
// checkpoints they call for (--save-interval, --async-save, what-if failure rates).
#include "memory_fit.h"
#include "trident/core/job.h"
#include "trident/core/profile.h"
#include "trident/core/spec_error.h"
#include "trident/simulator/time_to_train.h"

#include <CLI/CLI.hpp>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <ostream>
#include <string>

namespace trident::cli {

struct TrainBudget {
    std::string tokens; // "": not asked
    std::optional<double> gpu_hour_price;
    simulator::GoodputOptions saves;
    std::optional<double> failures_per_gpu_hour, failures_per_node_hour, relaunch_s;
    std::vector<std::int64_t> rampup; // Megatron --rampup-batch-size START INCREMENT SAMPLES
    std::string sequence_schedule;    // --seq-length-schedule LENGTH:TOKENS,…
};

// Times one segment of the run: the job with that segment's global batch and sequence length
// (its layout kept — then the timer validates it first — or re-planned, and
// SegmentTime::layout says which).
using SegmentTimer = std::function<simulator::SegmentTime(const core::JobSpec&)>;

inline void add_train_budget_options(CLI::App& app, TrainBudget& budget) {
    const std::string group = "Whole run";
    app.add_option("--train-tokens", budget.tokens,
                   "Token budget of the whole run (15T, 300B, 2.5e12): prints time to train, "
                   "steps and GPU-hours at the simulated step time, with failures and saves "
                   "where the cluster has reliability figures")
        ->group(group);
    app.add_option("--gpu-hour-price", budget.gpu_hour_price,
                   "Price of one GPU-hour (any currency): adds the run's cost")
        ->group(group)
        ->check(CLI::PositiveNumber);
    app.add_option_function<std::int64_t>(
           "--save-interval",
           [&budget](const std::int64_t& v) { budget.saves.save_interval_steps = v; },
           "Steps between checkpoints (default: Young's optimum for the cluster's failure rate)")
        ->group(group)
        ->check(CLI::PositiveNumber);
    app.add_option("--rampup-batch-size", budget.rampup,
                   "START INCREMENT SAMPLES: Megatron's batch ramp-up, timed segment by segment")
        ->expected(3)
        ->group(group);
    app.add_option("--seq-length-schedule", budget.sequence_schedule,
                   "LENGTH:TOKENS,... (e.g. 8192:2.8T,131072:800B): train each length for its "
                   "tokens in turn; they add up to --train-tokens")
        ->group(group);
    app.add_flag("--async-save", budget.saves.async_save,
                 "Saves block only while staging to host memory, then write in the background")
        ->group(group);
    app.add_option("--failures-per-gpu-hour", budget.failures_per_gpu_hour,
                   "Job-stopping failures per GPU-hour (overrides the cluster's)")
        ->group(group)
        ->check(CLI::NonNegativeNumber);
    app.add_option("--failures-per-node-hour", budget.failures_per_node_hour,
                   "Job-stopping failures per node-hour (overrides the cluster's)")
        ->group(group)
        ->check(CLI::NonNegativeNumber);
    app.add_option("--relaunch-s", budget.relaunch_s,
                   "Seconds from a failure to the restarted job loading its checkpoint "
                   "(overrides the cluster's)")
        ->group(group)
        ->check(CLI::NonNegativeNumber);
}

// The cluster's reliability figures with the command line's what-ifs applied; SpecError for a
// what-if on a cluster that has none, or one leaving no failure rate.
inline void apply_reliability_options(const TrainBudget& budget, core::ClusterSpec& cluster) {
    const std::pair<const char*, const std::optional<double>*> asked[] = {
        {"--failures-per-gpu-hour", &budget.failures_per_gpu_hour},
        {"--failures-per-node-hour", &budget.failures_per_node_hour},
        {"--relaunch-s", &budget.relaunch_s}};
    for (const auto& [flag, value] : asked)
        if (value->has_value() && !cluster.reliability)
            throw core::SpecError(flag, "cluster " + cluster.name +
                                            " has no \"reliability\" (storage rates are needed "
                                            "too): add it to a cluster file (docs/formats.md)");
    if (!cluster.reliability) return;
    core::ClusterReliability& r = *cluster.reliability;
    r.failures_per_gpu_hour = budget.failures_per_gpu_hour.value_or(r.failures_per_gpu_hour);
    r.failures_per_node_hour = budget.failures_per_node_hour.value_or(r.failures_per_node_hour);
    if (budget.relaunch_s) r.relaunch_s = budget.relaunch_s;
    if (r.failures_per_gpu_hour == 0.0 && r.failures_per_node_hour == 0.0)
        throw core::SpecError("--failures-per-gpu-hour",
                              "0 with a node rate of 0 leaves no failures to model: give a rate "
                              "above 0 (or a cluster without \"reliability\")");
}

// The run cut into segments of constant batch and sequence length: the ramp's, the schedule's,
// or one. SpecError for a malformed ramp or schedule, both at once, or a schedule whose
// stages do not add up to the budget.
inline std::vector<simulator::RunSegment> run_segments(const TrainBudget& budget,
                                                       const core::JobSpec& job, double tokens) {
    const core::TrainingSpec& t = job.training;
    if (!budget.rampup.empty() && !budget.sequence_schedule.empty())
        throw core::SpecError("--seq-length-schedule",
                              "goes without --rampup-batch-size (time them as separate runs)");
    if (!budget.rampup.empty())
        return simulator::rampup_segments({budget.rampup[0], budget.rampup[1], budget.rampup[2]},
                                          t.global_batch_size, t.seq_length, tokens,
                                          "--rampup-batch-size");
    if (!budget.sequence_schedule.empty()) {
        const auto stages =
            simulator::parse_sequence_schedule(budget.sequence_schedule, "--seq-length-schedule");
        double sum = 0.0;
        for (const auto& stage : stages) sum += stage.tokens;
        if (std::abs(sum - tokens) > 1e-9 * tokens)
            throw core::SpecError("--seq-length-schedule", "its stages add up to " +
                                                               simulator::token_count_text(sum) +
                                                               " tokens, not --train-tokens' " +
                                                               simulator::token_count_text(tokens));
        return simulator::sequence_segments(stages, t.global_batch_size);
    }
    return simulator::sequence_segments({{t.seq_length, tokens}}, t.global_batch_size);
}

// The budget's token count and `job` with the what-ifs applied, or nothing when no budget was
// asked for. SpecError for a malformed count, or a price or save option without a budget or
// without the cluster's reliability figures. Commands call it before any work.
inline std::optional<std::pair<double, core::JobSpec>>
check_train_budget(const TrainBudget& budget, const core::JobSpec& job) {
    for (const auto& [flag, value] : {std::pair{"--gpu-hour-price", &budget.gpu_hour_price},
                                      {"--failures-per-gpu-hour", &budget.failures_per_gpu_hour},
                                      {"--failures-per-node-hour", &budget.failures_per_node_hour},
                                      {"--relaunch-s", &budget.relaunch_s}}) {
        if (value->has_value() && !std::isfinite(**value))
            throw core::SpecError(flag, "must be a finite number, not " + std::to_string(**value));
        if (value->has_value() && budget.tokens.empty())
            throw core::SpecError(flag, "goes with --train-tokens (it prices the run)");
    }
    const bool saves = budget.saves.save_interval_steps || budget.saves.async_save;
    const char* save_flag = budget.saves.async_save ? "--async-save" : "--save-interval";
    if (budget.tokens.empty()) {
        if (saves)
            throw core::SpecError(save_flag,
                                  "goes with --train-tokens (it prices the run's saves)");
        if (!budget.rampup.empty())
            throw core::SpecError("--rampup-batch-size", "goes with --train-tokens (it times "
                                                         "the run's first steps)");
        if (!budget.sequence_schedule.empty())
            throw core::SpecError("--seq-length-schedule", "goes with --train-tokens");
        return std::nullopt;
    }
    const double tokens = simulator::parse_token_count(budget.tokens, "--train-tokens");
    core::JobSpec with = job;
    apply_reliability_options(budget, with.cluster);
    if (saves && !with.cluster.reliability)
        throw core::SpecError(save_flag, "cluster " + with.cluster.name +
                                             " has no \"reliability\" figures to price saves "
                                             "with (docs/formats.md)");
    if (budget.saves.async_save && with.cluster.reliability->host_copy_bytes_per_s <= 0)
        throw core::SpecError("--async-save", "cluster " + with.cluster.name +
                                                  " gives no reliability.host_copy_gb_per_s "
                                                  "(the rate an asynchronous save stages at)");
    (void)run_segments(budget, with, tokens); // a malformed ramp or schedule fails now
    return std::pair{tokens, std::move(with)};
}

// A segment run on the job's own layout: checked, simulated, and (unless `allow_oom`) refused
// when it does not fit. What `simulate` times every segment with, and `plan` a ramp's.
inline simulator::SegmentTime time_on_own_layout(const core::JobSpec& segment,
                                                 const core::Profile& profile, bool allow_oom) {
    core::validate(segment);
    const simulator::Report r = simulator::simulate(segment, profile);
    if (!allow_oom) require_fits(r);
    simulator::SegmentTime s;
    s.step_time_s = r.step_time_s;
    return s;
}

// One segment at (global batch, sequence length) `at` timed by `timer`, its refusals named.
inline simulator::SegmentTime time_segment(const TrainBudget& budget, const core::JobSpec& job,
                                           std::pair<std::int64_t, std::int64_t> at,
                                           const SegmentTimer& timer) {
    core::JobSpec segment = job;
    segment.training.global_batch_size = at.first;
    segment.training.seq_length = at.second;
    const std::string what = "the segment at batch " + std::to_string(at.first) + " × " +
                             std::to_string(at.second) + " tokens: ";
    const char* flag = budget.rampup.empty() ? "--seq-length-schedule" : "--rampup-batch-size";
    try {
        return timer(segment); // which validates the segment as it runs it
    } catch (const core::OutOfMemoryError& e) {
        throw core::OutOfMemoryError(e.field(), what + e.reason());
    } catch (const core::SpecError& e) {
        throw core::SpecError(flag, what + e.what());
    }
}

// The whole run for `job` at `step_time_s`, or nothing when no budget was asked for. Segments
// at another batch or sequence length than the job's are timed by `timer` (once each); their
// refusals name the segment.
inline std::optional<simulator::TimeToTrain> time_to_train(const TrainBudget& budget,
                                                           const core::JobSpec& job,
                                                           double step_time_s,
                                                           const SegmentTimer& timer = {}) {
    const auto checked = check_train_budget(budget, job);
    if (!checked) return std::nullopt;
    const auto& [tokens, with] = *checked;
    std::vector<simulator::SegmentTime> timed;
    std::map<std::pair<std::int64_t, std::int64_t>, simulator::SegmentTime> seen;
    const auto own = std::pair{with.training.global_batch_size, with.training.seq_length};
    for (const simulator::RunSegment& segment : run_segments(budget, with, tokens)) {
        const auto key = std::pair{segment.global_batch_size, segment.seq_length};
        if (!seen.contains(key)) {
            simulator::SegmentTime s;
            s.step_time_s = step_time_s;
            if (key != own) s = time_segment(budget, with, key, timer);
            seen.emplace(key, s);
        }
        simulator::SegmentTime s = seen.at(key);
        s.segment = segment;
        timed.push_back(s);
    }
    return simulator::time_to_train(with, std::move(timed), tokens, budget.gpu_hour_price,
                                    budget.saves);
}

} // namespace trident::cli
