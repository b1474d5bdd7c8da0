#pragma once
// The what-if search the planner panel runs in a worker thread: the best layout at each
// cluster size (the scaling plot) and the best of each (tp, pp) pair at the panel's size (the
// heat map), every failure one line for people.
#include "planner_request.h"
#include "scaling_chart_picture.h"
#include "trident/planner/tp_pp_map.h"

#include <QString>
#include <atomic>
#include <vector>

namespace trident::gui {

struct WhatIfOutcome {
    std::vector<ScalingPoint> sizes; // the sizes with a layout, in the order asked
    QString missing;                 // "no layout fits at 1 node: …" for sizes without one
    std::vector<planner::TpPpCell> map;
    std::int64_t map_devices = 0; // the devices of the map's cluster size
    QString error;                // the request or the size list is malformed
};

// `sizes` as typed ("1,2,4" or "1-4"); empty: half, once and twice the request's nodes.
WhatIfOutcome run_what_if(const PlannerRequest& request, const QString& sizes,
                          const std::atomic<bool>* cancel);

} // namespace trident::gui
