#pragma once
// The schedule walk both backends share: one pipeline rank's actions of a core::Schedule, in
// order, each handed to the backend's body for its kind (ActionBodies). The walk owns what is
// the same for every backend and every schedule kind:
// - the schedule is proved complete and deadlock-free once (core::check_schedule), before any
//   rank sends anything, so a malformed schedule is an InternalError, not a hung MPI run;
// - evaluation walks the forward subsequence (F and the activations' sends and receives), which
//   keeps the schedule's deadlock-free order because no forward waits on a backward;
// - one Slot per live (micro-batch, chunk): created at its first action, reduced to B's input
//   gradient when its W is done, dropped after its last forward-only use, all dropped when the
//   rank's sends have completed;
// - a hop between two chunks of one rank (no send or receive in the schedule) handed over in
//   memory;
// - the fused backward (core::fuses_backward) flagged on both its B and its W;
// - the activation peak over the live slots, and the trace hooks around every action.
// A new schedule kind therefore needs no executor change: it is data the walk follows.
#include "trident/core/schedule.h"
#include "trident/core/trace.h"

#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

namespace trident::executor {

// One action as a body receives it.
struct WalkAction {
    core::Action action;
    std::size_t index = 0;          // in this rank's action list
    std::int32_t virtual_stage = 0; // of the action's chunk (Schedule::virtual_stage)
    bool first_stage = false;       // the chunk holds the embedding (virtual stage 0)
    bool last_stage = false;        // the chunk holds the loss (the last virtual stage)
    // B: its W follows at once and may run inside it; W: that B came just before.
    bool fused = false;
    bool forward_only = false; // evaluation: no backward, no dropout
};

// What a backend does for each action kind, on the state of one (micro-batch, chunk).
template <typename Slot>
class ActionBodies {
public:
    virtual ~ActionBodies() = default;
    virtual void forward(const WalkAction& a, Slot& slot) = 0;
    // Returns the seconds a fused W took inside this B (0: none ran, or not measured here).
    virtual double backward_input(const WalkAction& a, Slot& slot) = 0;
    // Called for every W; one whose `fused` B already ran it has nothing left to do.
    virtual void backward_weight(const WalkAction& a, Slot& slot) = 0;
    virtual void send_activation(const WalkAction& a, Slot& slot) = 0;
    virtual void recv_activation(const WalkAction& a, Slot& slot) = 0;
    virtual void send_gradient(const WalkAction& a, Slot& slot) = 0;
    virtual void recv_gradient(const WalkAction& a, Slot& slot) = 0;
    // A hop between two chunks of this rank (the turn of a V-shaped schedule) has no send or
    // receive: the tensor moves in memory, as the receive would have delivered it — the
    // previous chunk's output into `to` before its F, the next chunk's input gradient into
    // `to` before its B.
    virtual void hand_activation(Slot& from, Slot& to) = 0;
    virtual void hand_gradient(Slot& from, Slot& to) = 0;
    // W is done: the slot keeps only B's input gradient, which its send still needs.
    virtual void keep_only_input_gradient(Slot& slot) = 0;
    // Completes every send this rank posted (the slots are dropped after it).
    virtual void wait_sends() = 0;
    // The activation bytes a slot holds now, and the most it held inside its last B; a backend
    // that measures its peak otherwise (a device allocator) leaves both 0.
    virtual double held_bytes(const Slot&) const { return 0.0; }
    virtual double backward_peak_bytes(const Slot&) const { return 0.0; }
    // Bytes one point-to-point action of `chunk` moves (trace events).
    virtual double p2p_bytes(std::int32_t chunk) const = 0;
};

// Times the actions of a traced walk. begin() gets the event with everything but its times;
// end() closes it, `fused_weight_s` being the W time a fused backward reported (both its B
// and its W event are told).
class ActionTracer {
public:
    virtual ~ActionTracer() = default;
    virtual void begin(const core::TraceEvent& event) = 0;
    virtual void end(double fused_weight_s) = 0;
};

// Host-clock tracing (the CPU backend): seconds since construction, events appended to `out`.
// A fused backward is traced as the schedule names it, B then W, split at the time the W took.
class HostClockTracer final : public ActionTracer {
public:
    explicit HostClockTracer(std::vector<core::TraceEvent>& out);
    void begin(const core::TraceEvent& event) override;
    void end(double fused_weight_s) override;

private:
    double now_s() const;
    std::vector<core::TraceEvent>& out_;
    std::int64_t origin_ns_ = 0;
    core::TraceEvent open_;
};

// Whether `kind` runs in evaluation (the forward subsequence of the schedule).
bool runs_forward_only(core::ActionKind kind);

struct WalkOptions {
    bool forward_only = false;
    ActionTracer* tracer = nullptr; // null: untraced
    std::int32_t world_rank = 0;    // the rank trace events carry
};

struct WalkResult {
    double peak_activation_bytes = 0.0; // over the walk, from the bodies' held_bytes
};

// The walk over pipeline rank `rank` of `schedule`; constructing it checks the schedule.
class ScheduleWalk {
public:
    ScheduleWalk(core::Schedule schedule, std::int32_t rank);
    const core::Schedule& schedule() const { return schedule_; }
    std::int32_t rank() const { return rank_; }

