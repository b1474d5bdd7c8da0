#include "trident/executor/nccl_communicator.h"

#include "trident/executor/mpi.h"
#include "trident/kernels/cuda/error.h"

#include <numeric>

namespace trident::executor {
namespace {

void check_nccl(ncclResult_t status, const char* call) {
    if (status == ncclSuccess) return;
    throw NcclError(call, ncclGetErrorString(status));
}

#define NCCL_CHECK(call) check_nccl((call), #call)

std::size_t element_bytes(ncclDataType_t type) {
    switch (type) {
    case ncclInt8:
    case ncclUint8:
        return 1;
    case ncclFloat16:
    case ncclBfloat16:
        return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
        return 4;
    default:
        return 8;
    }
}

// Ends an NCCL group on every path out of a scope, so an exception between start and end
// cannot leave the thread inside a group.
class NcclGroup {
public:
    NcclGroup() { NCCL_CHECK(ncclGroupStart()); }
    ~NcclGroup() noexcept(false) {
        const ncclResult_t status = ncclGroupEnd();
        if (std::uncaught_exceptions() == 0) check_nccl(status, "ncclGroupEnd");
    }
    NcclGroup(const NcclGroup&) = delete;
    NcclGroup& operator=(const NcclGroup&) = delete;
};

std::unique_ptr<NcclCommunicator> nccl_for(const MpiCommunicator* group, cudaStream_t stream) {
    if (!group) return nullptr;
    return std::make_unique<NcclCommunicator>(group->handle(), stream);
}

} // namespace

NcclCommunicator::NcclCommunicator(MPI_Comm group, cudaStream_t stream) : stream_(stream) {
    check_mpi(MPI_Comm_rank(group, &rank_), "MPI_Comm_rank");
    check_mpi(MPI_Comm_size(group, &size_), "MPI_Comm_size");
    ncclUniqueId id{};
    if (rank_ == 0) NCCL_CHECK(ncclGetUniqueId(&id));
    check_mpi(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, group), "MPI_Bcast(ncclUniqueId)");
    NCCL_CHECK(ncclCommInitRank(&comm_, size_, id, rank_));
}

NcclCommunicator::~NcclCommunicator() {
    // Staged sends never issued cannot be matched any more; the streams' work is finished
    // before the buffers go.
    cudaStreamSynchronize(stream_);
    if (comm_) ncclCommDestroy(comm_);
}

void NcclCommunicator::all_reduce(void* data, std::size_t n, ncclDataType_t type, ncclRedOp_t op) {
    NCCL_CHECK(ncclAllReduce(data, data, n, type, op, comm_, stream_));
}

void NcclCommunicator::all_reduce_sum(float* data, std::size_t n) {
    all_reduce(data, n, ncclFloat32, ncclSum);
}

void NcclCommunicator::all_reduce_max(float* data, std::size_t n) {
    all_reduce(data, n, ncclFloat32, ncclMax);
}

void NcclCommunicator::all_gather_typed(const void* in, void* out, std::size_t n_per_rank,
                                        ncclDataType_t type) {
    NCCL_CHECK(ncclAllGather(in, out, n_per_rank, type, comm_, stream_));
}

void NcclCommunicator::reduce_scatter_typed(const void* in, void* out, std::size_t n_per_rank,
                                            ncclDataType_t type) {
    NCCL_CHECK(ncclReduceScatter(in, out, n_per_rank, type, ncclSum, comm_, stream_));
}

void NcclCommunicator::all_gather(const float* in, float* out, std::size_t n_per_rank) {
    all_gather_typed(in, out, n_per_rank, ncclFloat32);
}

void NcclCommunicator::reduce_scatter_sum(const float* in, float* out, std::size_t n_per_rank) {
    reduce_scatter_typed(in, out, n_per_rank, ncclFloat32);
}

void NcclCommunicator::all_to_all(const float* in, float* out, std::size_t n_per_rank) {
    NcclGroup group;
    for (int r = 0; r < size_; ++r) {
        NCCL_CHECK(
            ncclSend(in + std::size_t(r) * n_per_rank, n_per_rank, ncclFloat32, r, comm_, stream_));
        NCCL_CHECK(ncclRecv(out + std::size_t(r) * n_per_rank, n_per_rank, ncclFloat32, r, comm_,
                            stream_));
    }
}

