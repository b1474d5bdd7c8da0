#pragma once
// Checkpoints that survive faults. DIR/iter_0000010/ holds one shard per rank (its parameters,
// Adam moments, skipped-step counter) and a manifest — model, layout, step, data position,
// seed, each shard's size and checksum — written last. The directory is assembled as
// iter_0000010.partial and renamed into place only when every shard and the manifest are on
// disk, so a checkpoint directory is either whole or absent; DIR/latest_checkpointed_iteration.txt
// (Megatron's name) is replaced atomically after that. Older checkpoints are never touched.
// The calls are collective over the world communicator; an error on any rank is raised on all
// of them as the same SpecError.
#include "trident/core/job.h"
#include "trident/executor/process_groups.h"
#include "trident/executor/trainer.h"

#include <cstdint>
#include <optional>
#include <string>

namespace trident::executor {

struct CheckpointPosition {
    std::int64_t iteration = 0;        // optimizer steps taken
    std::int64_t consumed_samples = 0; // training samples read (the data position)
    std::uint64_t seed = 0;            // of the weights' initialisation and the data order
    std::string resharded_from;        // load: the saved layout, when it was not this run's
};

// The manifest's name for iteration n: "iter_0000010".
std::string checkpoint_name(std::int64_t iteration);

void save_checkpoint(const std::string& dir, const CheckpointPosition& position, Trainer& trainer,
                     const core::JobSpec& job, ProcessGroups& groups);

// Loads the newest whole checkpoint under `dir` into `trainer` and returns its position, or
// nothing when `dir` holds no checkpoint. A checkpoint saved with another layout (tp, pp, dp,
// ep, vpp, ZeRO-1, world size) is resharded: every rank reads all the saved shards and cuts its
// own tensors and Adam state out of them. Refuses (SpecError "--load") a checkpoint of another
// model, batch or sequence length, and one whose shards are missing, truncated or corrupt.
std::optional<CheckpointPosition> load_checkpoint(const std::string& dir, Trainer& trainer,
                                                  const core::JobSpec& job, ProcessGroups& groups);

struct CheckpointCheck {
    enum class State { whole, damaged, interrupted }; // interrupted: a .partial/.replaced leftover
    std::string name;
    State state = State::whole;
    std::string detail; // "3 shards" or what is wrong
};

// Checks every shard of every checkpoint directory under `dir` against its manifest (sizes
// and checksums), in name order.
std::vector<CheckpointCheck> verify_checkpoints(const std::string& dir);

} // namespace trident::executor
