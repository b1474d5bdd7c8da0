#include "what_if_search.h"

#include "planner_search.h"
#include "trident/core/integer_list.h"
#include "trident/simulator/time_to_train.h"

#include <cmath>

namespace trident::gui {

WhatIfOutcome run_what_if(const PlannerRequest& request, const QString& sizes,
                          const std::atomic<bool>* cancel) {
    WhatIfOutcome out;
    try {
        std::vector<std::int64_t> nodes = core::parse_integer_list(sizes.toStdString(), "sizes");
        if (nodes.empty())
            for (const std::int64_t n : {request.nodes / 2, request.nodes, 2 * request.nodes})
                if (n >= 1) nodes.push_back(n);
        std::sort(nodes.begin(), nodes.end());
        nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
        const PlannerJob job = load_planner_job(request);
        planner::PlanOptions options;
        options.memory_budget_bytes = job.memory_budget_bytes;
        options.top_k = 1;
        options.cancel = cancel;
        for (const std::int64_t n : nodes) {
            core::JobSpec specs = job.specs;
            specs.cluster.nodes = n;
            const planner::PlanResult r = planner::plan(specs, job.profile, {}, options);
            if (r.best.empty()) {
                if (!r.cancelled)
                    out.missing += QString("no layout fits at %1 node%2: %3\n")
                                       .arg(n)
                                       .arg(n == 1 ? "" : "s")
                                       .arg(one_line_error(planner::why_no_candidate(
                                           specs, r, job.memory_budget_bytes, "memory budget")));
                continue;
            }
            const planner::Candidate& c = r.best.front();
            // The cost of a billion tokens in a long run: a trillion-token run's GPU-hours,
            // with the failures and saves of the cluster's reliability figures.
            const double per_billion =
                simulator::time_to_train(c.job, c.step_time_s, 1e12).gpu_hours / 1000.0;
            if (!std::isfinite(per_billion)) { // failures faster than saves and restarts
                out.missing += QString("%1 node%2: the cluster's failures leave no progress\n")
                                   .arg(n)
                                   .arg(n == 1 ? "" : "s");
                continue;
            }
            out.sizes.push_back({n, c.tokens_per_s, per_billion});
        }
        out.map = planner::best_per_tp_pp(job.specs, job.profile, {}, options);
        out.map_devices = job.specs.cluster.devices();
    } catch (const std::exception& e) {
        out.error = one_line_error(e);
    }
    return out;
}

} // namespace trident::gui
