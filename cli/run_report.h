#pragma once
// What `trident run` tells on rank 0 as it trains: a line every --log-interval steps (loss and
// step time averaged over the interval, as Megatron prints them), validations, saves, the
// progress bar, and an end-of-run summary.
#include "progress_bar.h"
#include "trident/core/job.h"
#include "trident/executor/training_loop.h"

#include <cstdint>
#include <optional>
#include <string>

namespace trident::cli {

executor::TrainingLoopHooks report_hooks(ProgressBar& bar, const std::string& save_dir,
                                         std::int64_t log_interval);

// Steps, tokens, mean and median step time, tokens/s, MFU, and the time saves and validation
// took, for the steps this run trained.
void print_run_summary(const executor::TrainingSummary& summary, const core::JobSpec& job);

} // namespace trident::cli
