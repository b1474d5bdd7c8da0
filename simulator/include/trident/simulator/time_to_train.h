#pragma once
// The whole run, not one step: how long and how many GPU-hours a token budget takes at the
// simulated step time, with the failures and checkpoints of the cluster's reliability figures
// when it has them, and what it costs at a price per GPU-hour. (docs/simulator.md, "Time to
// train" and "Failures and checkpoints".)
#include "trident/simulator/goodput.h"
#include "trident/simulator/run_segments.h"
#include "trident/simulator/simulate.h"

#include <cstdint>
#include <optional>
#include <string>

namespace trident::simulator {

// "15T", "300B", "2.5e12", "1000000": tokens. K, M, B (or G) and T are powers of 1000, as
// papers count tokens. SpecError(field) for anything else, or a count below one token.
double parse_token_count(const std::string& text, const std::string& field);
// 15.7 M, 3.58 T: three significant digits and a power-of-1000 letter, as papers count.
std::string token_count_text(double tokens);

// A segment of the run with its simulated step time; time_to_train fills the rest.
struct SegmentTime {
    RunSegment segment;
    double step_time_s = 0.0;
    std::string layout;   // the layout it runs with, when re-planned ("": the job's)
    double train_s = 0.0; // steps · step time
    double wall_s = 0.0;  // with its failures and saves
    double goodput = 1.0; // train_s / wall_s
};

struct TimeToTrain {
    double tokens = 0.0;         // the budget asked for
    std::int64_t steps = 0;      // whole optimizer steps to reach it
    double trained_tokens = 0.0; // steps · tokens per step (≥ tokens)
    double train_s = 0.0;        // steps · step time: compute only, no failures or saves
    // With the cluster's reliability: saves, failures and restarts; wall_s = train_s / fraction.
    std::optional<Goodput> goodput;
    double wall_s = 0.0;        // expected wall time (train_s without reliability figures)
    double failures = 0.0;      // expected failures over wall_s
    double gpu_hours = 0.0;     // devices · wall_s / 3600
    std::optional<double> cost; // gpu_hours · price, when a price is given
    // The run's segments (one, or a ramp-up's and a sequence schedule's); `goodput` is then
    // the longest segment's save plan with the whole run's fraction.
    std::vector<SegmentTime> segments;
};

// `tokens` for `job` at `step_time_s`; `gpu_hour_price` (currency per GPU-hour) when known.
// Failures and checkpoints count when job.cluster.reliability is set.
TimeToTrain time_to_train(const core::JobSpec& job, double step_time_s, double tokens,
                          std::optional<double> gpu_hour_price = std::nullopt,
                          const GoodputOptions& saves = {});
// The same over segments timed one by one (each with its own goodput); `tokens` is the budget
// they were cut from.
TimeToTrain time_to_train(const core::JobSpec& job, std::vector<SegmentTime> segments,
                          double tokens, std::optional<double> gpu_hour_price = std::nullopt,
                          const GoodputOptions& saves = {});

// "15.0 T tokens: 3,576,279 steps, 41.2 days, 15.7 M GPU-hours, $31.4 M at $2.00/GPU-hour"
std::string time_to_train_text(const TimeToTrain& t);

core::Json to_json(const TimeToTrain& t);

} // namespace trident::simulator
