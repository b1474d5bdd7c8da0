#include "host_memory.h"

#include <fstream>
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

} // namespace trident::executor
