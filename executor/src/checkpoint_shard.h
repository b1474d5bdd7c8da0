#pragma once
// One rank's checkpoint shard, byte for byte (little-endian):
//   "TRIDCKPT", u32 version = 2, u32 rank, i64 iteration, i64 skipped steps,
//   u64 tensor count, per tensor: u64 name length, name, i64 offset, i64 size, i64 full size,
//       u8 duplicate, u64 run count, per run i64 full offset, i64 length
//   u64 moment run count, per run i64 flat begin, i64 length (the flat elements the Adam
//       moments belong to, in their order: all, a ZeRO-1 shard, or dense and expert slices)
//   u64 n, n fp32 parameters (the rank's whole flat buffer); u64 m, m fp32 first moments;
//   u64 m, m fp32 second moments.
// Version 1 (read too) had one i64 moment begin where version 2 has the moment runs.
// The tensor table is what lets a checkpoint be loaded into another layout: it says where each
// element of every full tensor sits in this rank's flat buffer.
#include "trident/executor/trainer.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace trident::executor::checkpoint_detail {

struct ShardTensor {
    std::string name;
    std::int64_t offset = 0, size = 0, full_size = 0;
    bool duplicate = false;
    std::vector<std::pair<std::int64_t, std::int64_t>> placement; // (full offset, length) runs
};

struct Shard {
    std::uint32_t rank = 0;
    std::int64_t iteration = 0, skipped_steps = 0;
    std::vector<ShardTensor> tensors;
    std::vector<FlatRun> moment_runs;
    std::vector<float> parameters, adam_m, adam_v;
};

std::vector<std::uint8_t> serialize_shard(int rank, std::int64_t iteration,
                                          const TrainerState& state);
// Throws SpecError("--load", …) naming `what` (the file) when the bytes are not a shard.
Shard parse_shard(const std::vector<std::uint8_t>& bytes, const std::string& what);

// Where in a moment array each flat element's moments sit (runs as TrainerState has them).
class MomentIndex {
public:
    explicit MomentIndex(const std::vector<FlatRun>& runs);
    // The moment index of flat element `flat`; -1 when the rank holds no moments for it.
    std::int64_t of(std::int64_t flat) const;

private:
    struct Entry {
        std::int64_t begin, length, moment;
    };
    std::vector<Entry> sorted_; // by flat begin
};

} // namespace trident::executor::checkpoint_detail
