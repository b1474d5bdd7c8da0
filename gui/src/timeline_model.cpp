#include "timeline_model.h"

#include "trident/core/spec_error.h"
#include "trident/core/step_numbers.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <string>

namespace trident::gui {
namespace {

constexpr int kStreamCount = 4;

// Union of the compute intervals of a row (sorted by start): busy time and the gaps inside
// [step_start_s, step_end_s].
void measure_compute(const std::vector<core::TraceEvent>& events, const TimelineRow* compute,
                     double step_start_s, double step_end_s, TimelineLane& lane) {
    double cursor_s = step_start_s;
    double busy_s = 0.0;
    if (compute) {
        for (std::uint32_t index : compute->events) {
            const core::TraceEvent& event = events[index];
            if (event.end_s <= cursor_s) continue;
            const double start_s = std::max(event.start_s, cursor_s);
            if (start_s > cursor_s) lane.idle.push_back({cursor_s, start_s});
            busy_s += event.end_s - start_s;
            cursor_s = event.end_s;
        }
    }
    if (step_end_s > cursor_s) lane.idle.push_back({cursor_s, step_end_s});
    lane.busy_s = busy_s;
    lane.idle_s = 0.0;
    for (const TimeInterval& gap : lane.idle) lane.idle_s += gap.length_s();
    const double step_s = step_end_s - step_start_s;
    lane.bubble_fraction = core::bubble_fraction(lane.idle_s, step_s);
}

struct RankStart {
    std::int32_t rank = 0;
    double first_forward_start_s = std::numeric_limits<double>::infinity();
    double first_forward_length_s = 0.0;
    // The rank talks to an earlier stage: it receives activations or sends gradients for the
    // first model chunk. Only ranks of the first stage never do.
    bool has_upstream = false;
    std::int32_t recorded_stage = -1; // the stage the trace's own events name (Trident traces)
};

// Trident's traces name each event's pipeline stage; another tool's trace may not, and then
// two ways to find it.
//
// By structure (used whenever the trace has the point-to-point events to tell): ranks that
// never talk upstream are the first stage, and since ranks are numbered with the pipeline
// outermost (Megatron's tp-cp-ep-dp-pp, see docs/executor.md "Rank order and process groups"),
// every stage holds that many consecutive ranks. This survives measured traces, whose ranks' clocks
// start at their own step start. A simulated trace has one representative rank per stage, so there
// each rank is its own stage.
std::optional<std::map<std::int32_t, int>> stages_by_structure(std::vector<RankStart> starts) {
    std::sort(starts.begin(), starts.end(),
              [](const RankStart& a, const RankStart& b) { return a.rank < b.rank; });
    std::size_t first_stage = 0;
    for (const RankStart& start : starts) first_stage += start.has_upstream ? 0 : 1;
    if (first_stage == 0 || first_stage == starts.size() || starts.size() % first_stage != 0)
        return std::nullopt;
    for (std::size_t i = 0; i < first_stage; ++i)
        if (starts[i].has_upstream) return std::nullopt; // not the lowest ranks: not Megatron's
    std::map<std::int32_t, int> stage_of;
    for (std::size_t i = 0; i < starts.size(); ++i)
        stage_of[starts[i].rank] = static_cast<int>(i / first_stage);
    return stage_of;
}

// By timing (traces without those events, such as hand-built ones): stage s cannot start its
// first forward before stage s-1 has finished one, so ranks whose first forward starts at the
// same time (within half a forward) are one stage, and stages are ordered by that time. Ranks
// with no forward events each get their own stage after the others.
std::map<std::int32_t, int> stages_by_timing(std::vector<RankStart> starts) {
    std::sort(starts.begin(), starts.end(), [](const RankStart& a, const RankStart& b) {
        if (a.first_forward_start_s != b.first_forward_start_s)
            return a.first_forward_start_s < b.first_forward_start_s;
        return a.rank < b.rank;
    });
    std::map<std::int32_t, int> stage_of;
    int stage = -1;
    double group_start_s = 0.0;
    double group_tolerance_s = -1.0;
    for (const RankStart& start : starts) {
        const bool has_forward = std::isfinite(start.first_forward_start_s);
        const bool joins = has_forward && stage >= 0 &&
                           start.first_forward_start_s - group_start_s <= group_tolerance_s;
        if (!joins) {
            ++stage;
            group_start_s = start.first_forward_start_s;
            group_tolerance_s = has_forward ? 0.5 * start.first_forward_length_s : -1.0;
        }
        stage_of[start.rank] = stage;
    }
    return stage_of;
}

std::map<std::int32_t, int> derive_stages(const std::vector<RankStart>& starts) {
    if (std::all_of(starts.begin(), starts.end(),
                    [](const RankStart& s) { return s.recorded_stage >= 0; })) {
        std::map<std::int32_t, int> stage_of;
        for (const RankStart& start : starts) stage_of[start.rank] = start.recorded_stage;
        return stage_of;
    }
    const bool any_upstream = std::any_of(starts.begin(), starts.end(),
                                          [](const RankStart& s) { return s.has_upstream; });
    if (any_upstream)
        if (auto by_structure = stages_by_structure(starts)) return *by_structure;
    return stages_by_timing(starts);
}

} // namespace

const TimelineRow* TimelineLane::row(core::Stream stream) const {
    for (const TimelineRow& candidate : rows)
        if (candidate.stream == stream) return &candidate;
    return nullptr;
}

TimelineModel::TimelineModel(core::Trace trace)
    : source_(std::move(trace.source)), events_(std::move(trace.events)) {
    if (events_.size() >= std::numeric_limits<std::uint32_t>::max())
        throw core::SpecError("trace.events", "more events than the timeline can index");
    for (std::size_t i = 0; i < events_.size(); ++i) {
        const core::TraceEvent& event = events_[i];
        if (!(event.end_s >= event.start_s) || !std::isfinite(event.start_s) ||
            !std::isfinite(event.end_s))
            throw core::SpecError("trace.events[" + std::to_string(i) + "]",
                                  "needs finite times with end_s >= start_s");
        has_odd_chunks_ = has_odd_chunks_ || (event.chunk > 0 && event.chunk % 2 == 1);
    }
    if (events_.empty()) return;

    // Index: per rank, per stream, event indices sorted by start.
    std::map<std::int32_t, std::vector<std::vector<std::uint32_t>>> by_rank;
    step_start_s_ = std::numeric_limits<double>::infinity();
    step_end_s_ = -std::numeric_limits<double>::infinity();
    for (std::uint32_t i = 0; i < events_.size(); ++i) {
        const core::TraceEvent& event = events_[i];
        auto& streams = by_rank[event.rank];
        if (streams.empty()) streams.resize(kStreamCount);
        streams[static_cast<std::size_t>(event.stream)].push_back(i);
        step_start_s_ = std::min(step_start_s_, event.start_s);
        step_end_s_ = std::max(step_end_s_, event.end_s);
    }

    std::vector<RankStart> starts;
    std::map<std::int32_t, TimelineLane> lane_of_rank;
    for (auto& [rank, streams] : by_rank) {
        TimelineLane lane;
        lane.ranks = {rank};
        RankStart start{rank};
        for (int s = 0; s < kStreamCount; ++s) {
            std::vector<std::uint32_t>& indices = streams[static_cast<std::size_t>(s)];
            if (indices.empty()) continue;
            std::stable_sort(indices.begin(), indices.end(),
                             [this](std::uint32_t a, std::uint32_t b) {
                                 return events_[a].start_s < events_[b].start_s;
                             });
            TimelineRow row;
            row.stream = static_cast<core::Stream>(s);
            row.max_end_s.reserve(indices.size());
            double max_end_s = -std::numeric_limits<double>::infinity();
            for (std::uint32_t index : indices) {
                const core::TraceEvent& event = events_[index];
                max_end_s = std::max(max_end_s, event.end_s);
                row.max_end_s.push_back(max_end_s);
                lane.end_s = std::max(lane.end_s, event.end_s);
                if (event.stage >= 0) start.recorded_stage = event.stage;
                if (event.chunk <= 0 && (event.kind == core::EventKind::recv_activation ||
                                         event.kind == core::EventKind::send_gradient))
                    start.has_upstream = true;
                if (event.kind == core::EventKind::forward &&
                    event.start_s < start.first_forward_start_s) {
                    start.first_forward_start_s = event.start_s;
                    start.first_forward_length_s = event.end_s - event.start_s;
                }
            }
            row.events = std::move(indices);
            lane.rows.push_back(std::move(row));
        }
        measure_compute(events_, lane.row(core::Stream::compute), step_start_s_, step_end_s_, lane);
        starts.push_back(start);
        lane_of_rank.emplace(rank, std::move(lane));
    }

    const std::map<std::int32_t, int> stage_of = derive_stages(starts);
    for (auto& [rank, lane] : lane_of_rank) lane.stage = stage_of.at(rank);
    for (auto& [rank, lane] : lane_of_rank) rank_lanes_.push_back(std::move(lane));
    std::stable_sort(rank_lanes_.begin(), rank_lanes_.end(),
                     [](const TimelineLane& a, const TimelineLane& b) {
                         return a.stage != b.stage ? a.stage < b.stage : a.rank() < b.rank();
                     });
    for (const TimelineLane& lane : rank_lanes_) {
        if (stage_lanes_.empty() || stage_lanes_.back().stage != lane.stage) {
            stage_lanes_.push_back(lane); // the stage's lowest rank stands for it
        } else {
            stage_lanes_.back().ranks.push_back(lane.rank());
        }
    }
}

std::span<const std::uint32_t> TimelineModel::candidate_events(const TimelineRow& row, double t0_s,
                                                               double t1_s) const {
    const auto first = std::lower_bound(row.max_end_s.begin(), row.max_end_s.end(), t0_s);
    const std::size_t begin = static_cast<std::size_t>(first - row.max_end_s.begin());
    const auto last = std::lower_bound(
        row.events.begin() + static_cast<std::ptrdiff_t>(begin), row.events.end(), t1_s,
        [this](std::uint32_t index, double t_s) { return events_[index].start_s < t_s; });
    const std::size_t end = static_cast<std::size_t>(last - row.events.begin());
    return std::span<const std::uint32_t>(row.events).subspan(begin, end - begin);
}

bool TimelineModel::overlaps(std::uint32_t index, double t0_s, double t1_s) const {
    const core::TraceEvent& event = events_[index];
    if (event.start_s >= t1_s) return false;
    if (event.end_s > t0_s) return true;
    return event.end_s == event.start_s && event.start_s >= t0_s;
}

std::vector<std::uint32_t> TimelineModel::visible_events(const TimelineRow& row, double t0_s,
                                                         double t1_s) const {
    std::vector<std::uint32_t> visible;
    for (std::uint32_t index : candidate_events(row, t0_s, t1_s))
        if (overlaps(index, t0_s, t1_s)) visible.push_back(index);
    return visible;
}

std::span<const TimeInterval> TimelineModel::visible_idle(const TimelineLane& lane, double t0_s,
                                                          double t1_s) const {
    // Idle intervals do not overlap each other, so both ends are sorted.
    const auto first =
        std::upper_bound(lane.idle.begin(), lane.idle.end(), t0_s,
                         [](double t_s, const TimeInterval& gap) { return t_s < gap.end_s; });
    const auto last =
        std::lower_bound(first, lane.idle.end(), t1_s,
                         [](const TimeInterval& gap, double t_s) { return gap.start_s < t_s; });
    return {first, last};
}

} // namespace trident::gui
