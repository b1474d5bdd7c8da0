// CachingAllocator bookkeeping on the CPU: a fake raw allocator hands out addresses that are
// never touched, so reuse, rounding, splitting, merging, peaks, stream separation and release
// are checked without a GPU. The last test uses cudaMalloc and skips without a device.
#include "gpu_test_support.h"
#include "trident/kernels/cuda/caching_allocator.h"
#include "trident/kernels/cuda/error.h"

#include <cstdint>
#include <map>

namespace trident::kernels::cuda {
namespace {

// Addresses 1 GiB apart (never dereferenced); counts calls and can run out at a byte limit.
class FakeDeviceMemory final : public RawDeviceMemory {
public:
    struct Counters {
        std::size_t allocations = 0, frees = 0, live_bytes = 0;
        std::size_t limit_bytes = SIZE_MAX;
    };
    explicit FakeDeviceMemory(Counters* c) : c_(c) {}
    void* allocate(std::size_t bytes) override {
        if (c_->live_bytes + bytes > c_->limit_bytes) return nullptr;
        ++c_->allocations;
        c_->live_bytes += bytes;
        next_ += std::uintptr_t(1) << 30;
        live_[next_] = bytes;
        return reinterpret_cast<void*>(next_);
    }
    void deallocate(void* p) noexcept override {
        ++c_->frees;
        c_->live_bytes -= live_.at(reinterpret_cast<std::uintptr_t>(p));
        live_.erase(reinterpret_cast<std::uintptr_t>(p));
    }

private:
    Counters* c_;
    std::uintptr_t next_ = 0;
    std::map<std::uintptr_t, std::size_t> live_;
};

cudaStream_t stream(int i) {
    return reinterpret_cast<cudaStream_t>(std::uintptr_t(0x1000 * i));
}

constexpr std::size_t MiB = 1u << 20;

struct AllocatorTest : ::testing::Test {
    FakeDeviceMemory::Counters raw;
    CachingAllocator alloc{std::make_unique<FakeDeviceMemory>(&raw)};
};

TEST_F(AllocatorTest, RoundsRequestsUpTo512Bytes) {
    EXPECT_EQ(CachingAllocator::round_size(1), 512u);
    EXPECT_EQ(CachingAllocator::round_size(512), 512u);
    EXPECT_EQ(CachingAllocator::round_size(513), 1024u);
    EXPECT_EQ(alloc.allocate(0, stream(1)), nullptr);
    alloc.allocate(100, stream(1));
    EXPECT_EQ(alloc.stats().in_use_bytes, 512u);
    EXPECT_EQ(alloc.stats().reserved_bytes, 2 * MiB); // one small segment
}

TEST_F(AllocatorTest, SmallRequestsSplitOneSegment) {
    auto* a = static_cast<std::byte*>(alloc.allocate(1000, stream(1)));
    auto* b = static_cast<std::byte*>(alloc.allocate(4096, stream(1)));
    EXPECT_EQ(raw.allocations, 1u);
    EXPECT_EQ(b - a, 1024); // b is carved right after a's rounded size
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a) % 256, 0u);
    EXPECT_EQ(alloc.stats().in_use_bytes, 1024u + 4096u);
    EXPECT_EQ(alloc.stats().cache_hits, 1u);
}

TEST_F(AllocatorTest, FreedBlockIsReusedOnTheSameStream) {
    void* a = alloc.allocate(8 * MiB, stream(1));
    alloc.deallocate(a);
    EXPECT_EQ(alloc.stats().in_use_bytes, 0u);
    EXPECT_EQ(alloc.stats().reserved_bytes, 8 * MiB); // cached, not returned
    EXPECT_EQ(alloc.allocate(8 * MiB, stream(1)), a);
    EXPECT_EQ(raw.allocations, 1u);
    EXPECT_EQ(raw.frees, 0u);
}

