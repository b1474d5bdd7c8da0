#include "host_memory.h"

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

} // namespace trident::executor
