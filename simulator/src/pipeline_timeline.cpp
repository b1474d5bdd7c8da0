#include "trident/simulator/pipeline_timeline.h"

#include "trident/core/step_numbers.h"

#include <algorithm>
#include <stdexcept>

namespace trident::simulator {

using core::Action;
using core::ActionKind;
using core::EventKind;
using core::Stream;

double PipelineTimeline::bubble_fraction(std::int32_t rank) const {
    return core::bubble_fraction(core::idle_seconds(makespan_s, busy_s.at(std::size_t(rank))),
                                 makespan_s);
}

PipelineTimeline time_schedule(const core::Schedule& s, const ComputeCost& compute,
                               const TransferCost& transfer, bool record_events, bool sends_block) {
    const std::int32_t p = s.stages, nvs = s.virtual_stages();
    PipelineTimeline t;
    t.busy_s.assign(std::size_t(p), 0.0);
    t.end_s.assign(std::size_t(p), 0.0);
    const std::int32_t chunks = s.chunks;
    t.grads_ready_s.assign(std::size_t(p) * std::size_t(chunks), 0.0);
    // Arrival time of the message each (micro-batch, receiving virtual stage) waits for; < 0
    // while not yet sent. Activations and gradients in separate tables.
    const std::size_t cells = std::size_t(s.microbatches) * std::size_t(nvs);
    std::vector<double> activation_arrival(cells, -1.0), gradient_arrival(cells, -1.0);
    const auto cell = [&](std::int32_t mb, std::int32_t vs) { return std::size_t(mb) * nvs + vs; };

    std::vector<std::size_t> next(std::size_t(p), 0);
    std::vector<double> compute_free(std::size_t(p), 0.0), p2p_free(std::size_t(p), 0.0);
    std::vector<double> data_ready(std::size_t(p), 0.0);   // max arrival of received inputs
    std::vector<double> last_compute(std::size_t(p), 0.0); // end of the latest compute action
    std::size_t remaining = 0;
    for (const auto& r : s.ranks) remaining += r.size();
    if (record_events) t.events.reserve(remaining);

    while (remaining > 0) {
        bool progress = false;
        for (std::int32_t r = 0; r < p; ++r) {
            const auto& actions = s.ranks[std::size_t(r)];
            std::size_t& i = next[std::size_t(r)];
            for (; i < actions.size(); ++i) {
                const Action& a = actions[i];
                const std::int32_t vs = s.virtual_stage(r, a.chunk);
                if (core::is_compute(a.kind)) {
                    const double start =
                        std::max(compute_free[std::size_t(r)], data_ready[std::size_t(r)]);
                    const double end = start + compute(r, a);
                    compute_free[std::size_t(r)] = last_compute[std::size_t(r)] = end;
                    t.busy_s[std::size_t(r)] += end - start;
                    if (a.kind != ActionKind::forward) {
                        double& ready = t.grads_ready_s[std::size_t(r * chunks + a.chunk)];
                        ready = std::max(ready, end);
                    }
                    if (record_events)
                        t.events.push_back({r, Stream::compute, core::to_event_kind(a.kind),
                                            a.microbatch, a.chunk, start, end, 0.0, 0.0, r});
                } else if (a.kind == ActionKind::send_activation ||
                           a.kind == ActionKind::send_gradient) {
                    const bool act = a.kind == ActionKind::send_activation;
                    const double start =
                        std::max(last_compute[std::size_t(r)], p2p_free[std::size_t(r)]);
                    const double end = start + transfer(r, a.peer, a);
                    p2p_free[std::size_t(r)] = end;
                    if (sends_block)
                        compute_free[std::size_t(r)] = std::max(compute_free[std::size_t(r)], end);
                    const std::size_t c = cell(a.microbatch, act ? vs + 1 : vs - 1);
                    (act ? activation_arrival : gradient_arrival)[c] = end;
                    if (record_events)
                        t.events.push_back({r, Stream::pipeline_p2p, core::to_event_kind(a.kind),
                                            a.microbatch, a.chunk, start, end, 0.0, 0.0, r});
                } else {
                    const bool act = a.kind == ActionKind::recv_activation;
                    const std::size_t c = cell(a.microbatch, vs);
                    const double arrival = (act ? activation_arrival : gradient_arrival)[c];
                    if (arrival < 0.0) break; // not sent yet: come back to this rank later
                    // The transfer itself is the sender's event; the receiver only waits.
                    data_ready[std::size_t(r)] = std::max(data_ready[std::size_t(r)], arrival);
                }
                --remaining;
                progress = true;
            }
        }
        if (!progress)
            throw std::logic_error("time_schedule: schedule deadlocks (check_schedule first)");
    }
    for (std::int32_t r = 0; r < p; ++r) {
        t.end_s[std::size_t(r)] = compute_free[std::size_t(r)];
        t.makespan_s = std::max(t.makespan_s, compute_free[std::size_t(r)]);
    }
    return t;
}

} // namespace trident::simulator
