#pragma once
// What a long run loses to failures and checkpoints: the checkpoint's bytes and save time, the
// job's mean time between failures, Young's (1974) checkpoint interval and the expected share
// of wall time spent on steps that count (goodput), from Daly's (2006) model of a job with
// Poisson failures. docs/simulator.md, "Failures and checkpoints".
#include "trident/core/job.h"

#include <cstdint>
#include <optional>

namespace trident::simulator {

// What Megatron's distributed checkpoint of the job holds and how long it takes to write.
struct CheckpointCost {
    // Every parameter once (data-parallel replicas save one copy between them) in the weights'
    // dtype, plus the optimizer's state: the fp32 master copy and Adam's two moments.
    double bytes = 0.0;
    double write_s = 0.0; // bytes over the job's storage write rate
    double read_s = 0.0;  // the same read back on a restart
    // Device-to-host staging of one GPU's share, which an asynchronous save (Megatron's
    // --async-save) blocks on before the background write; 0 when the cluster gives no rate.
    double stage_s = 0.0;
};

// The job's storage rate: the file system's, or its nodes' links to it when those are slower
// (fully parallel saves spread the checkpoint evenly over every node).
CheckpointCost checkpoint_cost(const core::JobSpec& job, const core::ClusterReliability& r);

struct GoodputOptions {
    std::optional<std::int64_t> save_interval_steps; // Megatron --save-interval; else Young's
    bool async_save = false;                         // Megatron --async-save
    // The run's length in steps (0: unbounded): no interval is longer than the run.
    std::int64_t run_steps = 0;
};

struct Goodput {
    CheckpointCost checkpoint;
    double mtbf_s = 0.0;    // the job's mean time between failures: 1 / Σ rates
    double save_s = 0.0;    // what one save stops training for: the write, or async staging
    double restart_s = 0.0; // relaunch (when the cluster gives it) + reading the checkpoint
    bool relaunch_counted = false;
    double young_interval_s = 0.0;   // sqrt(2 · save_s · mtbf_s), Young (1974)
    std::int64_t interval_steps = 0; // steps between saves (asked, or Young's rounded)
    double interval_s = 0.0;         // interval_steps · step time
    double fraction = 0.0;           // expected training time / expected wall time
};

// SpecError for --async-save on a cluster without a host copy rate.
Goodput goodput(const core::JobSpec& job, const core::ClusterReliability& r, double step_time_s,
                const GoodputOptions& options = {});

// Daly (2006), for exponential failures: the expected wall time to complete `work_s`
// of computation saved every `interval_s` (each save `save_s`), restarting in `restart_s`
// (restarts themselves may fail) with mean time between failures `mtbf_s`.
double expected_wall_s(double work_s, double interval_s, double save_s, double restart_s,
                       double mtbf_s);

} // namespace trident::simulator
