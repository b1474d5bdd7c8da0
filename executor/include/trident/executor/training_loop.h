#pragma once
// The training loop `trident run` drives: steps [first_step, train_iters) of a Trainer, the
// last one traced, validation every eval_interval steps and after the last, a checkpoint every
// save_interval steps and after the last, an early stop at exit_interval, and the figures of
// every step — kept for the caller, reported through hooks as they happen, and written as
// JSON (trident.metrics/1) so tools and tests read numbers instead of scraping stdout.
// Collective over the job's ranks; only rank 0 reports and writes files.
#include "trident/core/job.h"
#include "trident/executor/exit_signal.h"
#include "trident/executor/process_groups.h"
#include "trident/executor/run_goodput.h"
#include "trident/executor/trainer.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace trident::executor {

// Fault injection to rehearse --distributed-timeout-minutes (TRIDENT_FAULT_STALL=RANK:STEP:
// SECONDS): that rank sleeps before that step (1-based) while the others go on into it.
struct InjectedStall {
    int rank = -1; // -1: none
    std::int64_t step = 0;
    double seconds = 0.0;
};

// TRIDENT_FAULT_STALL's value; none for a null or empty one, SpecError for a malformed one.
InjectedStall injected_stall(const char* text);

// Fault injection to rehearse a lost launch (TRIDENT_FAULT_CRASH=RANK:STEP): that rank exits
// at once with status 70 after step STEP (1-based), saving and reporting nothing more.
struct InjectedCrash {
    int rank = -1; // -1: none
    std::int64_t step = 0;
};
InjectedCrash injected_crash(const char* text);

struct TrainingLoopOptions {
    std::int64_t first_step = 0; // steps already done (a resumed checkpoint's iteration)
    std::uint64_t seed = 0;      // recorded in checkpoints
    std::string trace;           // the last step's measured timeline (Chrome trace); "": none
    std::string metrics_json;    // per-step figures; "": none
    std::string save;            // checkpoint directory; "": none
    std::int64_t save_interval = 0, exit_interval = 0, eval_interval = 0, eval_iters = 1;
    SampleSource validation;                // null: no validation
    double model_flops_per_step = 0.0;      // Narayanan et al. 2021, what MFU counts
    std::optional<double> peak_flops_per_s; // per device; none: no MFU
    // Stop early, saving first (with `save`): when any rank has received the signal
    // (--exit-signal-handler), or once the loop has run this long (--exit-duration-in-mins).
    // Every rank takes the same decision after the same step: the ranks' flags and elapsed
    // times are reduced (max) after each step.
    const ExitSignal* exit_signal = nullptr;
    double exit_duration_s = 0.0; // 0: none
    InjectedStall stall;
    InjectedCrash crash;
    // When the command started (goodput counts start-up from it); default: the loop's start.
    std::optional<std::chrono::steady_clock::time_point> launched;
    std::int64_t ledger_interval = 1; // steps between goodput.json updates (the log interval)
};

struct SaveTime {
    std::int64_t after_step = 0;
    double blocking_s = 0.0; // how long the save stopped training (rank 0's wall time)
};

struct StepReport {
    StepStats stats;
    double tokens_per_s = 0.0;
    double flops_per_device_s = 0.0;
    std::optional<double> mfu;
    std::int64_t skipped_so_far = 0;
};

struct ValidationReport {
    std::int64_t after_step = 0;
    double loss = 0.0;
    double perplexity() const;
};

struct TrainingSummary {
    std::int64_t last_step = 0; // the step the loop stopped after
    std::vector<StepReport> steps;
    std::vector<ValidationReport> validations;
    double peak_activation_bytes = 0.0; // the busiest rank's, over every step
    double peak_parameter_bytes = 0.0;  // the busiest rank's parameters held at once
    std::string stopped_early;          // why the loop stopped before train_iters; "" if not
    std::vector<SaveTime> saves;        // each save and how long it blocked training
    RunTime launch;                     // this launch's wall time by what it was spent on
    RunTime so_far; // with --save: every launch that saved into that folder (else = launch)
};

// What rank 0 is told as the loop goes (each may be empty).
struct TrainingLoopHooks {
    std::function<void(const StepReport&, std::int64_t total_steps)> on_step;
    std::function<void(const ValidationReport&)> on_validation;
    std::function<void(const SaveTime&)> on_save;
};

TrainingSummary run_training_loop(Trainer& trainer, const core::JobSpec& job, ProcessGroups& groups,
                                  const TrainingLoopOptions& options,
                                  const TrainingLoopHooks& hooks = {});

// The summary's "goodput": this launch's time by use, each save's blocking time, and the run so
// far (trident.metrics/1's "goodput").
core::Json goodput_json(const TrainingSummary& summary);

// The trident.metrics/1 document of a summary.
core::Json metrics_json(const core::JobSpec& job, const TrainingSummary& summary);

} // namespace trident::executor
