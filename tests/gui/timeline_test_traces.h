#pragma once
// Hand-built traces with known events for the timeline tests.
//
// Two pipeline stages, two micro-batches; times in seconds:
//   stage 0: forward mb0 [0,1], mb1 [1,2]; idle [2,4]; backward_input mb0 [4,6], mb1 [6,8];
//            optimizer [8,8.5]; send_activation mb0 [1,1.2] on the p2p stream
//   stage 1: idle [0,1.2]; forward mb0 [1.2,2.2], mb1 [2.2,3.2]; backward_input mb0 [3.2,5.2],
//            mb1 [5.2,7.2]; optimizer [7.2,7.7]; idle [7.7,8.5]
// The step is [0, 8.5]; bubble fractions are 2/8.5 (stage 0) and 2/8.5 (stage 1).
#include "trident/core/trace.h"

#include <cstdint>
#include <random>

namespace trident::gui::testing {

inline core::TraceEvent make_event(std::int32_t rank, core::EventKind kind, std::int32_t microbatch,
                                   double start_s, double end_s,
                                   core::Stream stream = core::Stream::compute) {
    core::TraceEvent event;
    event.rank = rank;
    event.stream = stream;
    event.kind = kind;
    event.microbatch = microbatch;
    event.chunk = microbatch >= 0 ? 0 : -1;
    event.start_s = start_s;
    event.end_s = end_s;
    return event;
}

// `ranks_per_stage` ranks per stage: stage s holds ranks s*ranks_per_stage ... (Megatron's
// order, pipeline outermost), each with the stage's schedule.
inline core::Trace two_stage_trace(int ranks_per_stage = 1) {
    using core::EventKind;
    core::Trace trace;
    trace.source = "simulated";
    for (int r = 0; r < ranks_per_stage; ++r) {
        const std::int32_t first = r;
        const std::int32_t second = ranks_per_stage + r;
        auto& e = trace.events;
        e.push_back(make_event(first, EventKind::forward, 0, 0.0, 1.0));
        e.push_back(make_event(first, EventKind::forward, 1, 1.0, 2.0));
        e.push_back(make_event(first, EventKind::backward_input, 0, 4.0, 6.0));
        e.push_back(make_event(first, EventKind::backward_input, 1, 6.0, 8.0));
        e.push_back(make_event(first, EventKind::optimizer, -1, 8.0, 8.5));
        e.push_back(
            make_event(first, EventKind::send_activation, 0, 1.0, 1.2, core::Stream::pipeline_p2p));
        e.push_back(make_event(second, EventKind::forward, 0, 1.2, 2.2));
        e.push_back(make_event(second, EventKind::forward, 1, 2.2, 3.2));
        e.push_back(make_event(second, EventKind::backward_input, 0, 3.2, 5.2));
        e.push_back(make_event(second, EventKind::backward_input, 1, 5.2, 7.2));
        e.push_back(make_event(second, EventKind::optimizer, -1, 7.2, 7.7));
    }
    return trace;
}

// `count` short compute events spread over `ranks` ranks (the level-of-detail and bench load):
// 1 µs forwards and backwards with 0.5 µs gaps, and a p2p send every tenth event.
inline core::Trace dense_trace(std::size_t count, int ranks) {
    core::Trace trace;
    trace.source = "simulated";
    trace.events.reserve(count);
    const std::size_t per_rank = count / static_cast<std::size_t>(ranks);
    for (int rank = 0; rank < ranks; ++rank) {
        for (std::size_t i = 0; i < per_rank; ++i) {
            const double start_s =
                1e-6 * (static_cast<double>(rank) + 1.5 * static_cast<double>(i));
            const bool p2p = i % 10 == 9;
            const auto kind = p2p           ? core::EventKind::send_activation
                              : (i / 8) % 2 ? core::EventKind::backward_input
                                            : core::EventKind::forward;
            trace.events.push_back(
                make_event(rank, kind, static_cast<std::int32_t>(i % 64), start_s, start_s + 1e-6,
                           p2p ? core::Stream::pipeline_p2p : core::Stream::compute));
        }
    }
    return trace;
}

} // namespace trident::gui::testing
