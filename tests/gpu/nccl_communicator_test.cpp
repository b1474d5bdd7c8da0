// NcclCommunicator on the visible GPUs, one MPI rank per GPU: alone (a group of one) or under
// `mpirun -np N` with N ≤ cudaGetDeviceCount (tests/gpu/device-check.sh runs both). Every
// operation is checked against the sums and layouts the Communicator interface promises.
// Skips without a GPU, or with more ranks than GPUs (NCCL needs a device per rank).
#include "trident/executor/mpi.h"
#include "trident/executor/nccl_communicator.h"
#include "trident/kernels/cuda/device_buffer.h"
#include "trident/kernels/cuda/stream.h"

#include <gtest/gtest.h>
#include <numeric>

namespace trident::executor {
namespace {

namespace kc = kernels::cuda;

int world_rank() {
    int r = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}
int world_size() {
    int s = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &s);
    return s;
}

class NcclTest : public ::testing::Test {
protected:
    void SetUp() override {
        const int devices = kc::visible_device_count();
        if (devices == 0) GTEST_SKIP() << "no CUDA device visible: NCCL test skipped";
        if (world_size() > devices)
            GTEST_SKIP() << world_size() << " ranks but " << devices << " GPUs: NCCL test skipped";
        TRIDENT_CUDA_CHECK(cudaSetDevice(world_rank() % devices));
        stream_ = std::make_unique<kc::Stream>();
        MPI_Comm comm = MPI_COMM_NULL;
        MPI_Comm_dup(MPI_COMM_WORLD, &comm);
        mpi_ = std::make_unique<MpiCommunicator>(comm);
        nccl_ = std::make_unique<NcclCommunicator>(comm, stream_->get());
        rank_ = nccl_->rank();
        size_ = nccl_->size();
    }
    void TearDown() override {
        nccl_.reset(); // before the stream it borrows
        stream_.reset();
        mpi_.reset();
    }
    std::vector<float> read(const kc::DeviceBuffer<float>& b) {
        nccl_->synchronize();
        return b.to_host();
    }