TEST_F(AllocatorTest, AnotherStreamNeverGetsAFreedBlock) {
    void* a = alloc.allocate(8 * MiB, stream(1));
    alloc.deallocate(a);
    void* b = alloc.allocate(8 * MiB, stream(2));
    EXPECT_NE(a, b);
    EXPECT_EQ(raw.allocations, 2u);
    void* small1 = alloc.allocate(512, stream(1));
    void* small2 = alloc.allocate(512, stream(2));
    EXPECT_EQ(raw.allocations, 4u); // a small segment per stream
    alloc.deallocate(small1);
    EXPECT_NE(alloc.allocate(512, stream(2)), small1);
    alloc.deallocate(small2);
}

TEST_F(AllocatorTest, LargeSegmentsRoundTo2MiBAndSplitOnlyBigRests) {
    void* a = alloc.allocate(3 * MiB, stream(1)); // segment 4 MiB, rest 1 MiB stays with it
    EXPECT_EQ(alloc.stats().reserved_bytes, 4 * MiB);
    EXPECT_EQ(alloc.stats().in_use_bytes, 4 * MiB);
    alloc.deallocate(a);
    void* b = alloc.allocate(10 * MiB, stream(1)); // does not fit the cached 4 MiB
    alloc.deallocate(b);
    void* c = alloc.allocate(2 * MiB, stream(1)); // best fit: the 4 MiB block, rest not split
    EXPECT_EQ(c, a);
    void* d = alloc.allocate(4 * MiB, stream(1)); // 10 MiB block split: 4 + 6
    EXPECT_EQ(d, b);
    void* e = alloc.allocate(6 * MiB, stream(1));
    EXPECT_EQ(static_cast<std::byte*>(e) - static_cast<std::byte*>(d), std::ptrdiff_t(4 * MiB));
    EXPECT_EQ(raw.allocations, 2u);
}

TEST_F(AllocatorTest, FreedNeighboursMergeBackIntoTheSegment) {
    void* a = alloc.allocate(4 * MiB, stream(1));
    alloc.deallocate(a);
    void* p = alloc.allocate(2 * MiB, stream(1)); // split: the 2 MiB rest is over 1 MiB
    void* q = alloc.allocate(2 * MiB, stream(1)); // the rest
    EXPECT_EQ(static_cast<std::byte*>(q) - static_cast<std::byte*>(p), std::ptrdiff_t(2 * MiB));
    alloc.deallocate(q);
    alloc.deallocate(p);
    EXPECT_EQ(alloc.allocate(4 * MiB, stream(1)), a); // whole again
    void* big = alloc.allocate(20 * MiB, stream(1));
    alloc.deallocate(big);
    // Split 20 MiB into three, free them out of order, then ask for all of it again.
    void* x = alloc.allocate(6 * MiB, stream(1));
    void* y = alloc.allocate(6 * MiB, stream(1));
    void* z = alloc.allocate(8 * MiB, stream(1));
    EXPECT_EQ(x, big);
    alloc.deallocate(x);
    alloc.deallocate(z);
    alloc.deallocate(y);
    EXPECT_EQ(alloc.allocate(20 * MiB, stream(1)), big);
    EXPECT_EQ(raw.allocations, 2u);
}

TEST_F(AllocatorTest, PeaksTrackInUseAndReserved) {
    void* a = alloc.allocate(8 * MiB, stream(1));
    void* b = alloc.allocate(8 * MiB, stream(1));
    alloc.deallocate(a);
    void* c = alloc.allocate(2 * MiB, stream(1)); // from the cached 8 MiB (split 2 + 6)
    auto s = alloc.stats();
    EXPECT_EQ(s.in_use_bytes, 10 * MiB);
    EXPECT_EQ(s.peak_in_use_bytes, 16 * MiB);
    EXPECT_EQ(s.reserved_bytes, 16 * MiB);
    EXPECT_EQ(s.peak_reserved_bytes, 16 * MiB);
    alloc.reset_peaks();
    EXPECT_EQ(alloc.stats().peak_in_use_bytes, 10 * MiB);
    alloc.deallocate(b);
    alloc.deallocate(c);
    EXPECT_EQ(alloc.release_cached(), 16 * MiB);
    s = alloc.stats();
    EXPECT_EQ(s.reserved_bytes, 0u);
    EXPECT_EQ(s.peak_reserved_bytes, 16 * MiB);
    EXPECT_EQ(raw.live_bytes, 0u);
}

