#include "sharded_sets.h"

#include <algorithm>

namespace trident::executor {

ShardedSet sharded_set(const ParameterStore& store, bool experts, std::int64_t ranks,
                       std::int64_t rank) {
    ShardedSet s;
    s.ranks = ranks;
    s.rank = rank;
    for (const auto& t : store.tensors) {
        if (t.expert != experts || t.size == 0) continue;
        if (!s.runs.empty() && s.runs.back().begin + s.runs.back().length == t.offset)
            s.runs.back().length += t.size; // adjacent tensors: one run
        else
            s.runs.push_back({t.offset, t.size});
        s.elements += t.size;
    }
    s.slice = (s.elements + ranks - 1) / ranks;
    return s;
}

std::vector<FlatRun> ShardedSet::owned() const {
    const std::int64_t first = rank * slice, last = std::min(elements, first + slice);
    std::vector<FlatRun> out;
    std::int64_t at = 0; // the set's position of the current run's start
    for (const FlatRun& r : runs) {
        const std::int64_t begin = std::max(first, at), end = std::min(last, at + r.length);
        if (begin < end) out.push_back({r.begin + (begin - at), end - begin});
        at += r.length;
    }
    return out;
}

std::int64_t ShardedSet::owned_elements() const {
    return std::max<std::int64_t>(0, std::min(elements, (rank + 1) * slice) - rank * slice);
}

void ShardedSet::pack(const float* flat, float* out) const {
    for (const FlatRun& r : runs) out = std::copy_n(flat + r.begin, r.length, out);
    std::fill_n(out, ranks * slice - elements, 0.0f);
}

void ShardedSet::pack_owned(const float* flat, float* out) const {
    std::int64_t n = 0;
    for (const FlatRun& r : owned()) {
        std::copy_n(flat + r.begin, r.length, out + n);
        n += r.length;
    }
    std::fill_n(out + n, slice - n, 0.0f);
}

void ShardedSet::unpack(const float* set, float* flat) const {
    for (const FlatRun& r : runs) {
        std::copy_n(set, r.length, flat + r.begin);
        set += r.length;
    }
}

} // namespace trident::executor
