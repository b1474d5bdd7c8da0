#pragma once
// TimelineModel: a trace arranged for drawing. One lane per rank (or, collapsed, one per
// pipeline stage), a row per stream within a lane, each row's events indexed by start time so
// a query for a time window touches only the events in it, and per lane the idle time of its
// compute stream (the pipeline bubbles). Plain C++: no Qt, so it is cheap to build and test.
#include "trident/core/trace.h"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace trident::gui {

struct TimeInterval {
    double start_s = 0.0;
    double end_s = 0.0;
    double length_s() const { return end_s - start_s; }
};

// The events of one stream on one lane, sorted by start. `max_end_s[i]` is the latest end
// among events 0..i: it never decreases, so a binary search finds the first event that can
// still reach into a window even when a long event overlaps later short ones.
struct TimelineRow {
    core::Stream stream = core::Stream::compute;
    std::vector<std::uint32_t> events; // indices into TimelineModel::events()
    std::vector<double> max_end_s;
};

struct TimelineLane {
    int stage = 0;                   // derived pipeline stage (see derive_stages in the .cpp)
    std::vector<std::int32_t> ranks; // one rank; for a stage lane every rank of the stage
    std::vector<TimelineRow> rows;   // streams that have events, in Stream order
    std::vector<TimeInterval> idle;  // gaps in the compute row inside the step, sorted
    double busy_s = 0.0;             // time the compute row is busy (overlaps counted once)
    double idle_s = 0.0;             // sum of `idle`
    double bubble_fraction = 0.0;    // idle_s / step length
    double end_s = 0.0;              // last event end on the lane

    std::int32_t rank() const { return ranks.front(); } // the rank whose events the lane shows
    const TimelineRow* row(core::Stream stream) const;
};

class TimelineModel {
public:
    TimelineModel() = default;
    explicit TimelineModel(core::Trace trace);

    const std::string& source() const { return source_; }
    const std::vector<core::TraceEvent>& events() const { return events_; }
    const core::TraceEvent& event(std::uint32_t index) const { return events_[index]; }

    // The step: from the first event's start to the last event's end over all ranks.
    double step_start_s() const { return step_start_s_; }
    double step_end_s() const { return step_end_s_; }
    double step_length_s() const { return step_end_s_ - step_start_s_; }

    // Rank lanes (ordered by stage, then rank) or stage lanes (one per stage, showing the
    // stage's lowest rank, which stands for the others: same schedule, same bubbles).
    const std::vector<TimelineLane>& lanes(bool collapsed) const {
        return collapsed ? stage_lanes_ : rank_lanes_;
    }
    int stage_count() const { return static_cast<int>(stage_lanes_.size()); }
    // Whether any event belongs to an odd model chunk (drawn lighter; the key says so).
    bool has_odd_chunks() const { return has_odd_chunks_; }

    // Events of `row` that overlap [t0_s, t1_s): start < t1 and end > t0 (an instant event
    // counts when t0 <= start < t1). Exact; O(log n + k).
    std::vector<std::uint32_t> visible_events(const TimelineRow& row, double t0_s,
                                              double t1_s) const;
    // The contiguous stretch of `row.events` that can overlap the window: every overlapping
    // event and few others (only those hidden under a long earlier event). The renderer walks
    // this span and skips non-overlapping entries.
    std::span<const std::uint32_t> candidate_events(const TimelineRow& row, double t0_s,
                                                    double t1_s) const;
    bool overlaps(std::uint32_t index, double t0_s, double t1_s) const;

    // Idle intervals of `lane` that overlap [t0_s, t1_s).
    std::span<const TimeInterval> visible_idle(const TimelineLane& lane, double t0_s,
                                               double t1_s) const;

private:
    std::string source_;
    std::vector<core::TraceEvent> events_;
    double step_start_s_ = 0.0;
    double step_end_s_ = 0.0;
    bool has_odd_chunks_ = false;
    std::vector<TimelineLane> rank_lanes_;
    std::vector<TimelineLane> stage_lanes_;
};

} // namespace trident::gui
