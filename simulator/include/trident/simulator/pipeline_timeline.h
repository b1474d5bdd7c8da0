#pragma once
// Times a pipeline Schedule: each pipeline rank runs its actions in order on one compute
// stream; activations and gradients travel on a point-to-point stream per rank. A send starts
// when the compute that produced its data has ended and the rank's p2p stream is free (eager,
// like an NCCL send posted right after the producing kernel); a receive completes when the
// data has arrived; the consumer starts at max(its stream is free, data arrived).
#include "trident/core/schedule.h"
#include "trident/core/trace.h"

#include <functional>
#include <vector>

namespace trident::simulator {

// Seconds of one compute action (F, B or W) of `pipeline_rank`.
using ComputeCost = std::function<double(std::int32_t pipeline_rank, const core::Action&)>;
// Seconds to move one activation or gradient message between two pipeline ranks.
using TransferCost =
    std::function<double(std::int32_t from_rank, std::int32_t to_rank, const core::Action& send)>;

struct PipelineTimeline {
    std::vector<core::TraceEvent> events; // rank = pipeline rank; sends carry the transfers
    double makespan_s = 0.0;              // last compute end over all ranks
    std::vector<double> busy_s;           // compute time per pipeline rank
    std::vector<double> end_s;            // last compute end per pipeline rank
    // When each model chunk's gradients are complete on each pipeline rank (index rank · chunks
    // + chunk): the end of its last B or W. Its data-parallel reduction may start then.
    std::vector<double> grads_ready_s;

    // Share of the makespan a rank's compute stream sits idle.
    double bubble_fraction(std::int32_t rank) const;
};

// `record_events` false leaves `events` empty (the timing is the same, and faster).
// `sends_block`: the sender's compute stream also waits for each of its sends to complete, as
// in Megatron's schedules without overlap_p2p_comm (batched isend/irecv, then wait).
PipelineTimeline time_schedule(const core::Schedule& schedule, const ComputeCost& compute,
                               const TransferCost& transfer, bool record_events = true,
                               bool sends_block = false);

} // namespace trident::simulator
