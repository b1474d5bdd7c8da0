#include "trident/executor/mpi.h"

#include <chrono>
#include <climits>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <thread>

namespace trident::executor {

void check_mpi(int code, const char* what) {
    if (code == MPI_SUCCESS) return;
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    MPI_Error_string(code, text, &length);
    throw std::runtime_error(std::string(what) + ": " + std::string(text, std::size_t(length)));
}

namespace {

int count(std::size_t n) {
    if (n > std::size_t(INT_MAX)) throw std::runtime_error("MPI message over 2^31 elements");
    return int(n);
}

} // namespace

MpiSession::MpiSession(int* argc, char*** argv) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    int provided = MPI_THREAD_SINGLE;
    if (!initialized)
        check_mpi(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
    // Errors come back as codes and become exceptions, not aborts.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &errors_), "MPI_Comm_dup");
}

MpiSession::~MpiSession() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    if (errors_ != MPI_COMM_NULL) MPI_Comm_free(&errors_);
    MPI_Finalize();
}

int MpiSession::exit_with(const core::SpecError& error, double wait_s) {
    const int rank = world_rank();
    if (rank == 0) {
        std::fprintf(stderr, "trident: error: %s: %s\n", error.field().c_str(),
                     error.reason().c_str());
        std::fflush(stderr);
    }
    MPI_Request request;
    MPI_Ibarrier(errors_, &request);
    const auto start = std::chrono::steady_clock::now();
    int done = 0;
    while (!done &&
           std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() <
               wait_s) {
        MPI_Test(&request, &done, MPI_STATUS_IGNORE);
        if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    if (done) return 2;
    // Only some ranks failed: the others wait in some collective that will never complete.
    if (rank != 0) {
        std::fprintf(stderr, "trident: error: rank %d: %s: %s\n", rank, error.field().c_str(),
                     error.reason().c_str());
        std::fflush(stderr);
    }
    MPI_Abort(MPI_COMM_WORLD, 2);
    return 2;
}

int MpiSession::world_rank() const {
    int r = 0;
    check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &r), "MPI_Comm_rank");
    return r;
}

int MpiSession::world_size() const {
    int s = 1;
    check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &s), "MPI_Comm_size");
    return s;
}

