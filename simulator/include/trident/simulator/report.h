#pragma once
// Presenting a simulated step: a summary table for people, JSON for tools.
#include "trident/core/json_io.h"
#include "trident/simulator/simulate.h"

#include <iosfwd>

namespace trident::simulator {

// How many rows the per-stage table gets: one per stage, or (summary) runs of consecutive
// stages whose printed rows are identical collapsed into one row labelled "3–62".
enum class StageRows { all, summary };
void print_report(const Report& report, std::ostream& out, StageRows rows = StageRows::all);
core::Json report_json(const Report& report);

} // namespace trident::simulator