    template <typename Slot>
    WalkResult run(ActionBodies<Slot>& bodies, const WalkOptions& options) const;

private:
    // The WalkAction of this rank's action `index`.
    WalkAction describe(std::size_t index, bool forward_only) const;
    // The chunk of this rank that holds the virtual stage `step` away on a's micro-batch's
    // path, when this rank holds it; none at either end of the path or on another rank.
    std::optional<std::int32_t> local_neighbour(const WalkAction& a, std::int32_t step) const;
    core::TraceEvent event_of(const WalkAction& a, double p2p_bytes, std::int32_t world_rank) const;

    core::Schedule schedule_;
    std::int32_t rank_ = 0;
};

template <typename Slot>
WalkResult ScheduleWalk::run(ActionBodies<Slot>& bodies, const WalkOptions& options) const {
    using Key = std::pair<std::int32_t, std::int32_t>; // (micro-batch, chunk)
    std::map<Key, Slot> slots;
    WalkResult result;
    double fused_weight_s = 0.0; // what the last fused B reported, for its W's event
    const std::vector<core::Action>& actions = schedule_.ranks[std::size_t(rank_)];
    for (std::size_t index = 0; index < actions.size(); ++index) {
        if (options.forward_only && !runs_forward_only(actions[index].kind)) continue;
        const WalkAction a = describe(index, options.forward_only);
        const Key key{a.action.microbatch, a.action.chunk};
        Slot& slot = slots[key];
        if (options.tracer)
            options.tracer->begin(
                event_of(a, bodies.p2p_bytes(a.action.chunk), options.world_rank));
        bool drop = false; // forward-only: this slot has served its last use
        switch (a.action.kind) {
        case core::ActionKind::forward:
            if (const auto from = local_neighbour(a, -1)) {
                bodies.hand_activation(slots.at({a.action.microbatch, *from}), slot);
                if (a.forward_only) slots.erase({a.action.microbatch, *from});
            }
            bodies.forward(a, slot);
            drop = a.forward_only && a.last_stage;
            break;
        case core::ActionKind::backward_input:
            if (const auto from = local_neighbour(a, +1))
                bodies.hand_gradient(slots.at({a.action.microbatch, *from}), slot);
            fused_weight_s = bodies.backward_input(a, slot);
            if (!a.fused) fused_weight_s = 0.0;
            break;
        case core::ActionKind::backward_weight:
            bodies.backward_weight(a, slot);
            break;
        case core::ActionKind::send_activation:
            bodies.send_activation(a, slot);
            drop = a.forward_only; // sends copy their buffer
            break;
        case core::ActionKind::recv_activation:
            bodies.recv_activation(a, slot);
            break;
        case core::ActionKind::send_gradient:
            bodies.send_gradient(a, slot);
            break;
        case core::ActionKind::recv_gradient:
            bodies.recv_gradient(a, slot);
            break;
        }
        if (options.tracer) options.tracer->end(a.fused ? fused_weight_s : 0.0);
        if (a.action.kind == core::ActionKind::backward_weight) {
            bodies.keep_only_input_gradient(slot);
            fused_weight_s = 0.0;
        }
        if (drop) slots.erase(key);
        // The activations every live slot holds; after a B, also the most its own slot held
        // inside it (the others did not change meanwhile; B never drops its slot).
        double live = 0.0;
        for (const auto& [k, s] : slots) live += bodies.held_bytes(s);
        if (a.action.kind == core::ActionKind::backward_input)
            live =
                std::max(live, live - bodies.held_bytes(slot) + bodies.backward_peak_bytes(slot));
        result.peak_activation_bytes = std::max(result.peak_activation_bytes, live);
    }
    bodies.wait_sends();
    slots.clear(); // after the sends: a device backend frees in stream order
    return result;
}

} // namespace trident::executor
