#pragma once
// Trace: the timeline format the simulator and the executor both emit, so a simulated step
// and a measured one can be laid side by side. Times are seconds from the start of the step.
// Written and read as Chrome-trace JSON (Trace Event Format: "ph":"X" complete events, µs
// timestamps, one process per rank and one thread per stream), which Perfetto opens.
#include "trident/core/json_io.h"

#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

namespace trident::core {

enum class Stream : std::uint8_t { compute, pipeline_p2p, data_parallel, tensor_parallel };
inline constexpr std::string_view kStreamNames[] = {"compute", "pipeline p2p", "data parallel",
                                                    "tensor parallel"};

enum class EventKind : std::uint8_t {
    forward,
    backward_input,
    backward_weight,
    recompute,
    send_activation,
    recv_activation,
    send_gradient,
    recv_gradient,
    gradient_reduce,
    parameter_gather,
    optimizer,
};
inline constexpr std::string_view kEventKindNames[] = {
    "forward",         "backward_input",   "backward_weight", "recompute",
    "send_activation", "recv_activation",  "send_gradient",   "recv_gradient",
    "gradient_reduce", "parameter_gather", "optimizer"};

struct TraceEvent {
    std::int32_t rank = 0; // global rank
    Stream stream = Stream::compute;
    EventKind kind = EventKind::forward;
    std::int32_t microbatch = -1; // -1: not tied to a micro-batch
    std::int32_t chunk = -1;
    double start_s = 0.0;
    double end_s = 0.0;
    double bytes = 0.0;
    double flops = 0.0;
    std::int32_t stage = -1; // pipeline rank the event ran on (-1: unknown, e.g. another tool's)
};

struct Trace {
    std::string source; // "simulated" or "measured"
    std::vector<TraceEvent> events;
    // The job the trace is of (JobSpec::to_json: model, cluster, training, plan), so a reader
    // knows every event's stage and chunk without guessing; null for other tools' traces.
    Json plan;
};

void write_chrome_trace(const Trace& trace, std::ostream& out);
// Reads what write_chrome_trace writes; throws SpecError naming the bad event field.
Trace read_chrome_trace(const Json& document, const std::string& path = "trace");

} // namespace trident::core
