#pragma once
// Communicator: the collective and point-to-point operations the executor needs over one
// process group. The MPI implementation backs the CPU backend; an NCCL one (CUDA backend)
// will implement the same interface. Buffers are fp32 element counts.
#include <cstddef>
#include <memory>
#include <vector>

namespace trident::executor {

// A collective begun and not yet completed: wait() completes it (a second call does nothing).
// Its buffers must stay put until then; the destructor waits too, so MPI never writes into
// memory that has gone.
class PendingCollective {
public:
    virtual ~PendingCollective() = default;
    virtual void wait() = 0;
};

class Communicator {
public:
    virtual ~Communicator() = default;
    virtual int rank() const = 0;
    virtual int size() const = 0;

    virtual void all_reduce_sum(float* data, std::size_t n) = 0;
    virtual void all_reduce_max(float* data, std::size_t n) = 0;
    // out holds size()·n elements, rank r's block at r·n; `in` may be this rank's own block
    // of `out` (in place).
    virtual void all_gather(const float* in, float* out, std::size_t n_per_rank) = 0;
    // all_gather begun now and completed by the handle's wait(), so that work in between can
    // overlap it (ZeRO-3's prefetch). Members must begin it in the same order relative to their
    // other collectives on this group. By default it is the blocking all_gather, done at once.
    virtual std::unique_ptr<PendingCollective> start_all_gather(const float* in, float* out,
                                                                std::size_t n_per_rank);
    // in holds size()·n elements; out receives the sum of every rank's block rank()·n.
    virtual void reduce_scatter_sum(const float* in, float* out, std::size_t n_per_rank) = 0;
    // Block r of `in` goes to rank r; block r of `out` comes from rank r.
    virtual void all_to_all(const float* in, float* out, std::size_t n_per_rank) = 0;
    // The same with blocks of different sizes (elements), laid out in rank order.
    virtual void all_to_allv(const float* in, const std::vector<std::size_t>& send_counts,
                             float* out, const std::vector<std::size_t>& recv_counts) = 0;
    virtual void broadcast(float* data, std::size_t n, int root) = 0;
    // A send never blocks: the data is copied and posted; wait_sends() completes them all.
    virtual void send(const float* data, std::size_t n, int peer, int tag) = 0;
    virtual void recv(float* data, std::size_t n, int peer, int tag) = 0;
    virtual void wait_sends() = 0;
    virtual void barrier() = 0;
};

} // namespace trident::executor
