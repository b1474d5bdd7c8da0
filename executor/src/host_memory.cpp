#include "host_memory.h"

#include <cstdint>
#include <cstring>
#include <fstream>
#include <sys/mman.h>
#include <unistd.h>
#include <string>

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
    static const std::uintptr_t page = std::uintptr_t(sysconf(_SC_PAGESIZE));
    const std::uintptr_t begin = reinterpret_cast<std::uintptr_t>(data),
                         end = begin + n * sizeof(float);
    const std::uintptr_t first = (begin + page - 1) / page * page, last = end / page * page;
    if (first >= last ||
        madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED) != 0) {
        std::memset(data, 0, n * sizeof(float)); // nothing whole to give back (or refused)
        return;
    }
    std::memset(data, 0, first - begin);
    std::memset(reinterpret_cast<void*>(last), 0, end - last);
}

} // namespace trident::executor
