#pragma once
// Collects every rank's measured events on world rank 0 (MPI_Gatherv), as one Trace in the
// simulator's schema.
#include "trident/core/trace.h"

#include <vector>

namespace trident::executor {

// Collective over MPI_COMM_WORLD; returns the merged trace on rank 0, an empty one elsewhere.
core::Trace gather_trace(const std::vector<core::TraceEvent>& local);

} // namespace trident::executor
