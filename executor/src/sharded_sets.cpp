#include "sharded_sets.h"

#include <algorithm>

namespace trident::executor {

ShardedSet sharded_set(const ParameterStore& store, const std::function<bool(std::size_t)>& member,
                       bool expert, std::int64_t ranks, std::int64_t rank) {
    ShardedSet s;
    s.expert = expert;
    s.ranks = ranks;
    s.rank = rank;
    for (std::size_t i = 0; i < store.tensors.size(); ++i) {
        const auto& t = store.tensors[i];
        if (t.size == 0 || !member(i)) continue;
        if (!s.runs.empty() && s.runs.back().begin + s.runs.back().length == t.offset)
            s.runs.back().length += t.size; // adjacent tensors: one run
        else
            s.runs.push_back({t.offset, t.size});
        s.elements += t.size;
    }
    s.slice = (s.elements + ranks - 1) / ranks;
    return s;
}

ShardedSet sharded_set(const ParameterStore& store, bool experts, std::int64_t ranks,
                       std::int64_t rank) {
    return sharded_set(
        store, [&](std::size_t i) { return store.tensors[i].expert == experts; }, experts, ranks,
        rank);
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

std::vector<FlatRun> ShardedSet::others() const {
    const std::int64_t first = rank * slice, last = std::min(elements, first + slice);
    std::vector<FlatRun> out;
    std::int64_t at = 0;
    for (const FlatRun& r : runs) {
        // The run's parts before and after the owned slice [first, last).
        const std::int64_t before = std::clamp(first - at, std::int64_t(0), r.length);
        const std::int64_t after = std::clamp(last - at, std::int64_t(0), r.length);
        if (before > 0) out.push_back({r.begin, before});
        if (after < r.length)
            out.push_back({r.begin + std::max(after, before), r.length - std::max(after, before)});
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

namespace {

// One run that the ranks' slices tile exactly: the flat buffer is the packed set.
bool packed_in_place(const ShardedSet& set) {
    return set.runs.size() == 1 && set.elements == set.ranks * set.slice;
}

} // namespace

void reduce_scatter_set(const ShardedSet& set, Communicator& group, const float* grads,
                        float* owned, bool accumulate) {
    Vec packed, mine(static_cast<std::size_t>(set.slice));
    const float* in = packed_in_place(set) ? grads + set.runs[0].begin : nullptr;
    if (!in) {
        packed.resize(std::size_t(set.ranks * set.slice));
        set.pack(grads, packed.data());
        in = packed.data();
    }
    group.reduce_scatter_sum(in, mine.data(), mine.size());
    const std::int64_t n = set.owned_elements();
    if (accumulate)
        for (std::int64_t i = 0; i < n; ++i) owned[i] += mine[std::size_t(i)];
    else
        std::copy_n(mine.begin(), n, owned);
}

SetGather::SetGather(const ShardedSet& set, Communicator& group, float* values)
    : set_(&set), values_(values) {
    if (packed_in_place(set)) {
        float* whole = values + set.runs[0].begin;
        pending_ =
            group.start_all_gather(whole + set.rank * set.slice, whole, std::size_t(set.slice));
        return;
    }
    mine_.resize(std::size_t(set.slice));
    whole_.resize(std::size_t(set.ranks * set.slice));
    set.pack_owned(values, mine_.data());
    pending_ = group.start_all_gather(mine_.data(), whole_.data(), mine_.size());
}

void SetGather::finish() {
    if (!pending_) return;
    pending_->wait();
    pending_.reset();
    if (!whole_.empty()) set_->unpack(whole_.data(), values_);
    Vec().swap(mine_);
    Vec().swap(whole_);
}

void all_gather_set(const ShardedSet& set, Communicator& group, float* values) {
    SetGather(set, group, values).finish();
}

} // namespace trident::executor
