#pragma once
// The token streams `trident run` trains and validates on: Megatron-style indexed data
// (--data-path P, --split 98,2,0) or, without a path, the executor's synthetic sequence.
#include "trident/core/job.h"
#include "trident/executor/trainer.h"

#include <cstdint>
#include <string>

namespace trident::cli {

struct TrainingData {
    executor::SampleSource train;      // empty: the trainer's synthetic sequence
    executor::SampleSource validation; // empty: no validation split
    std::string description;           // for the run's banner
};

// Throws SpecError("--data-path" / "--split", …).
TrainingData open_training_data(const std::string& data_path, const std::string& split,
                                const core::JobSpec& job, std::uint64_t seed);

} // namespace trident::cli
