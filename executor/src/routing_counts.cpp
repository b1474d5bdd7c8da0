// What the router did over a run (`trident run --moe-routing-out`): the routed slots per expert
// summed over everything, and per pass what each expert received — the statistics
// moe.load_balance reads back into the simulator.
#include "trident/executor/mpi.h"
#include "trident/executor/trainer.h"

#include <mpi.h>

namespace trident::executor {

std::vector<double> CpuTrainer::routed_tokens_per_expert() {
    std::vector<double> slots(std::size_t(job_.model.moe ? job_.model.moe->num_experts : 0), 0.0);
    // Every tensor rank routes the same rows (or holds the group's sum under sequence
    // parallelism): tensor rank 0 speaks for its group. Pipeline, data, context and expert
    // ranks route different tokens or layers, so their counts add.
    if (groups_.coord.tp == 0)
        for (const GptChunk& chunk : chunks_)
            for (std::size_t e = 0; e < chunk.routed_slots().size(); ++e)
                slots[e] += chunk.routed_slots()[e];
    // In doubles (floats stop counting at 2^24): exact below 2^53, summed in any order.
    MpiCommunicator& world = *groups_.world;
    const auto watched = world.watch_collective("all-reduce of the routed-slot counts");
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, slots.data(), int(slots.size()), MPI_DOUBLE, MPI_SUM,
                            world.handle()),
              "MPI_Allreduce");
    return slots;
}

std::vector<std::vector<double>> CpuTrainer::routed_passes() {
    const auto experts = std::size_t(job_.model.moe ? job_.model.moe->num_experts : 0);
    // This rank's passes in order (its chunks in order: the same on every rank of its group),
    // each summed over the etp·ep group — what each expert received in that pass.
    std::vector<double> flat;
    for (const GptChunk& chunk : chunks_)
        for (const std::vector<double>& pass : chunk.routed_passes())
            flat.insert(flat.end(), pass.begin(), pass.end());
    MpiCommunicator& group = *groups_.tensor_expert;
    {
        const auto watched = group.watch_collective("all-reduce of the routed passes");
        check_mpi(MPI_Allreduce(MPI_IN_PLACE, flat.data(), int(flat.size()), MPI_DOUBLE, MPI_SUM,
                                group.handle()),
                  "MPI_Allreduce");
    }
    if (group.rank() != 0) flat.clear(); // one rank speaks for its group
    MpiCommunicator& world = *groups_.world;
    const auto watched = world.watch_collective("gather of the routed passes");
    const int mine = int(flat.size());
    std::vector<int> counts(std::size_t(world.size())), at(std::size_t(world.size()), 0);
    check_mpi(MPI_Gather(&mine, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, world.handle()),
              "MPI_Gather");
    for (std::size_t r = 1; r < counts.size(); ++r) at[r] = at[r - 1] + counts[r - 1];
    std::vector<double> all(std::size_t(world.rank() == 0 ? at.back() + counts.back() : 0));
    check_mpi(MPI_Gatherv(flat.data(), mine, MPI_DOUBLE, all.data(), counts.data(), at.data(),
                          MPI_DOUBLE, 0, world.handle()),
              "MPI_Gatherv");
    std::vector<std::vector<double>> passes;
    for (std::size_t i = 0; experts > 0 && i + experts <= all.size(); i += experts)
        passes.emplace_back(all.begin() + std::ptrdiff_t(i),
                            all.begin() + std::ptrdiff_t(i + experts));
    return passes;
}

} // namespace trident::executor
