#pragma once
// A run whose step changes along the way: Megatron's batch-size ramp-up
// (--rampup-batch-size START INCREMENT SAMPLES) and a sequence-length schedule (short
// sequences first, long-context training last, as Llama 3 was trained), cut into segments of
// constant global batch and sequence length, each timed on its own. docs/simulator.md,
// "Time to train".
#include <cstdint>
#include <string>
#include <vector>

namespace trident::simulator {

// Megatron-Core's RampupBatchsizeNumMicroBatchesCalculator: the global batch starts at `start`
// and grows by `increment` every samples / ((global − start) / increment) consumed samples
// until `samples` have been consumed.
struct BatchRampup {
    std::int64_t start = 0;
    std::int64_t increment = 0;
    std::int64_t samples = 0;
};

// One stretch of the run at one global batch (sequences) and sequence length.
struct RunSegment {
    std::int64_t global_batch_size = 0;
    std::int64_t seq_length = 0;
    std::int64_t steps = 0;
    double tokens() const { return double(steps * global_batch_size * seq_length); }
};

// The segments that train `tokens` under the ramp, then at `global_batch_size`. SpecError
// (`field`) when the ramp cannot reach the global batch in whole increments.
std::vector<RunSegment> rampup_segments(const BatchRampup& ramp, std::int64_t global_batch_size,
                                        std::int64_t seq_length, double tokens,
                                        const std::string& field);

// "4096:2.8T,8192:1T,131072:800B": sequence length and the tokens trained at it, in order.
struct SequenceStage {
    std::int64_t seq_length = 0;
    double tokens = 0.0;
};
std::vector<SequenceStage> parse_sequence_schedule(const std::string& text,
                                                   const std::string& field);
// Each stage at `global_batch_size` sequences per step (whole steps: a stage ends with the
// step that reaches its tokens).
std::vector<RunSegment> sequence_segments(const std::vector<SequenceStage>& stages,
                                          std::int64_t global_batch_size);

} // namespace trident::simulator
