#include "trident/executor/trace_gather.h"

#include "trident/executor/mpi.h"

#include <mpi.h>

namespace trident::executor {

core::Trace gather_trace(const std::vector<core::TraceEvent>& local) {
    constexpr int kFields = 10;
    std::vector<double> packed;
    packed.reserve(local.size() * kFields);
    for (const auto& e : local)
        packed.insert(packed.end(), {double(e.rank), double(int(e.stream)), double(int(e.kind)),
                                     double(e.microbatch), double(e.chunk), e.start_s, e.end_s,
                                     e.bytes, e.flops, double(e.stage)});
    int rank = 0, size = 1;
    check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank");
    check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &size), "MPI_Comm_size");
    int count = int(packed.size());
    std::vector<int> counts(static_cast<std::size_t>(size)),
        offsets(static_cast<std::size_t>(size));
    check_mpi(MPI_Gather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, MPI_COMM_WORLD),
              "MPI_Gather");
    std::vector<double> all;
    if (rank == 0) {
        int total = 0;
        for (int r = 0; r < size; ++r) {
            offsets[std::size_t(r)] = total;
            total += counts[std::size_t(r)];
        }
        all.resize(std::size_t(total));
    }
    check_mpi(MPI_Gatherv(packed.data(), count, MPI_DOUBLE, all.data(), counts.data(),
                          offsets.data(), MPI_DOUBLE, 0, MPI_COMM_WORLD),
              "MPI_Gatherv");
    core::Trace trace;
    trace.source = "measured";
    for (std::size_t i = 0; i + kFields <= all.size(); i += kFields)
        trace.events.push_back({std::int32_t(all[i]), core::Stream(int(all[i + 1])),
                                core::EventKind(int(all[i + 2])), std::int32_t(all[i + 3]),
                                std::int32_t(all[i + 4]), all[i + 5], all[i + 6], all[i + 7],
                                all[i + 8], std::int32_t(all[i + 9])});
    return trace;
}

} // namespace trident::executor
