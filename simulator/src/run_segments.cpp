#include "trident/simulator/run_segments.h"

#include "trident/core/spec_error.h"
#include "trident/simulator/time_to_train.h"

#include <cmath>
#include <cstdio>

namespace trident::simulator {
namespace {

void append(std::vector<RunSegment>& segments, std::int64_t batch, std::int64_t seq,
            std::int64_t steps) {
    if (!segments.empty() && segments.back().global_batch_size == batch &&
        segments.back().seq_length == seq)
        segments.back().steps += steps;
    else
        segments.push_back({batch, seq, steps});
}

} // namespace

std::vector<RunSegment> rampup_segments(const BatchRampup& ramp, std::int64_t global_batch_size,
                                        std::int64_t seq_length, double tokens,
                                        const std::string& field) {
    const std::int64_t diff = global_batch_size - ramp.start;
    if (ramp.start < 1 || ramp.increment < 1 || ramp.samples < 1)
        throw core::SpecError(field, "START, INCREMENT and SAMPLES must each be at least 1");
    if (diff <= 0 || diff % ramp.increment != 0)
        throw core::SpecError(field, "the global batch " + std::to_string(global_batch_size) +
                                         " must be START " + std::to_string(ramp.start) +
                                         " plus a whole number (at least 1) of INCREMENT " +
                                         std::to_string(ramp.increment));
    const double per_increment = double(ramp.samples) / double(diff / ramp.increment);
    const double budget_samples = tokens / double(seq_length);
    std::vector<RunSegment> segments;
    double consumed = 0.0;
    while (consumed < budget_samples) {
        // Megatron: past the ramp the full batch, else start + ⌊consumed / per⌋ · increment,
        // held until consumed crosses the next level's boundary.
        std::int64_t batch = global_batch_size;
        double until = budget_samples;
        if (consumed <= double(ramp.samples)) {
            const auto level = std::int64_t(consumed / per_increment);
            batch = ramp.start + level * ramp.increment;
            if (batch < global_batch_size)
                until = std::min(until, double(level + 1) * per_increment);
        }
        const auto steps =
            std::max<std::int64_t>(1, std::int64_t(std::ceil((until - consumed) / double(batch))));
        append(segments, batch, seq_length, steps);
        consumed += double(steps * batch);
    }
    return segments;
}

std::vector<SequenceStage> parse_sequence_schedule(const std::string& text,
                                                   const std::string& field) {
    std::vector<SequenceStage> stages;
    std::size_t start = 0;
    while (start <= text.size()) {
        const std::size_t comma = std::min(text.find(',', start), text.size());
        const std::string item = text.substr(start, comma - start);
        const std::size_t colon = item.find(':');
        long long length = 0;
        char tail = 0;
        if (colon == std::string::npos ||
            std::sscanf(item.substr(0, colon).c_str(), "%lld%c", &length, &tail) != 1 || length < 1)
            throw core::SpecError(field, "expected LENGTH:TOKENS[,LENGTH:TOKENS…] such as "
                                         "8192:2.8T,131072:800B, got \"" +
                                             text + "\"");
        stages.push_back({length, parse_token_count(item.substr(colon + 1), field)});
        start = comma + 1;
    }
    return stages;
}

std::vector<RunSegment> sequence_segments(const std::vector<SequenceStage>& stages,
                                          std::int64_t global_batch_size) {
    std::vector<RunSegment> segments;
    for (const SequenceStage& s : stages) {
        const double per_step = double(global_batch_size * s.seq_length);
        append(segments, global_batch_size, s.seq_length,
               std::int64_t(std::ceil(s.tokens / per_step)));
    }
    return segments;
}

} // namespace trident::simulator
