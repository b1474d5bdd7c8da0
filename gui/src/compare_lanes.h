#pragma once
// Per-lane differences between two timelines (simulated vs measured, plan A vs plan B): busy
// time, bubble fraction and end time of each lane in A and in B. Plain C++, so it is tested
// without widgets.
#include "timeline_model.h"

#include <string>
#include <vector>

namespace trident::gui {

struct LaneDifference {
    std::string lane; // "rank 3" or "stage 1"
    bool in_a = false;
    bool in_b = false;
    double busy_a_s = 0.0;
    double busy_b_s = 0.0;
    double bubble_a = 0.0; // fraction of the step
    double bubble_b = 0.0;
    double end_a_s = 0.0;
    double end_b_s = 0.0;
};

// Lanes are matched by rank when both traces hold the same ranks (two measured runs, two
// simulations of one layout); otherwise by pipeline stage, since a simulated trace holds one
// rank per stage and a measured one every rank. Sorted by rank or stage.
std::vector<LaneDifference> compare_lanes(const TimelineModel& a, const TimelineModel& b);

} // namespace trident::gui
