#include "trident/executor/process_groups.h"

#include "trident/executor/mpi.h"

#include <algorithm>

namespace trident::executor {
namespace {

// Every rank calls this for every kind (MPI_Comm_split is collective over the world): the
// group's first member names it, the rank's place in the group orders it.
std::unique_ptr<MpiCommunicator> split(const core::RankGrid& grid, core::GroupKind kind,
                                       int world_rank, const char* name, Watchdog* watchdog) {
    const auto members = grid.group_of(kind, world_rank);
    int color = MPI_UNDEFINED, key = 0;
    if (!members.empty()) {
        color = int(members.front());
        key = int(std::find(members.begin(), members.end(), world_rank) - members.begin());
    }
    MPI_Comm comm = MPI_COMM_NULL;
    check_mpi(MPI_Comm_split(MPI_COMM_WORLD, color, key, &comm), "MPI_Comm_split");
    if (comm == MPI_COMM_NULL) return nullptr;
    return std::make_unique<MpiCommunicator>(comm, name, watchdog);
}

} // namespace

ProcessGroups::ProcessGroups(const core::ParallelPlan& plan, int rank, double timeout_s)
    : watchdog(std::make_unique<Watchdog>(timeout_s)), grid(plan), coord(grid.coord(rank)),
      world_rank(rank) {
    MPI_Comm world_copy = MPI_COMM_NULL;
    check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &world_copy), "MPI_Comm_dup");
    world = std::make_unique<MpiCommunicator>(world_copy, "world", watchdog.get());
    Watchdog* w = watchdog.get();
    tensor = split(grid, core::GroupKind::tensor, rank, "tensor-parallel", w);
    context = split(grid, core::GroupKind::context, rank, "context-parallel", w);
    pipeline = split(grid, core::GroupKind::pipeline, rank, "pipeline-parallel", w);
    data = split(grid, core::GroupKind::data_context, rank, "data-parallel", w);
    model = split(grid, core::GroupKind::model, rank, "model-parallel", w);
    embedding = split(grid, core::GroupKind::embedding, rank, "embedding", w);
    expert = split(grid, core::GroupKind::expert, rank, "expert-parallel", w);
    expert_data = split(grid, core::GroupKind::expert_data, rank, "expert-data-parallel", w);
    expert_tensor = split(grid, core::GroupKind::expert_tensor, rank, "expert-tensor-parallel", w);
    tensor_expert =
        split(grid, core::GroupKind::tensor_expert, rank, "expert-tensor-and-expert-parallel", w);
    data_shard = split(grid, core::GroupKind::data_shard, rank, "data-shard", w);
    data_replica = split(grid, core::GroupKind::data_replica, rank, "data-replica", w);
    expert_data_shard =
        split(grid, core::GroupKind::expert_data_shard, rank, "expert-data-shard", w);
    expert_data_replica =
        split(grid, core::GroupKind::expert_data_replica, rank, "expert-data-replica", w);
}

} // namespace trident::executor
