#pragma once
// `trident profile --backend cpu`: measures this machine with the executor's own CPU kernels
// and MPI collectives among the ranks mpirun started, and returns a profile in the
// simulator's format (`trident.profile/1`, provenance "measured"). Collective over
// MPI_COMM_WORLD: every rank calls it; rank 0's result is the profile.
#include "trident/core/json_io.h"

#include <functional>
#include <string>

namespace trident::executor {

struct CpuProfileOptions {
    bool quick = false; // smaller grids and messages: under 30 s (CI)
    std::string name = "cpu-host";
    std::string command; // the command line, recorded in provenance
    std::function<void(double fraction, const std::string& what)> on_progress;
    // Test only (`--test-slow-rank`): this world rank sleeps 20 ms after each of the first five
    // timed repetitions of every collective (not after the warm-up), so its clock runs ahead of
    // the others'. A repetition count decided on each rank's own clock then differs between
    // the ranks, and they deadlock; an agreed count does not.
    int slow_rank = -1;
};

core::Json measure_cpu_profile(const CpuProfileOptions& options);

} // namespace trident::executor
