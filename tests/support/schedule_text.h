#pragma once
// One rank's compute actions as text, e.g. "F0 F1 B0 W0" (".c" after the micro-batch when the
// schedule has several chunks), for tests that compare orders with a reference's.
#include "trident/core/schedule.h"

#include <string>

namespace trident::test {

inline std::string compute_order(const core::Schedule& s, int rank) {
    std::string out;
    for (const core::Action& a : s.ranks[std::size_t(rank)]) {
        if (!core::is_compute(a.kind)) continue;
        if (!out.empty()) out += ' ';
        out += std::string(core::kActionKindNames[int(a.kind)]) + std::to_string(a.microbatch);
        if (s.chunks > 1) out += "." + std::to_string(a.chunk);
    }
    return out;
}

} // namespace trident::test