MpiCommunicator::MpiCommunicator(MPI_Comm comm, std::string name, Watchdog* watchdog)
    : comm_(comm), watchdog_(watchdog) {
    check_mpi(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
    check_mpi(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
    // The members' world ranks, for the watchdog's line.
    MPI_Group mine = MPI_GROUP_NULL, world = MPI_GROUP_NULL;
    check_mpi(MPI_Comm_group(comm_, &mine), "MPI_Comm_group");
    check_mpi(MPI_Comm_group(MPI_COMM_WORLD, &world), "MPI_Comm_group");
    std::vector<int> local(std::size_t(size_), 0);
    for (int r = 0; r < size_; ++r) local[std::size_t(r)] = r;
    label_ = {std::move(name), std::vector<int>(std::size_t(size_), 0)};
    check_mpi(
        MPI_Group_translate_ranks(mine, size_, local.data(), world, label_.world_ranks.data()),
        "MPI_Group_translate_ranks");
    MPI_Group_free(&mine);
    MPI_Group_free(&world);
}

Watchdog::Scope MpiCommunicator::watch_collective(const char* operation) {
    if (!watchdog_) return Watchdog::Scope(nullptr);
    return watchdog_->enter(operation, label_, ++collectives_);
}

Watchdog::Scope MpiCommunicator::watch_transfer(const char* operation, int peer) {
    if (!watchdog_) return Watchdog::Scope(nullptr);
    return watchdog_->enter(operation, label_, collectives_, label_.world_ranks[std::size_t(peer)]);
}

MpiCommunicator::~MpiCommunicator() {
    try {
        wait_sends();
    } catch (...) {
    }
    if (comm_ != MPI_COMM_WORLD && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void MpiCommunicator::all_reduce_sum(float* data, std::size_t n) {
    const auto watched = watch_collective("all-reduce");
    if (size_ > 1)
        check_mpi(MPI_Allreduce(MPI_IN_PLACE, data, count(n), MPI_FLOAT, MPI_SUM, comm_),
                  "MPI_Allreduce");
}

void MpiCommunicator::all_reduce_max(float* data, std::size_t n) {
    const auto watched = watch_collective("all-reduce (max)");
    if (size_ > 1)
        check_mpi(MPI_Allreduce(MPI_IN_PLACE, data, count(n), MPI_FLOAT, MPI_MAX, comm_),
                  "MPI_Allreduce");
}

void MpiCommunicator::all_gather(const float* in, float* out, std::size_t n) {
    const auto watched = watch_collective("all-gather");
    const bool in_place = in == out + std::size_t(rank()) * n; // MPI wants it said
    check_mpi(MPI_Allgather(in_place ? MPI_IN_PLACE : in, count(n), MPI_FLOAT, out, count(n),
                            MPI_FLOAT, comm_),
              "MPI_Allgather");
}

// An MPI_Iallgather in flight. wait() is watched like a blocking collective, under the
// sequence number the gather took when it began, so a hang names the right collective.
class MpiCommunicator::PendingMpiCollective final : public PendingCollective {
public:
    PendingMpiCollective(MpiCommunicator& comm, const char* operation)
        : comm_(comm), operation_(operation), sequence_(++comm.collectives_) {}
    ~PendingMpiCollective() override {
        try {
            wait();
        } catch (...) {
        }
    }
    void wait() override {
        if (request == MPI_REQUEST_NULL) return;
        const auto watched = comm_.watchdog_
                                 ? comm_.watchdog_->enter(operation_, comm_.label_, sequence_)
                                 : Watchdog::Scope(nullptr);
        check_mpi(MPI_Wait(&request, MPI_STATUS_IGNORE), "MPI_Wait");
    }
    MPI_Request request = MPI_REQUEST_NULL;

private:
    MpiCommunicator& comm_;
    const char* operation_;
    long long sequence_;
};

std::unique_ptr<PendingCollective> MpiCommunicator::start_all_gather(const float* in, float* out,
                                                                     std::size_t n) {
    auto pending = std::make_unique<PendingMpiCollective>(*this, "all-gather (prefetched)");
    const bool in_place = in == out + std::size_t(rank()) * n;
    check_mpi(MPI_Iallgather(in_place ? MPI_IN_PLACE : in, count(n), MPI_FLOAT, out, count(n),
                             MPI_FLOAT, comm_, &pending->request),
              "MPI_Iallgather");
    return pending;
}

void MpiCommunicator::reduce_scatter_sum(const float* in, float* out, std::size_t n) {
    const auto watched = watch_collective("reduce-scatter");
    check_mpi(MPI_Reduce_scatter_block(in, out, count(n), MPI_FLOAT, MPI_SUM, comm_),
              "MPI_Reduce_scatter_block");
}

void MpiCommunicator::all_to_all(const float* in, float* out, std::size_t n) {
    const auto watched = watch_collective("all-to-all");
    check_mpi(MPI_Alltoall(in, count(n), MPI_FLOAT, out, count(n), MPI_FLOAT, comm_),
              "MPI_Alltoall");
}

void MpiCommunicator::all_to_allv(const float* in, const std::vector<std::size_t>& send_counts,
                                  float* out, const std::vector<std::size_t>& recv_counts) {
    const auto watched = watch_collective("all-to-all");
    std::vector<int> sc(send_counts.size()), sd(send_counts.size()), rc(recv_counts.size()),
        rd(recv_counts.size());
    std::size_t s_at = 0, r_at = 0;
    for (std::size_t r = 0; r < send_counts.size(); ++r) {
        sc[r] = count(send_counts[r]);
        sd[r] = count(s_at);
        s_at += send_counts[r];
        rc[r] = count(recv_counts[r]);
        rd[r] = count(r_at);
        r_at += recv_counts[r];
    }
    check_mpi(MPI_Alltoallv(in, sc.data(), sd.data(), MPI_FLOAT, out, rc.data(), rd.data(),
                            MPI_FLOAT, comm_),
              "MPI_Alltoallv");
}

void MpiCommunicator::broadcast(float* data, std::size_t n, int root) {
    const auto watched = watch_collective("broadcast");
    if (size_ > 1) check_mpi(MPI_Bcast(data, count(n), MPI_FLOAT, root, comm_), "MPI_Bcast");
}

void MpiCommunicator::send(const float* data, std::size_t n, int peer, int tag) {
    auto pending = std::make_unique<PendingSend>();
    pending->peer = peer;
    pending->buffer.assign(data, data + n);
    check_mpi(
        MPI_Isend(pending->buffer.data(), count(n), MPI_FLOAT, peer, tag, comm_, &pending->request),
        "MPI_Isend");
    pending_.push_back(std::move(pending));
}

void MpiCommunicator::recv(float* data, std::size_t n, int peer, int tag) {
    const auto watched = watch_transfer("receive from", peer);
    check_mpi(MPI_Recv(data, count(n), MPI_FLOAT, peer, tag, comm_, MPI_STATUS_IGNORE), "MPI_Recv");
}

void MpiCommunicator::wait_sends() {
    for (auto& p : pending_) {
        const auto watched = watch_transfer("send to", p->peer);
        check_mpi(MPI_Wait(&p->request, MPI_STATUS_IGNORE), "MPI_Wait");
    }
    pending_.clear();
}

void MpiCommunicator::barrier() {
    const auto watched = watch_collective("barrier");
    check_mpi(MPI_Barrier(comm_), "MPI_Barrier");
}

NodePlace node_place() {
    MPI_Comm node = MPI_COMM_NULL;
    check_mpi(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node),
              "MPI_Comm_split_type");
    NodePlace place;
    check_mpi(MPI_Comm_rank(node, &place.rank), "MPI_Comm_rank");
    check_mpi(MPI_Comm_size(node, &place.ranks), "MPI_Comm_size");
    MPI_Comm_free(&node);
    return place;
}

bool on_every_rank(bool ok) {
    int all = ok ? 1 : 0;
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD),
              "MPI_Allreduce");
    return all == 1;
}

} // namespace trident::executor
