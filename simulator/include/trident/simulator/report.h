#pragma once
// Presenting a simulated step: a summary table for people, JSON for tools.
#include "trident/core/json_io.h"
#include "trident/simulator/simulate.h"

#include <iosfwd>

namespace trident::simulator {

void print_report(const Report& report, std::ostream& out);
core::Json report_json(const Report& report);

} // namespace trident::simulator
