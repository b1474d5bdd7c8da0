#pragma once
// Schedule: the ordered actions of every pipeline rank for one training step — the one object
// the simulator times and the executor runs. Compute actions are forward (F), backward-input
// (B: gradient w.r.t. the layer inputs) and backward-weight (W: gradient w.r.t. the weights);
// B and W are separate so zero-bubble schedules can move W (Qi et al., ICLR 2024). Point-to-
// point actions carry activations downstream and gradients upstream.
//
// Virtual stage s of a micro-batch's path holds the layers of stage s of the pipeline split;
// which rank and chunk hold it is the schedule's placement (core::StagePlacement): chunk · p +
// rank for the looped schedules, a V for ZB-V and DualPipeV, two copies for DualPipe.
//
// Communication semantics (what the checker proves and the executor must honour): a send never
// blocks (it is posted, like MPI_Isend, and completes later); a receive blocks until the
// matching send has been posted.
#include "trident/core/parallel_plan.h"
#include "trident/core/trace.h"

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace trident::core {

enum class ActionKind : std::uint8_t {
    forward,
    backward_input,
    backward_weight,
    send_activation, // after F, to the rank of the next virtual stage
    recv_activation, // before F, from the rank of the previous virtual stage
    send_gradient,   // after B (zero-bubble) or B+W (fused backward), to the previous stage
    recv_gradient,   // before B, from the rank of the next virtual stage
};
inline constexpr std::string_view kActionKindNames[] = {
    "F", "B", "W", "send_act", "recv_act", "send_grad", "recv_grad"};

inline bool is_compute(ActionKind k) {
    return k <= ActionKind::backward_weight;
}

struct Action {
    ActionKind kind = ActionKind::forward;
    std::int32_t microbatch = 0;
    std::int32_t chunk = 0;
    std::int32_t peer = -1; // pipeline rank on the other side of a send/recv; -1 for compute
    bool operator==(const Action&) const = default;
};

std::string to_string(const Action& a);
// The trace event an action becomes (simulated or measured).
EventKind to_event_kind(ActionKind kind);

struct Schedule {
    ScheduleKind kind = ScheduleKind::one_f_one_b;
    std::int32_t stages = 1;                // p
    std::int32_t chunks = 1;                // v, model chunks per pipeline rank
    std::int32_t microbatches = 1;          // m
    std::vector<std::vector<Action>> ranks; // actions of each pipeline rank, in order

    // Stages on one micro-batch's path: p·v, but p for DualPipe (each copy has p stages).
    std::int32_t virtual_stages() const {
        return placement_of(kind) == StagePlacement::two_copies ? stages : stages * chunks;
    }
    std::int32_t virtual_stage(std::int32_t rank, std::int32_t chunk) const {
        return core::virtual_stage(kind, chunk, stages, rank);
    }
    // The model copy micro-batch `mb` goes through: under DualPipe the first half of the
    // micro-batches take copy 0 (chunk 0 of every rank), the rest copy 1; 0 elsewhere.
    std::int32_t copy_of(std::int32_t mb) const {
        return placement_of(kind) == StagePlacement::two_copies && 2 * mb >= microbatches;
    }
    // Whether micro-batch `mb` passes through model chunk `chunk` at all.
    bool visits(std::int32_t mb, std::int32_t chunk) const {
        return placement_of(kind) != StagePlacement::two_copies || chunk == copy_of(mb);
    }
    // Where micro-batch `mb` meets virtual stage `vs`: the pipeline rank and its chunk.
    std::int32_t rank_of(std::int32_t mb, std::int32_t vs) const {
        switch (placement_of(kind)) {
        case StagePlacement::v_shape:
            return vs < stages ? vs : 2 * stages - 1 - vs;
        case StagePlacement::two_copies:
            return copy_of(mb) == 0 ? vs : stages - 1 - vs;
        case StagePlacement::loop:
            break;
        }
        return vs % stages;
    }
    std::int32_t chunk_of(std::int32_t mb, std::int32_t vs) const {
        switch (placement_of(kind)) {
        case StagePlacement::v_shape:
            return vs < stages ? 0 : 1;
        case StagePlacement::two_copies:
            return copy_of(mb);
        case StagePlacement::loop:
            break;
        }
        return vs / stages;
    }
};

class ScheduleError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// Builds the schedule of every pipeline rank: the compute order of the named schedule with the
// point-to-point actions placed around it. Throws SpecError for impossible arguments (v > 1
// outside interleaved-1f1b and the two-chunk schedules, interleaved with m % p != 0, DualPipe
// with an odd p or m, DualPipe(V) with m < 2p).
Schedule make_schedule(ScheduleKind kind, std::int32_t stages, std::int32_t chunks,
                       std::int32_t microbatches);
// The rules on stages and chunks alone (plan validation), and all of make_schedule's argument
// rules (job validation, before any schedule is built).
void validate_schedule_shape(ScheduleKind kind, std::int64_t stages, std::int64_t chunks);
void validate_schedule(ScheduleKind kind, std::int64_t stages, std::int64_t chunks,
                       std::int64_t microbatches);

// Proves a schedule complete (every micro-batch × virtual stage has one F, B and W, in that
// order, each with the sends/receives its data needs, each send matched by one receive) and
// deadlock-free under the semantics above. Throws ScheduleError naming the first problem.
void check_schedule(const Schedule& s);

// Whether action `index` of `rank` is a B whose W comes next, for the same micro-batch and
// chunk: every schedule but the zero-bubble ones (on the ranks that hold W back) runs such a
// pair as one fused backward, weight gradients layer by layer as autograd computes them, and
// the executor does so too (the input gradient leaves after the W, as with_communication
// places the send).
bool fuses_backward(const Schedule& s, std::int32_t rank, std::size_t index);

// What a rank holds at one moment of its order, per model chunk: the micro-batches between
// their F and their B (all activations live) and those between B and W (what W still needs),
// and the chunk whose B runs at that moment (−1 when none does).
struct HeldPairs {
    std::vector<std::int32_t> until_backward_input, until_backward_weight; // one per chunk
    std::int32_t in_backward = -1;
};

// The most (micro-batch, chunk) pairs a rank holds from F until B finishes and from F until W
// finishes, and the moments that can be its memory peak (`peaks`: every held state after an
// F and at each B, less those another holds as much of in every chunk). The memory model
// weighs each chunk's pairs by that chunk's bytes and takes the largest.
struct InFlight {
    std::int32_t until_backward_input = 0;
    std::int32_t until_backward_weight = 0;
    bool fused_backward = true; // every B of the rank is fused with its W (fuses_backward)
    std::vector<HeldPairs> peaks;
};
InFlight max_in_flight(const Schedule& s, std::int32_t rank);

} // namespace trident::core
