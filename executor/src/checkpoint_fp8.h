#pragma once
// Delayed FP8 scaling's amax histories in a checkpoint: one JSON file beside the shards, keyed
// by global layer, linear, expert and operand, so any layout loads it (TE keeps its fp8 meta
// in the checkpoint for the same reason: a resumed run scales as the uninterrupted one).
#include "trident/core/job.h"
#include "trident/executor/mpi.h"
#include "trident/executor/trainer.h"

#include <string>
#include <vector>

namespace trident::executor::checkpoint_fp8 {

inline constexpr const char* kFile = "fp8_amax_history.json";

// Collective over `world`: every rank's histories (Trainer::fp8_amax_histories) gathered to
// rank 0, which gets the file's text ("" on the other ranks).
std::string gather_text(const std::vector<Fp8AmaxHistory>& mine, MpiCommunicator& world, int rank);

// The histories in `text` (the file at `source`), checked against `job`'s model: SpecError
// naming the entry and field for anything malformed.
std::vector<Fp8AmaxHistory> parse(const std::string& text, const std::string& source,
                                  const core::JobSpec& job);

} // namespace trident::executor::checkpoint_fp8
