#pragma once
// NCCL for the CUDA backend (library trident::executor_cuda, built with TRIDENT_CUDA): the
// executor's Communicator over device buffers, one ncclComm_t per process group.
//
// Every operation is enqueued on the communicator's CUDA stream and returns at once; its result
// is ready for work ordered after it on that stream (call synchronize() before the host reads
// it). Buffers are device pointers: fp32 elements through the Communicator interface, any NCCL
// type through the *_typed forms.
//
// Point to point: NCCL has no tags, and a lone ncclSend to a peer whose matching ncclRecv sits
// behind it on the same stream (a rank sending to itself, or two ranks that both send first)
// would deadlock. So send() copies the data into a staging buffer (the interface's "the data is
// copied" promise) and defers the ncclSend; the next recv() or wait_sends() issues the deferred
// sends and the receive in one ncclGroupStart/End. Peers must post their sends and receives in
// matching order, as Megatron's p2p schedule does; `tag` is ignored.
//
// The unique id is created on the group's rank 0 and broadcast over the group's MPI
// communicator (MPI_Bcast of the ncclUniqueId bytes), so every MPI group gets its own clique.
#include "trident/executor/communicator.h"
#include "trident/executor/process_groups.h"
#include "trident/kernels/cuda/caching_allocator.h"
#include "trident/kernels/cuda/device_buffer.h"

#include <cuda_runtime_api.h>
#include <memory>
#include <mpi.h>
#include <nccl.h>
#include <stdexcept>
#include <string>
#include <vector>

namespace trident::executor {

class NcclError : public std::runtime_error {
public:
    NcclError(const std::string& call, const std::string& reason)
        : std::runtime_error(call + ": " + reason), call_(call), reason_(reason) {}
    const std::string& call() const { return call_; }
    const std::string& reason() const { return reason_; }

private:
    std::string call_, reason_;
};

class NcclCommunicator final : public Communicator {
public:
    // Collective over `group` (every member calls it, each with its own device current): builds
    // the NCCL communicator of that group's members. `stream` is borrowed, not owned.
    NcclCommunicator(MPI_Comm group, cudaStream_t stream);
    ~NcclCommunicator() override; // ncclCommDestroy; never throws
    NcclCommunicator(const NcclCommunicator&) = delete;
    NcclCommunicator& operator=(const NcclCommunicator&) = delete;

    int rank() const override { return rank_; }
    int size() const override { return size_; }
    void all_reduce_sum(float* data, std::size_t n) override;
    void all_reduce_max(float* data, std::size_t n) override;
    void all_gather(const float* in, float* out, std::size_t n_per_rank) override;
    void reduce_scatter_sum(const float* in, float* out, std::size_t n_per_rank) override;
    void all_to_all(const float* in, float* out, std::size_t n_per_rank) override;
    void all_to_allv(const float* in, const std::vector<std::size_t>& send_counts, float* out,
                     const std::vector<std::size_t>& recv_counts) override;
    void broadcast(float* data, std::size_t n, int root) override;
    void send(const float* data, std::size_t n, int peer, int tag) override;
    void recv(float* data, std::size_t n, int peer, int tag) override;
    void wait_sends() override; // issues deferred sends, waits for them, frees their staging
    void barrier() override;    // a one-element all-reduce, then a stream synchronize

    // Typed forms (the fp32 overrides above call them): bf16 activations and their gradients
    // travel as bf16, as in Megatron.
    void all_reduce(void* data, std::size_t n, ncclDataType_t type, ncclRedOp_t op);
    void all_gather_typed(const void* in, void* out, std::size_t n_per_rank, ncclDataType_t type);
    void reduce_scatter_typed(const void* in, void* out, std::size_t n_per_rank,
                              ncclDataType_t type);
    void send_typed(const void* data, std::size_t n, ncclDataType_t type, int peer);
    void recv_typed(void* data, std::size_t n, ncclDataType_t type, int peer);

    // Staging for sends from `allocator` (on this communicator's stream) instead of cudaMalloc:
    // a staging block goes back as soon as its ncclSend is enqueued, since the allocator hands
    // it out again only to work ordered after the send on the same stream. (Should the
    // allocator run out and release its cache, cudaFree waits for the device, so for a send
    // in flight and the peer's matching receive: a stall, never a reuse.) Borrowed.
    void use_staging_allocator(kernels::cuda::CachingAllocator* allocator) {
        staging_allocator_ = allocator;
    }

    void synchronize() const;
    cudaStream_t stream() const { return stream_; }
    ncclComm_t handle() const { return comm_; }

private:
    struct PendingSend {
        std::shared_ptr<void> staging; // freed by its deleter (cudaFree or the allocator)
        std::size_t count;
        ncclDataType_t type;
        int peer;
    };
    void issue_pending_sends();    // inside an open NCCL group
    void release_issued_staging(); // after the group has ended

    ncclComm_t comm_ = nullptr;
    cudaStream_t stream_;
    int rank_ = 0, size_ = 1;
    std::vector<PendingSend> pending_;
    std::vector<PendingSend> in_flight_; // issued sends whose staging the stream may still read
    kernels::cuda::CachingAllocator* staging_allocator_ = nullptr;
    kernels::cuda::DeviceBuffer<float> barrier_word_{1};
};

// One NCCL communicator per process group of `groups` (null where the MPI group is null, as
// embedding is on middle stages), all on `stream`. Collective over the world: every rank calls
// it, in the same order.
struct NcclProcessGroups {
    // The data-parallel and expert-data groups run on `data_stream` (gradient reduction that
    // overlaps the backward pass) when it is given, on `stream` otherwise.
    NcclProcessGroups(const ProcessGroups& groups, cudaStream_t stream,
                      cudaStream_t data_stream = nullptr);

    std::unique_ptr<NcclCommunicator> world;
    std::unique_ptr<NcclCommunicator> tensor;
    std::unique_ptr<NcclCommunicator> context;
    std::unique_ptr<NcclCommunicator> pipeline;
    std::unique_ptr<NcclCommunicator> data;
    std::unique_ptr<NcclCommunicator> model;
    std::unique_ptr<NcclCommunicator> embedding;
    std::unique_ptr<NcclCommunicator> expert;
    std::unique_ptr<NcclCommunicator> expert_data;
};

} // namespace trident::executor
