#include "schedule_walk.h"

#include "trident/core/internal_error.h"

#include <algorithm>
#include <chrono>

namespace trident::executor {

namespace {

std::int64_t steady_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

} // namespace

HostClockTracer::HostClockTracer(std::vector<core::TraceEvent>& out)
    : out_(out), origin_ns_(steady_ns()) {}

double HostClockTracer::now_s() const {
    return double(steady_ns() - origin_ns_) * 1e-9;
}

void HostClockTracer::begin(const core::TraceEvent& event) {
    open_ = event;
    open_.start_s = now_s();
}

void HostClockTracer::end(double fused_weight_s) {
    core::TraceEvent e = open_;
    e.end_s = now_s();
    if (fused_weight_s > 0.0 && e.kind == core::EventKind::backward_input)
        e.end_s = std::max(e.start_s, e.end_s - fused_weight_s);
    if (fused_weight_s > 0.0 && e.kind == core::EventKind::backward_weight && !out_.empty()) {
        e.start_s = out_.back().end_s; // the W ran inside the B just traced
        e.end_s = e.start_s + fused_weight_s;
    }
    out_.push_back(e);
}

bool runs_forward_only(core::ActionKind kind) {
    return kind == core::ActionKind::forward || kind == core::ActionKind::send_activation ||
           kind == core::ActionKind::recv_activation;
}

ScheduleWalk::ScheduleWalk(core::Schedule schedule, std::int32_t rank)
    : schedule_(std::move(schedule)), rank_(rank) {
    // Schedules are generated, never read from input: one that does not check is a bug.
    if (rank_ < 0 || rank_ >= schedule_.stages)
        throw core::InternalError("schedule walk: pipeline rank " + std::to_string(rank_) +
                                  " is outside the schedule's " + std::to_string(schedule_.stages) +
                                  " stages");
    try {
        core::check_schedule(schedule_);
    } catch (const core::ScheduleError& e) {
        throw core::InternalError("the " + core::to_string(schedule_.kind) +
                                  " schedule does not check: " + e.what());
    }
}

WalkAction ScheduleWalk::describe(std::size_t index, bool forward_only) const {
    WalkAction w;
    w.action = schedule_.ranks[std::size_t(rank_)][index];
    w.index = index;
    w.virtual_stage = schedule_.virtual_stage(rank_, w.action.chunk);
    w.first_stage = w.virtual_stage == 0;
    w.last_stage = w.virtual_stage == schedule_.virtual_stages() - 1;
    w.forward_only = forward_only;
    if (!forward_only) {
        if (w.action.kind == core::ActionKind::backward_input)
            w.fused = core::fuses_backward(schedule_, rank_, index);
        else if (w.action.kind == core::ActionKind::backward_weight)
            w.fused = index > 0 && core::fuses_backward(schedule_, rank_, index - 1);
    }
    return w;
}

std::optional<std::int32_t> ScheduleWalk::local_neighbour(const WalkAction& a,
                                                          std::int32_t step) const {
    const std::int32_t vs = a.virtual_stage + step;
    if (vs < 0 || vs >= schedule_.virtual_stages()) return std::nullopt;
    const std::int32_t mb = a.action.microbatch;
    if (schedule_.rank_of(mb, vs) != rank_) return std::nullopt;
    return schedule_.chunk_of(mb, vs);
}

core::TraceEvent ScheduleWalk::event_of(const WalkAction& a, double p2p_bytes,
                                        std::int32_t world_rank) const {
    core::TraceEvent e;
    e.rank = world_rank;
    e.stream = core::is_compute(a.action.kind) ? core::Stream::compute : core::Stream::pipeline_p2p;
    e.kind = core::to_event_kind(a.action.kind);
    e.microbatch = a.action.microbatch;
    e.chunk = a.action.chunk;
    e.stage = rank_;
    e.bytes = core::is_compute(a.action.kind) ? 0.0 : p2p_bytes;
    return e;
}

} // namespace trident::executor