void NcclCommunicator::all_to_allv(const float* in, const std::vector<std::size_t>& send_counts,
                                   float* out, const std::vector<std::size_t>& recv_counts) {
    if (int(send_counts.size()) != size_ || int(recv_counts.size()) != size_)
        throw std::invalid_argument("NcclCommunicator::all_to_allv: one count per rank needed");
    NcclGroup group;
    std::size_t send_offset = 0, recv_offset = 0;
    for (int r = 0; r < size_; ++r) {
        if (send_counts[std::size_t(r)] > 0)
            NCCL_CHECK(ncclSend(in + send_offset, send_counts[std::size_t(r)], ncclFloat32, r,
                                comm_, stream_));
        if (recv_counts[std::size_t(r)] > 0)
            NCCL_CHECK(ncclRecv(out + recv_offset, recv_counts[std::size_t(r)], ncclFloat32, r,
                                comm_, stream_));
        send_offset += send_counts[std::size_t(r)];
        recv_offset += recv_counts[std::size_t(r)];
    }
}

void NcclCommunicator::broadcast(float* data, std::size_t n, int root) {
    NCCL_CHECK(ncclBroadcast(data, data, n, ncclFloat32, root, comm_, stream_));
}

void NcclCommunicator::send(const float* data, std::size_t n, int peer, int /*tag*/) {
    send_typed(data, n, ncclFloat32, peer);
}

void NcclCommunicator::send_typed(const void* data, std::size_t n, ncclDataType_t type, int peer) {
    const std::size_t bytes = n * element_bytes(type);
    std::shared_ptr<void> staging;
    if (staging_allocator_) {
        kernels::cuda::CachingAllocator* allocator = staging_allocator_;
        staging = std::shared_ptr<void>(allocator->allocate(bytes, stream_),
                                        [allocator](void* p) { allocator->deallocate(p); });
    } else {
        void* p = nullptr;
        if (bytes > 0) TRIDENT_CUDA_CHECK(cudaMalloc(&p, bytes));
        staging = std::shared_ptr<void>(p, [](void* q) {
            if (q) cudaFree(q);
        });
    }
    if (bytes > 0)
        TRIDENT_CUDA_CHECK(
            cudaMemcpyAsync(staging.get(), data, bytes, cudaMemcpyDeviceToDevice, stream_));
    pending_.push_back({std::move(staging), n, type, peer});
}

void NcclCommunicator::issue_pending_sends() {
    for (auto& s : pending_)
        NCCL_CHECK(ncclSend(s.staging.get(), s.count, s.type, s.peer, comm_, stream_));
    for (auto& s : pending_) in_flight_.push_back(std::move(s));
    pending_.clear();
}

void NcclCommunicator::release_issued_staging() {
    // Allocator blocks may go back once the group has ended (its kernels are enqueued): the
    // allocator hands them out again only to work ordered after them on this stream.
    // cudaMalloc'd ones wait for wait_sends(), after the stream has passed the sends.
    if (staging_allocator_) in_flight_.clear();
}

void NcclCommunicator::recv(float* data, std::size_t n, int peer, int /*tag*/) {
    recv_typed(data, n, ncclFloat32, peer);
}

void NcclCommunicator::recv_typed(void* data, std::size_t n, ncclDataType_t type, int peer) {
    {
        NcclGroup group;
        issue_pending_sends();
        NCCL_CHECK(ncclRecv(data, n, type, peer, comm_, stream_));
    }
    release_issued_staging();
}

void NcclCommunicator::wait_sends() {
    if (!pending_.empty()) {
        NcclGroup group;
        issue_pending_sends();
    }
    synchronize();
    in_flight_.clear();
}

void NcclCommunicator::barrier() {
    all_reduce_sum(barrier_word_.get(), 1);
    synchronize();
}

void NcclCommunicator::synchronize() const {
    TRIDENT_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

NcclProcessGroups::NcclProcessGroups(const ProcessGroups& g, cudaStream_t stream,
                                     cudaStream_t data_stream)
    : world(nccl_for(g.world.get(), stream)), tensor(nccl_for(g.tensor.get(), stream)),
      context(nccl_for(g.context.get(), stream)), pipeline(nccl_for(g.pipeline.get(), stream)),
      data(nccl_for(g.data.get(), data_stream ? data_stream : stream)),
      model(nccl_for(g.model.get(), stream)), embedding(nccl_for(g.embedding.get(), stream)),
      expert(nccl_for(g.expert.get(), stream)),
      expert_data(nccl_for(g.expert_data.get(), data_stream ? data_stream : stream)) {}

} // namespace trident::executor
