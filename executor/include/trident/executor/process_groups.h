#pragma once
// The process groups of one rank, built once from the plan's RankGrid (Megatron's
// tp-cp-ep-dp-pp order) with MPI_Comm_split, and owned here, with the watchdog that times
// their communication (--distributed-timeout-minutes).
#include "trident/core/rank_grid.h"
#include "trident/executor/mpi.h"

#include <memory>

namespace trident::executor {

struct ProcessGroups {
    ProcessGroups(const core::ParallelPlan& plan, int world_rank,
                  double timeout_s = 60.0 * kDefaultDistributedTimeoutMinutes);

    // First, so it outlives the communicators that point to it.
    std::unique_ptr<Watchdog> watchdog;
    core::RankGrid grid;
    core::RankCoord coord;
    int world_rank;
    std::unique_ptr<MpiCommunicator> world;
    std::unique_ptr<MpiCommunicator> tensor;
    std::unique_ptr<MpiCommunicator> context; // cp ranks sharing a sequence
    std::unique_ptr<MpiCommunicator> pipeline;
    std::unique_ptr<MpiCommunicator> data;          // dp ranks holding the same shard
    std::unique_ptr<MpiCommunicator> model;         // tp·pp ranks of one replica
    std::unique_ptr<MpiCommunicator> embedding;     // first and last stage; null on middle stages
    std::unique_ptr<MpiCommunicator> expert;        // ep ranks exchanging tokens
    std::unique_ptr<MpiCommunicator> expert_data;   // ranks holding the same experts
    std::unique_ptr<MpiCommunicator> expert_tensor; // ranks splitting the same experts (etp)
    std::unique_ptr<MpiCommunicator> tensor_expert; // etp·ep ranks (allgather dispatcher)
    // Hybrid sharding (num_distributed_optimizer_instances N): the data (expert-data) ranks of
    // one replica, over which the optimizer state is sharded, and the ranks holding the same
    // shard in the N replicas. With N = 1: the data (expert-data) group, and one rank.
    std::unique_ptr<MpiCommunicator> data_shard, data_replica;
    std::unique_ptr<MpiCommunicator> expert_data_shard, expert_data_replica;
};

} // namespace trident::executor
