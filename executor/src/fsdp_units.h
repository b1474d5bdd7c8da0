#pragma once
// ZeRO-2 and ZeRO-3 in the CPU trainer, as Megatron-FSDP runs them (Rajbhandari et al. 2020;
// --data-parallel-sharding-strategy optim_grads | optim_grads_params). The unit is the layout
// table's FSDP unit (core::ChunkLayout::units: the embedding, each transformer layer, the final
// norm with the head). Each unit's dense tensors and its routed experts' are two sets, sharded
// evenly over the data × context ranks and the expert-data ranks (sharded_sets.h); the owned
// slices of all sets, in order, are what the optimizer steps.
// - Gradients (both stages): when a chunk's backward of a micro-batch is done (B with W, or W),
//   its partial gradients are summed over the tensor group, every unit's are reduce-scattered
//   and added into this rank's slices, and the whole gradients are zeroed. A tied word embedding
//   held on two stages (or on the V's two chunks) is the exception: its gradient stays whole over
//   the step, is summed with its copy's at the end and reduce-scattered then, as a set of its own.
// - Parameters (ZeRO-3): a unit is all-gathered when a pass first reads it — before its
//   forward, and again before its backward — and the other ranks' slices are dropped when the
//   pass is done with it. With fsdp_prefetch_units k, holding a unit
//   begins the gathers of the pass's next k units (MPI_Iallgather), completed when each is
//   reached, so k + 1 units are gathered at once, as the simulator's memory model says.
// - Pages: the flat buffers are whole (allocated so, and checked to fit). Where memory is short,
//   what is dropped — zeroed gradients, the other ranks' slices — is offered back to the kernel
//   (host_memory.h); otherwise it stays, as a caching allocator keeps its blocks: offering
//   it made the GEMMs that wrote those pages again about 45 % slower (moe-bench dp 2 ZeRO-3:
//   W 49 ms per micro-batch offered, 34 kept), while the peak held is counted either way.
#include "model_copies.h"
#include "sharded_sets.h"
#include "trident/core/job.h"
#include "trident/executor/gpt_chunk.h"
#include "trident/executor/process_groups.h"

#include <cstdint>
#include <vector>

namespace trident::executor {

class FsdpUnits final : public ParameterUnits {
public:
    // Appends the sets of every unit of `chunks` to `sets` (which must outlive this); with
    // ZeRO-3 drops the other ranks' slices at once. Zeroes the gradients.
    // `give_back_pages`: offer what is dropped to the kernel (memory is short).
    FsdpUnits(const core::JobSpec& job, ParameterStore& store, const std::vector<GptChunk>& chunks,
              ProcessGroups& groups, std::vector<ShardedSet>& sets, bool give_back_pages);

    bool shards_parameters() const { return shard_parameters_; }
    // The start of a step: this rank's gradient slices zeroed; ZeRO-3: every unit dropped.
    void begin_step();
    // Chunk `chunk`'s gradients of one micro-batch are final on this rank.
    void reduce_chunk(std::int32_t chunk);
    // The end of the schedule: the tied embedding's sums. Returns this rank's summed gradient
    // slices, in the optimizer's order.
    float* finish_gradients();
    // ZeRO-3: every unit's parameters present (a checkpoint, the whole model's gather).
    void gather_all();
    // DualPipe's two chunks (model_copies.h): where each chunk's slices sit among the owned
    // gradients finish_gradients returns, and this rank's slices of a chunk's values, packed
    // in order — the twin's chunk 0 is sharded element for element as this rank's chunk 1.
    ChunkRanges owned_chunk_ranges() const;
    Vec owned_values(std::int32_t chunk) const;
    void set_owned_values(std::int32_t chunk, const float* packed);
    // The most parameters this rank held at once so far (its slices and the gathered units),
    // in elements.
    std::int64_t peak_held_elements() const { return peak_held_; }

    void acquire(std::int32_t chunk, std::int32_t unit) override;
    void prefetch(std::int32_t chunk, std::int32_t unit) override;
    void release(std::int32_t chunk, std::int32_t unit) override;
    std::int64_t prefetch_depth() const override;

private:
    enum class Presence { dropped, arriving, gathered };
    struct Unit {
        std::vector<std::size_t> sets; // into sets_
        std::int64_t others = 0;       // the other ranks' elements of those sets
        Presence presence = Presence::gathered;
        std::vector<SetGather> arriving; // a prefetch's gathers in flight, one per set
    };
    // A prefetched unit's gathers completed.
    void arrive(Unit& u);
    Communicator& group_of(const ShardedSet& set) const;
    // Set s's gradients reduce-scattered into this rank's slice, the whole gradients released.
    void reduce_set(std::size_t s);

    const core::JobSpec& job_;
    ParameterStore& store_;
    ProcessGroups& groups_;
    std::vector<ShardedSet>& sets_;
    bool shard_parameters_ = false, give_back_pages_ = false;
    // Zeroes data[0, n), offering its pages back when give_back_pages_.
    void clear(float* data, std::size_t n) const;
    std::vector<std::vector<Unit>> units_;                           // [chunk][unit]
    std::vector<std::pair<std::size_t, std::size_t>> chunk_tensors_; // [first, end) per chunk
    std::vector<bool> whole_;             // per set: a tied embedding's, reduced at the step's end
    std::vector<std::int64_t> set_at_;    // each set's first slice element in owned order
    std::vector<std::size_t> chunk_sets_; // each chunk's first set, and the end
    Vec owned_grads_;
    std::int64_t held_ = 0, peak_held_ = 0;
};

} // namespace trident::executor
