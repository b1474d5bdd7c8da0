#pragma once
// MPI for the CPU backend: the session (MPI_Init / MPI_Finalize) and a communicator that owns
// its MPI_Comm. RAII for both; copying is forbidden, moving transfers ownership.
#include "trident/core/spec_error.h"
#include "trident/executor/communicator.h"
#include "trident/executor/watchdog.h"

#include <memory>
#include <mpi.h>
#include <vector>

namespace trident::executor {

// Throws std::runtime_error naming `what` and MPI's message when `code` is not MPI_SUCCESS
// (MpiSession makes MPI return its errors instead of aborting).
void check_mpi(int code, const char* what);

class MpiSession {
public:
    // Asks for MPI_THREAD_MULTIPLE: the watchdog's thread talks while the main thread waits.
    MpiSession(int* argc, char*** argv);
    ~MpiSession();
    MpiSession(const MpiSession&) = delete;
    MpiSession& operator=(const MpiSession&) = delete;
    int world_rank() const;
    int world_size() const;

    // Ends a command that failed with bad input; returns the exit code (2). The error must
    // reach the user exactly once even though mpirun kills every rank as soon as one exits
    // non-zero: rank 0 prints "trident: error: FIELD: REASON" first, then all ranks meet in a
    // barrier on a communicator of their own and leave together. An error that only some ranks
    // raised never completes that barrier: after `wait_s` a failing rank other than 0 prints
    // its own line (naming its rank) and aborts the job.
    int exit_with(const core::SpecError& error, double wait_s = 10.0);

private:
    MPI_Comm errors_ = MPI_COMM_NULL; // a duplicate of MPI_COMM_WORLD for exit_with's barrier
};

class MpiCommunicator final : public Communicator {
public:
    // Takes ownership of `comm` (freed on destruction unless it is MPI_COMM_WORLD). `name`
    // labels it in the watchdog's line ("data-parallel"); `watchdog` (may be null: untimed)
    // must outlive it.
    explicit MpiCommunicator(MPI_Comm comm, std::string name = "world",
                             Watchdog* watchdog = nullptr);
    ~MpiCommunicator() override;
    MpiCommunicator(const MpiCommunicator&) = delete;
    MpiCommunicator& operator=(const MpiCommunicator&) = delete;

    int rank() const override { return rank_; }
    int size() const override { return size_; }
    void all_reduce_sum(float* data, std::size_t n) override;
    void all_reduce_max(float* data, std::size_t n) override;
    void all_gather(const float* in, float* out, std::size_t n_per_rank) override;
    // MPI_Iallgather: MPI moves it on inside the MPI calls made until wait() (and in wait()).
    std::unique_ptr<PendingCollective> start_all_gather(const float* in, float* out,
                                                        std::size_t n_per_rank) override;
    void reduce_scatter_sum(const float* in, float* out, std::size_t n_per_rank) override;
    void all_to_all(const float* in, float* out, std::size_t n_per_rank) override;
    void all_to_allv(const float* in, const std::vector<std::size_t>& send_counts, float* out,
                     const std::vector<std::size_t>& recv_counts) override;
    void broadcast(float* data, std::size_t n, int root) override;
    void send(const float* data, std::size_t n, int peer, int tag) override;
    void recv(float* data, std::size_t n, int peer, int tag) override;
    void wait_sends() override;
    void barrier() override;

    MPI_Comm handle() const { return comm_; }
    const GroupLabel& label() const { return label_; }
    // For a collective the caller makes itself on handle(): timed by the watchdog while the
    // returned scope lives. Every member must call it for the same collectives, in order.
    Watchdog::Scope watch_collective(const char* operation);

private:
    class PendingMpiCollective;
    Watchdog::Scope watch_transfer(const char* operation, int peer);
    struct PendingSend {
        std::vector<float> buffer;
        MPI_Request request;
        int peer;
    };
    MPI_Comm comm_;
    GroupLabel label_;
    Watchdog* watchdog_;
    long long collectives_ = 0;
    int rank_ = 0, size_ = 1;
    std::vector<std::unique_ptr<PendingSend>> pending_;
};

// This rank's place among the ranks that share its node (MPI_COMM_TYPE_SHARED): which GPU it
// takes, how many ranks share the node's memory. Collective over MPI_COMM_WORLD.
struct NodePlace {
    int rank = 0;
    int ranks = 1;
};
NodePlace node_place();

// True on every rank when `ok` is true on every rank (a logical-and all-reduce over
// MPI_COMM_WORLD), so a check that passes on some ranks only refuses on all of them.
bool on_every_rank(bool ok);

} // namespace trident::executor
