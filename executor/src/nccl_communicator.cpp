#include "trident/executor/nccl_communicator.h"

#include "trident/kernels/cuda/error.h"

#include <numeric>

namespace trident::executor {
namespace {

void check_nccl(ncclResult_t status, const char* call) {
    if (status == ncclSuccess) return;
    throw NcclError(call, ncclGetErrorString(status));
}

void check_mpi(int code, const char* call) {
    if (code == MPI_SUCCESS) return;
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    MPI_Error_string(code, text, &length);
    throw NcclError(call, std::string(text, std::size_t(length)));
}

#define NCCL_CHECK(call) check_nccl((call), #call)

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

void NcclCommunicator::all_reduce_sum(float* data, std::size_t n) {
    NCCL_CHECK(ncclAllReduce(data, data, n, ncclFloat32, ncclSum, comm_, stream_));
}

void NcclCommunicator::all_reduce_max(float* data, std::size_t n) {
    NCCL_CHECK(ncclAllReduce(data, data, n, ncclFloat32, ncclMax, comm_, stream_));
}

void NcclCommunicator::all_gather(const float* in, float* out, std::size_t n_per_rank) {
    NCCL_CHECK(ncclAllGather(in, out, n_per_rank, ncclFloat32, comm_, stream_));
}

void NcclCommunicator::reduce_scatter_sum(const float* in, float* out, std::size_t n_per_rank) {
    NCCL_CHECK(ncclReduceScatter(in, out, n_per_rank, ncclFloat32, ncclSum, comm_, stream_));
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
    PendingSend s{kernels::cuda::DeviceBuffer<float>(n), peer};
    TRIDENT_CUDA_CHECK(cudaMemcpyAsync(s.staging.get(), data, n * sizeof(float),
                                       cudaMemcpyDeviceToDevice, stream_));
    pending_.push_back(std::move(s));
}

void NcclCommunicator::issue_pending_sends() {
    for (auto& s : pending_)
        NCCL_CHECK(
            ncclSend(s.staging.get(), s.staging.size(), ncclFloat32, s.peer, comm_, stream_));
    for (auto& s : pending_) in_flight_.push_back(std::move(s));
    pending_.clear();
}

void NcclCommunicator::recv(float* data, std::size_t n, int peer, int /*tag*/) {
    NcclGroup group;
    issue_pending_sends();
    NCCL_CHECK(ncclRecv(data, n, ncclFloat32, peer, comm_, stream_));
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

NcclProcessGroups::NcclProcessGroups(const ProcessGroups& g, cudaStream_t stream)
    : world(nccl_for(g.world.get(), stream)), tensor(nccl_for(g.tensor.get(), stream)),
      context(nccl_for(g.context.get(), stream)), pipeline(nccl_for(g.pipeline.get(), stream)),
      data(nccl_for(g.data.get(), stream)), model(nccl_for(g.model.get(), stream)),
      embedding(nccl_for(g.embedding.get(), stream)), expert(nccl_for(g.expert.get(), stream)),
      expert_data(nccl_for(g.expert_data.get(), stream)) {}

} // namespace trident::executor
