#include "host_memory.h"

#include "trident/core/model_layout.h"
#include "trident/core/spec_error.h"
#include "trident/core/units.h"
#include "trident/executor/mpi.h"
#include "trident/executor/trainer.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <sys/mman.h>
#include <unistd.h>

namespace trident::executor {

double meminfo_bytes(const char* key) {
    std::ifstream in("/proc/meminfo");
    const std::string wanted = std::string(key) + ":";
    std::string name;
    double kib = 0.0;
    while (in >> name >> kib) {
        if (name == wanted) return kib * 1024.0;
        in.ignore(1 << 10, '\n');
    }
    return -1.0;
}

void release_pages(float* data, std::size_t n) {
    std::memset(data, 0, n * sizeof(float));
    offer_pages(data, n);
}

void offer_pages(float* data, std::size_t n) {
    static const std::uintptr_t page = std::uintptr_t(sysconf(_SC_PAGESIZE));
    const std::uintptr_t begin = reinterpret_cast<std::uintptr_t>(data),
                         end = begin + n * sizeof(float);
    const std::uintptr_t first = (begin + page - 1) / page * page, last = end / page * page;
    // MADV_FREE, not MADV_DONTNEED: the kernel takes the pages back when it needs memory (they
    // then read as zeros), and otherwise leaves them mapped, so the next
    // micro-batch writing there costs no page faults — a caching allocator's trade, where
    // returning and re-faulting every unit cost a third of an MoE step on two cores. Advice
    // only: where the kernel refuses it, the pages stay resident.
    if (first < last) madvise(reinterpret_cast<void*>(first), last - first, MADV_FREE);
}

double rank_parameters_estimate(const core::JobSpec& job) {
    // The busiest pipeline rank's chunks, from the layout table the chunks allocate from.
    double most = 0.0;
    for (std::int32_t r = 0; r < job.plan.pp; ++r) {
        double held = 0.0;
        for (std::int32_t c = 0; c < job.plan.vpp; ++c)
            held += double(
                core::ChunkLayout(job, r, c, 0, 0, 1, core::LayoutDetail::counts).parameters());
        most = std::max(most, held);
    }
    return most;
}

bool host_memory_holds(const core::JobSpec& job, double bytes_per_parameter) {
    const double per_rank = rank_parameters_estimate(job) * bytes_per_parameter;
    const double available = meminfo_bytes("MemAvailable"); // negative: unknown, no check
    return on_every_rank(available < 0.0 || per_rank * node_place().ranks <= available);
}

void require_host_memory(const core::JobSpec& job, double bytes_per_parameter,
                         const std::string& what) {
    if (host_memory_holds(job, bytes_per_parameter)) return;
    const int local_ranks = node_place().ranks;
    const double per_rank = rank_parameters_estimate(job) * bytes_per_parameter;
    const double available = meminfo_bytes("MemAvailable");
    throw core::SpecError("model", "needs about " + core::bytes_text(per_rank) + " per rank for " +
                                       what + " (" + std::to_string(local_ranks) + " rank" +
                                       (local_ranks == 1 ? "" : "s") +
                                       " on a node), more than the " + core::bytes_text(available) +
                                       " available; use more ranks or nodes");
}

} // namespace trident::executor
