#include "compare_lanes.h"

#include <map>
#include <set>

namespace trident::gui {
namespace {

std::set<std::int32_t> ranks_of(const TimelineModel& model) {
    std::set<std::int32_t> ranks;
    for (const TimelineLane& lane : model.lanes(false)) ranks.insert(lane.rank());
    return ranks;
}

} // namespace

std::vector<LaneDifference> compare_lanes(const TimelineModel& a, const TimelineModel& b) {
    const bool by_rank = ranks_of(a) == ranks_of(b);
    std::map<int, LaneDifference> rows;
    auto add = [&](const TimelineModel& model, bool is_a) {
        for (const TimelineLane& lane : model.lanes(!by_rank)) {
            const int key = by_rank ? lane.rank() : lane.stage;
            LaneDifference& row = rows[key];
            row.lane = (by_rank ? "rank " : "stage ") + std::to_string(key);
            (is_a ? row.in_a : row.in_b) = true;
            (is_a ? row.busy_a_s : row.busy_b_s) = lane.busy_s;
            (is_a ? row.bubble_a : row.bubble_b) = lane.bubble_fraction;
            (is_a ? row.end_a_s : row.end_b_s) = lane.end_s;
        }
    };
    add(a, true);
    add(b, false);
    std::vector<LaneDifference> differences;
    for (auto& [key, row] : rows) differences.push_back(std::move(row));
    return differences;
}

} // namespace trident::gui
