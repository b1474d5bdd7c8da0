#pragma once
// ZeRO-1 as Megatron-Core's distributed optimizer does it beside experts: the dense tensors are
// sharded over the data × context group, the routed experts' over the expert-data group (the
// ranks that hold the same experts). Each set's elements, in flat-buffer order, are padded to a
// multiple of its group's size; rank k of the group owns the k-th slice: it receives that slice
// of the summed gradients (reduce-scatter), steps it, and gives it back (all-gather).
#include "trident/executor/gpt_chunk.h"
#include "trident/executor/trainer.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace trident::executor {

struct ShardedSet {
    std::vector<FlatRun> runs; // the set's elements in the flat buffer, in flat order
    bool expert = false;       // routed experts' (over the expert-data group), else dense
    std::int64_t elements = 0; // their count
    std::int64_t ranks = 1, rank = 0;
    std::int64_t slice = 0; // ⌈elements / ranks⌉

    // This rank's slice as flat runs (padding excluded), and their element count.
    std::vector<FlatRun> owned() const;
    std::int64_t owned_elements() const;
    // The set's other elements (the other ranks' slices) as flat runs.
    std::vector<FlatRun> others() const;
    // The set in order into out[ranks·slice], zero-padded.
    void pack(const float* flat, float* out) const;
    // This rank's slice into out[slice], zero-padded.
    void pack_owned(const float* flat, float* out) const;
    // The whole set (as pack wrote it) back into the flat buffer.
    void unpack(const float* set, float* flat) const;
};

// The set's gradients summed over `group` (its ranks): this rank's slice into
// owned[0, owned_elements()), added to what is there when `accumulate`.
void reduce_scatter_set(const ShardedSet& set, Communicator& group, const float* grads,
                        float* owned, bool accumulate);
// Every rank's slice of the set's values (as the ranks stepped them) into the flat buffer.
void all_gather_set(const ShardedSet& set, Communicator& group, float* values);
// The same begun now and done by finish() (ZeRO-3's prefetch): the flat buffer's other slices
// are written by then, not before. `set` and `values` must outlive it.
class SetGather {
public:
    SetGather(const ShardedSet& set, Communicator& group, float* values);
    void finish(); // a second call does nothing

private:
    const ShardedSet* set_;
    float* values_;
    Vec mine_, whole_; // this rank's slice and the gathered set, when not gathered in place
    std::unique_ptr<PendingCollective> pending_;
};

// The tensors of `store` (by index) that `member` takes, over `ranks`; `expert` says which
// group they are sharded over.
ShardedSet sharded_set(const ParameterStore& store, const std::function<bool(std::size_t)>& member,
                       bool expert, std::int64_t ranks, std::int64_t rank);
// The routed experts' tensors of `store` (experts) or every other tensor, over `ranks`.
ShardedSet sharded_set(const ParameterStore& store, bool experts, std::int64_t ranks,
                       std::int64_t rank);

} // namespace trident::executor