TEST_F(AllocatorTest, ReleaseKeepsSegmentsWithBlocksInUse) {
    void* a = alloc.allocate(512, stream(1));
    void* b = alloc.allocate(512, stream(1));
    void* big = alloc.allocate(4 * MiB, stream(1));
    alloc.deallocate(a);
    alloc.deallocate(big);
    EXPECT_EQ(alloc.release_cached(), 4 * MiB); // the small segment still holds b
    EXPECT_EQ(alloc.stats().reserved_bytes, 2 * MiB);
    alloc.deallocate(b);
    EXPECT_EQ(alloc.release_cached(), 2 * MiB);
    EXPECT_EQ(raw.frees, 2u);
}

TEST_F(AllocatorTest, OutOfMemoryReleasesTheCacheAndRetries) {
    raw.limit_bytes = 16 * MiB;
    void* a = alloc.allocate(12 * MiB, stream(1));
    alloc.deallocate(a);
    void* b = alloc.allocate(12 * MiB, stream(2)); // other stream: the cache is released first
    EXPECT_NE(b, nullptr);
    EXPECT_EQ(raw.frees, 1u);
    try {
        alloc.allocate(8 * MiB, stream(2));
        FAIL() << "expected CudaError";
    } catch (const CudaError& e) {
        EXPECT_EQ(e.call(), "CachingAllocator::allocate");
        EXPECT_NE(e.reason().find("out of device memory"), std::string::npos);
    }
}

TEST_F(AllocatorTest, RejectsForeignAndDoubleFrees) {
    void* a = alloc.allocate(512, stream(1));
    alloc.deallocate(a);
    EXPECT_THROW(alloc.deallocate(a), std::invalid_argument);
    int local = 0;
    EXPECT_THROW(alloc.deallocate(&local), std::invalid_argument);
    alloc.deallocate(nullptr);
}

TEST_F(AllocatorTest, DestructorReturnsEverySegment) {
    FakeDeviceMemory::Counters c;
    auto scoped = std::make_unique<CachingAllocator>(std::make_unique<FakeDeviceMemory>(&c));
    scoped->allocate(512, stream(1));
    scoped->deallocate(scoped->allocate(8 * MiB, stream(2)));
    scoped->allocate(3 * MiB, stream(3));
    EXPECT_EQ(c.allocations, 3u);
    scoped.reset();
    EXPECT_EQ(c.frees, 3u);
    EXPECT_EQ(c.live_bytes, 0u);
}

using CachingAllocatorGpuTest = testing::GpuTest;

TEST_F(CachingAllocatorGpuTest, ServesWritableDeviceMemory) {
    CachingAllocator alloc;
    Stream s;
    auto* p = static_cast<float*>(alloc.allocate(1000 * sizeof(float), s.get()));
    TRIDENT_CUDA_CHECK(cudaMemsetAsync(p, 0, 1000 * sizeof(float), s.get()));
    std::vector<float> host(1000, 1.0f);
    TRIDENT_CUDA_CHECK(
        cudaMemcpyAsync(host.data(), p, 1000 * sizeof(float), cudaMemcpyDeviceToHost, s.get()));
    s.synchronize();
    EXPECT_EQ(host[999], 0.0f);
    alloc.deallocate(p);
    EXPECT_EQ(alloc.allocate(1000 * sizeof(float), s.get()), p);
    alloc.deallocate(p);
    s.synchronize();
    EXPECT_EQ(alloc.release_cached(), CachingAllocator::kSegmentRoundBytes);
    EXPECT_EQ(alloc.stats().reserved_bytes, 0u);
}

} // namespace
} // namespace trident::kernels::cuda
