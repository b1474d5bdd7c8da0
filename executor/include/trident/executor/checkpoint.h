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
    std::int64_t iteration = 0;          // optimizer steps taken
    std::int64_t consumed_samples = 0;   // training samples read (the data position)
    std::uint64_t seed = 0;              // of the weights' initialisation and the data order
    std::string resharded_from;          // load: the saved layout, when it was not this run's
    bool fp8_histories_restored = false; // load: delayed FP8 amax histories came with it
};

// The manifest's name for iteration n: "iter_0000010".
std::string checkpoint_name(std::int64_t iteration);

void save_checkpoint(const std::string& dir, const CheckpointPosition& position, Trainer& trainer,
                     const core::JobSpec& job, ProcessGroups& groups);

// What `--load` asks for: a checkpoint directory (what --save wrote) and, with --ckpt-step N
// or `--load DIR/iter_000000N` (as Megatron users point --load at one iteration), that
// iteration; otherwise the newest. A directory without checkpoints, or that does not exist,
// is a first launch only when it is also the --save directory (Megatron's auto-resume
// pattern); otherwise loading refuses it.
struct LoadRequest {
    std::string dir;
    std::optional<std::int64_t> iteration;
    bool first_launch_allowed = false;
};
// SpecError("--ckpt-step") when --ckpt-step and an iter_N in --load disagree.
LoadRequest load_request(const std::string& load, std::optional<std::int64_t> ckpt_step,
                         const std::string& save);

// Loads the requested checkpoint into `trainer` and returns its position, or nothing on a
// first launch. A checkpoint saved with another layout (tp, pp, dp, ep, vpp, ZeRO stage,
// world size) is resharded: every rank reads all the saved shards and cuts its own tensors
// and Adam state out of them. Refuses (SpecError "--load") a checkpoint of another model, batch
// or sequence length, and one whose shards are missing, truncated or corrupt — then naming
// the newest whole checkpoint before it and the --ckpt-step that loads it.
std::optional<CheckpointPosition> load_checkpoint(const LoadRequest& request, Trainer& trainer,
                                                  const core::JobSpec& job, ProcessGroups& groups);

struct CheckpointCheck {
    enum class State { whole, damaged, interrupted }; // interrupted: a .partial/.replaced leftover
    std::string name;
    State state = State::whole;
    std::string detail;                    // "3 shards, …" or what is wrong
    std::optional<std::int64_t> iteration; // of an iter_N directory
    std::int64_t consumed_samples = -1;    // from a readable manifest, else −1
    std::string layout;                    // likewise ("tp 1 · cp 1 · …")
};

// Checks every shard of every checkpoint directory under `dir` against its manifest (sizes
// and checksums), in name order.
std::vector<CheckpointCheck> verify_checkpoints(const std::string& dir);

// The iteration latest_checkpointed_iteration.txt names in `dir`, if it names one.
std::optional<std::int64_t> latest_pointer(const std::string& dir);

} // namespace trident::executor