    std::unique_ptr<kc::Stream> stream_;
    std::unique_ptr<MpiCommunicator> mpi_;
    std::unique_ptr<NcclCommunicator> nccl_;
    int rank_ = 0, size_ = 1;
};

TEST_F(NcclTest, GroupMatchesMpi) {
    EXPECT_EQ(rank_, world_rank());
    EXPECT_EQ(size_, world_size());
}

TEST_F(NcclTest, AllReduceSumAndMax) {
    const std::size_t n = 1000;
    std::vector<float> mine(n);
    for (std::size_t i = 0; i < n; ++i) mine[i] = float(rank_ + 1) * float(i % 7);
    kc::DeviceBuffer<float> sum(mine), max(mine);
    nccl_->all_reduce_sum(sum.get(), n);
    nccl_->all_reduce_max(max.get(), n);
    const auto s = read(sum), m = read(max);
    const float ranks_sum = float(size_ * (size_ + 1) / 2);
    for (std::size_t i = 0; i < n; ++i) {
        ASSERT_EQ(s[i], ranks_sum * float(i % 7)) << i;
        ASSERT_EQ(m[i], float(size_) * float(i % 7)) << i;
    }
}

TEST_F(NcclTest, AllGatherAndReduceScatter) {
    const std::size_t n = 256;
    kc::DeviceBuffer<float> in(std::vector<float>(n, float(rank_ + 1)));
    kc::DeviceBuffer<float> gathered(n * std::size_t(size_));
    nccl_->all_gather(in.get(), gathered.get(), n);
    const auto g = read(gathered);
    for (int r = 0; r < size_; ++r) ASSERT_EQ(g[std::size_t(r) * n], float(r + 1));

    std::vector<float> blocks(n * std::size_t(size_));
    for (std::size_t i = 0; i < blocks.size(); ++i) blocks[i] = float(i / n); // block index
    kc::DeviceBuffer<float> full(blocks), mine(n);
    nccl_->reduce_scatter_sum(full.get(), mine.get(), n);
    const auto rs = read(mine);
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(rs[i], float(rank_ * size_)) << i;
}

TEST_F(NcclTest, AllToAllAndAllToAllv) {
    const std::size_t n = 64;
    std::vector<float> send(n * std::size_t(size_));
    for (std::size_t i = 0; i < send.size(); ++i) send[i] = float(rank_ * 1000) + float(i / n);
    kc::DeviceBuffer<float> in(send), out(send.size());
    nccl_->all_to_all(in.get(), out.get(), n);
    const auto got = read(out);
    for (int r = 0; r < size_; ++r)
        ASSERT_EQ(got[std::size_t(r) * n], float(r * 1000 + rank_)) << r; // block r from rank r

    // Rank r sends r+1+p elements to peer p; receives p+1+r from p.
    std::vector<std::size_t> sc(static_cast<std::size_t>(size_)), rc(sc.size());
    for (int p = 0; p < size_; ++p) {
        sc[std::size_t(p)] = std::size_t(rank_ + 1 + p);
        rc[std::size_t(p)] = std::size_t(p + 1 + rank_);
    }
    const std::size_t ns = std::accumulate(sc.begin(), sc.end(), std::size_t(0)),
                      nr = std::accumulate(rc.begin(), rc.end(), std::size_t(0));
    kc::DeviceBuffer<float> vin(std::vector<float>(ns, float(rank_))), vout(nr);
    nccl_->all_to_allv(vin.get(), sc, vout.get(), rc);
    const auto v = read(vout);
    std::size_t at = 0;
    for (int p = 0; p < size_; ++p)
        for (std::size_t i = 0; i < rc[std::size_t(p)]; ++i) ASSERT_EQ(v[at++], float(p));
}

TEST_F(NcclTest, BroadcastFromLastRank) {
    kc::DeviceBuffer<float> b(std::vector<float>(100, float(rank_)));
    nccl_->broadcast(b.get(), 100, size_ - 1);
    EXPECT_EQ(read(b)[99], float(size_ - 1));
}

// Each rank sends to the next (itself in a group of one) before receiving from the previous:
// the deferred sends make this order safe on one stream.
TEST_F(NcclTest, SendThenRecvAroundTheRing) {
    const std::size_t n = 500;
    kc::DeviceBuffer<float> out(std::vector<float>(n, float(rank_ + 10))), in(n);
    nccl_->send(out.get(), n, (rank_ + 1) % size_, 0);
    // The send copied its data: overwriting the source afterwards (in stream order) is safe.
    TRIDENT_CUDA_CHECK(cudaMemsetAsync(out.get(), 0, out.size_bytes(), stream_->get()));
    nccl_->recv(in.get(), n, (rank_ + size_ - 1) % size_, 0);
    nccl_->wait_sends();
    EXPECT_EQ(in.to_host()[n - 1], float((rank_ + size_ - 1) % size_ + 10));
    nccl_->barrier();
}

TEST_F(NcclTest, ProcessGroupsGetOneCommunicatorEach) {
    core::ParallelPlan plan;
    plan.dp = size_;
    ProcessGroups groups(plan, world_rank());
    NcclProcessGroups nccl(groups, stream_->get());
    ASSERT_TRUE(nccl.world && nccl.data && nccl.tensor && nccl.pipeline);
    EXPECT_EQ(nccl.data->size(), size_);
    EXPECT_EQ(nccl.tensor->size(), 1);
    kc::DeviceBuffer<float> x(std::vector<float>(8, 1.0f));
    nccl.data->all_reduce_sum(x.get(), 8);
    nccl.data->synchronize();
    EXPECT_EQ(x.to_host()[7], float(size_));
}

} // namespace
} // namespace trident::executor

int main(int argc, char** argv) {
    testing::InitGoogleTest(&argc, argv);
    trident::executor::MpiSession mpi(&argc, &argv);
    // Only rank 0 reports, so a run under mpirun prints one result.
    if (mpi.world_rank() != 0) {
        auto& listeners = testing::UnitTest::GetInstance()->listeners();
        delete listeners.Release(listeners.default_result_printer());
    }
    return RUN_ALL_TESTS();
}
