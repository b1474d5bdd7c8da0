#include "fsdp_units.h"

#include "host_memory.h"
#include "model_copies.h"
#include "partial_sums.h"
#include "trident/core/internal_error.h"
#include "trident/core/schedule.h"

#include <algorithm>

namespace trident::executor {

FsdpUnits::FsdpUnits(const core::JobSpec& job, ParameterStore& store,
                     const std::vector<GptChunk>& chunks, ProcessGroups& groups,
                     std::vector<ShardedSet>& sets, bool give_back_pages)
    : job_(job), store_(store), groups_(groups), sets_(sets),
      shard_parameters_(job.plan.zero_stage() == 3), give_back_pages_(give_back_pages) {
    // Sharded over one replica's ranks (all the data ranks without hybrid sharding).
    const auto over = [&](bool expert) {
        return expert ? groups.expert_data_shard.get() : groups.data_shard.get();
    };
    for (const GptChunk& chunk : chunks) {
        chunk_sets_.push_back(sets_.size());
        const std::size_t first = chunk.first_tensor();
        const std::vector<std::int32_t>& of = chunk.tensor_units();
        chunk_tensors_.push_back({first, first + of.size()});
        const std::int32_t count = of.empty() ? 0 : *std::max_element(of.begin(), of.end()) + 1;
        units_.emplace_back(std::size_t(count));
        for (std::int32_t u = 0; u < count; ++u) {
            // Each unit: its dense tensors, its routed experts'; a tied embedding summed across
            // stages on its own (whole until the step's end).
            const auto in_unit = [&](std::size_t i) {
                return i >= first && i < first + of.size() && of[i - first] == u;
            };
            const auto whole = [&](std::size_t i) {
                return summed_across_stages(job, store.tensors[i]);
            };
            std::vector<std::size_t>& unit_sets = units_.back()[std::size_t(u)].sets;
            for (int kind = 0; kind < 3; ++kind) {
                const bool expert = kind == 1;
                Communicator& g = *over(expert);
                ShardedSet set = sharded_set(
                    store,
                    [&](std::size_t i) {
                        if (!in_unit(i)) return false;
                        if (kind == 2) return whole(i);
                        return !whole(i) && store.tensors[i].expert == expert;
                    },
                    expert, g.size(), g.rank());
                if (set.elements == 0) continue;
                unit_sets.push_back(sets_.size());
                whole_.push_back(kind == 2);
                sets_.push_back(std::move(set));
            }
            Unit& unit = units_.back()[std::size_t(u)];
            for (std::size_t s : unit.sets)
                unit.others += sets_[s].elements - sets_[s].owned_elements();
        }
    }
    chunk_sets_.push_back(sets_.size());
    std::int64_t owned = 0;
    for (const ShardedSet& s : sets_) {
        set_at_.push_back(owned);
        owned += s.owned_elements();
    }
    owned_grads_.assign(std::size_t(owned), 0.0f);
    clear(store_.grads.data(), store_.grads.size());
    held_ = std::int64_t(store_.values.size());
    begin_step();
    peak_held_ = held_;
}

void FsdpUnits::clear(float* data, std::size_t n) const {
    if (give_back_pages_)
        release_pages(data, n);
    else
        std::fill_n(data, n, 0.0f);
}

Communicator& FsdpUnits::group_of(const ShardedSet& set) const {
    return set.expert ? *groups_.expert_data_shard : *groups_.data_shard;
}

void FsdpUnits::begin_step() {
    std::fill(owned_grads_.begin(), owned_grads_.end(), 0.0f);
    if (!shard_parameters_) return;
    for (std::size_t c = 0; c < units_.size(); ++c)
        for (std::size_t u = 0; u < units_[c].size(); ++u)
            release(std::int32_t(c), std::int32_t(u));
}

void FsdpUnits::reduce_chunk(std::int32_t chunk) {
    const auto [first, end] = chunk_tensors_.at(std::size_t(chunk));
    float* grads = store_.grads.data();
    sum_tensor_partial_gradients(job_, store_, grads, *groups_.tensor, first, end);
    for (const Unit& unit : units_[std::size_t(chunk)])
        for (std::size_t s : unit.sets) {
            if (!whole_[s]) reduce_set(s);
        }
}

void FsdpUnits::reduce_set(std::size_t s) {
    const ShardedSet& set = sets_[s];
    float* grads = store_.grads.data();
    reduce_scatter_set(set, group_of(set), grads, owned_grads_.data() + set_at_[s], true);
    for (const FlatRun& r : set.runs) clear(grads + r.begin, std::size_t(r.length));
}

float* FsdpUnits::finish_gradients() {
    float* grads = store_.grads.data();
    if (std::find(whole_.begin(), whole_.end(), true) != whole_.end()) {
        sum_tied_embedding_gradients(job_, store_, grads, groups_.embedding.get());
        if (core::placement_of(job_.plan.schedule) == core::StagePlacement::v_shape)
            sum_tied_embedding_locally(job_, store_, grads);
    }
    for (std::size_t s = 0; s < sets_.size(); ++s)
        if (whole_[s]) reduce_set(s);
    return owned_grads_.data();
}

void FsdpUnits::acquire(std::int32_t chunk, std::int32_t unit) {
    Unit& u = units_.at(std::size_t(chunk)).at(std::size_t(unit));
    if (u.presence == Presence::arriving) arrive(u);
    if (u.presence == Presence::gathered) return;
    for (std::size_t s : u.sets) all_gather_set(sets_[s], group_of(sets_[s]), store_.values.data());
    u.presence = Presence::gathered;
    held_ += u.others;
    peak_held_ = std::max(peak_held_, held_);
}

void FsdpUnits::prefetch(std::int32_t chunk, std::int32_t unit) {
    Unit& u = units_.at(std::size_t(chunk)).at(std::size_t(unit));
    if (u.presence != Presence::dropped) return;
    // Its memory is taken from now: the gathers write into it while the current unit computes.
    for (std::size_t s : u.sets)
        u.arriving.emplace_back(sets_[s], group_of(sets_[s]), store_.values.data());
    u.presence = Presence::arriving;
    held_ += u.others;
    peak_held_ = std::max(peak_held_, held_);
}

void FsdpUnits::arrive(Unit& u) {
    for (SetGather& g : u.arriving) g.finish();
    u.arriving.clear();
    u.presence = Presence::gathered;
}

std::int64_t FsdpUnits::prefetch_depth() const {
    return shard_parameters_ ? job_.plan.sharding.prefetch_units : 0;
}

void FsdpUnits::release(std::int32_t chunk, std::int32_t unit) {
    Unit& u = units_.at(std::size_t(chunk)).at(std::size_t(unit));
    if (!shard_parameters_ || u.presence == Presence::dropped) return;
    if (u.presence == Presence::arriving) arrive(u); // MPI must be done writing into it
    if (give_back_pages_)
        for (std::size_t s : u.sets)
            for (const FlatRun& r : sets_[s].others()) // the next gather overwrites them whole
                offer_pages(store_.values.data() + r.begin, std::size_t(r.length));
    u.presence = Presence::dropped;
    held_ -= u.others;
}

void FsdpUnits::gather_all() {
    // For a checkpoint or the whole model's gather, not training: the peak stays training's.
    const std::int64_t peak = peak_held_;
    for (std::size_t c = 0; c < units_.size(); ++c)
        for (std::size_t u = 0; u < units_[c].size(); ++u)
            acquire(std::int32_t(c), std::int32_t(u));
    peak_held_ = peak;
}

ChunkRanges FsdpUnits::owned_chunk_ranges() const {
    if (chunk_sets_.size() != 3)
        throw core::InternalError("FsdpUnits: chunk ranges need exactly two chunks");
    const auto at = [&](std::size_t set) {
        return set < sets_.size() ? set_at_[set] : std::int64_t(owned_grads_.size());
    };
    return {at(chunk_sets_[0]), at(chunk_sets_[1]), at(chunk_sets_[1]), at(chunk_sets_[2])};
}

Vec FsdpUnits::owned_values(std::int32_t chunk) const {
    Vec packed;
    const float* values = store_.values.data();
    for (std::size_t s = chunk_sets_.at(std::size_t(chunk));
         s < chunk_sets_[std::size_t(chunk) + 1]; ++s)
        for (const FlatRun& r : sets_[s].owned())
            packed.insert(packed.end(), values + r.begin, values + r.begin + r.length);
    return packed;
}

void FsdpUnits::set_owned_values(std::int32_t chunk, const float* packed) {
    float* values = store_.values.data();
    for (std::size_t s = chunk_sets_.at(std::size_t(chunk));
         s < chunk_sets_[std::size_t(chunk) + 1]; ++s)
        for (const FlatRun& r : sets_[s].owned()) {
            std::copy_n(packed, r.length, values + r.begin);
            packed += r.length;
        }
}

} // namespace trident::executor
