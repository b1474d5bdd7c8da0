#pragma once
// One rank's checkpoint shard, byte for byte (little-endian):
//   "TRIDCKPT", u32 version = 1, u32 rank, i64 iteration, i64 skipped steps,
//   u64 tensor count, per tensor: u64 name length, name, i64 offset, i64 size, i64 full size,
//       u8 duplicate, u64 run count, per run i64 full offset, i64 length
//   i64 moment begin (where the Adam moments start in the flat buffer: a ZeRO-1 shard's start)
//   u64 n, n fp32 parameters (the rank's whole flat buffer); u64 m, m fp32 first moments;
//   u64 m, m fp32 second moments.
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
    std::int64_t moment_begin = 0;
    std::vector<float> parameters, adam_m, adam_v;
};

std::vector<std::uint8_t> serialize_shard(int rank, std::int64_t iteration,
                                          const TrainerState& state);
// Throws SpecError("--load", …) naming `what` (the file) when the bytes are not a shard.
Shard parse_shard(const std::vector<std::uint8_t>& bytes, const std::string& what);

} // namespace trident::executor::checkpoint_detail
