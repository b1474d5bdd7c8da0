#pragma once
// Kernel threads (GEMMs included) and where mpirun lets them run. Open MPI binds each rank to
// one core by default (`mpirun -np 1` pins to core 0), so `trident run --threads 2` would put
// both threads on that core and run at one core's speed; each rank needs `threads` cores.
#include <sched.h>
#include <string>

namespace trident::cli {

// The cores this process may run on (its CPU affinity); 0 when it cannot be read.
inline int affinity_cores() {
    cpu_set_t set;
    CPU_ZERO(&set);
    return sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
}

// Open MPI flags that give every rank `threads` cores of its own.
inline std::string binding_flags(int threads) {
    return threads > 1 ? "--map-by slot:PE=" + std::to_string(threads) + " --bind-to core"
                       : "--bind-to core";
}

} // namespace trident::cli
