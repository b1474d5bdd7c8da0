#pragma once
// A caching device allocator: cudaMalloc and cudaFree synchronise the device and cost tens of
// microseconds, so a training step that allocates activations per layer must not call them.
// Freed blocks stay cached and are handed out again, split when larger than asked for and
// merged with free neighbours when freed.
//
// Streams: a block belongs to the stream it was allocated on. Freed, it goes back to that
// stream's free list and is reused only by allocations on the same stream, whose work is
// ordered after every use of the old block: no event is needed. A block is never handed to
// another stream (the simple rule; a caller that used a block on a second stream must
// synchronise that stream before freeing it). When the device runs out, the allocator
// releases every wholly free cached segment (cudaFree waits for the device) and retries once.
//
// Sizes: requests round up to multiples of 512 bytes. Requests up to 1 MiB come from 2 MiB
// "small" segments; larger ones from segments rounded up to 2 MiB, split only when the rest
// is over 1 MiB; small and large blocks never share a segment (fragmentation stays local).
//
// The raw allocation is pluggable (RawDeviceMemory): cudaMalloc/cudaFree in production, a fake
// in the CPU tests of the bookkeeping. Thread-safe (one mutex).
#include <cstddef>
#include <cstdint>
#include <cuda_runtime_api.h>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <tuple>

namespace trident::kernels::cuda {

class RawDeviceMemory {
public:
    virtual ~RawDeviceMemory() = default;
    // nullptr when the device is out of memory; throws for any other failure.
    virtual void* allocate(std::size_t bytes) = 0;
    virtual void deallocate(void* p) noexcept = 0;
};

// cudaMalloc / cudaFree on the current device.
std::unique_ptr<RawDeviceMemory> cuda_device_memory();

struct AllocatorStats {
    std::size_t in_use_bytes = 0; // blocks handed out (rounded sizes, split remainders excluded)
    std::size_t peak_in_use_bytes = 0;
    std::size_t reserved_bytes = 0; // segments held from the raw allocator
    std::size_t peak_reserved_bytes = 0;
    std::size_t raw_allocations = 0; // segments ever obtained from the raw allocator
    std::size_t cache_hits = 0;      // allocations served without a raw allocation
};

class CachingAllocator {
public:
    static constexpr std::size_t kRoundBytes = 512;
    static constexpr std::size_t kSmallRequestBytes = 1u << 20;
    static constexpr std::size_t kSegmentRoundBytes = 2u << 20;

    explicit CachingAllocator(std::unique_ptr<RawDeviceMemory> raw = cuda_device_memory());
    // Returns every segment to the raw allocator, including blocks still handed out: the
    // allocator must outlive the memory it lent.
    ~CachingAllocator();
    CachingAllocator(const CachingAllocator&) = delete;
    CachingAllocator& operator=(const CachingAllocator&) = delete;

    // At least `bytes` of device memory, 256-byte aligned, for use on `stream`; nullptr for 0
    // bytes. Throws CudaError naming the request when the device has no room even after the
    // cache is released.
    void* allocate(std::size_t bytes, cudaStream_t stream);
    // Back to the cache of the stream it was allocated on. Throws std::invalid_argument for a
    // pointer this allocator did not hand out (or already took back); nullptr is ignored.
    void deallocate(void* p);
    // Returns wholly free segments to the raw allocator; the bytes released.
    std::size_t release_cached();

    AllocatorStats stats() const;
    void reset_peaks(); // peaks restart from the current values

    // The size a request of `bytes` is rounded to (a multiple of kRoundBytes).
    static std::size_t round_size(std::size_t bytes);

private:
    struct Block {
        std::byte* ptr = nullptr;
        std::size_t size = 0;
        cudaStream_t stream = nullptr;
        bool small = false;
        bool free = false;
        Block* prev = nullptr; // neighbours inside the same segment
        Block* next = nullptr;
    };
    // Free blocks ordered for best fit: same stream and pool, then the smallest that fits.
    using FreeKey = std::tuple<std::uintptr_t, bool, std::size_t, std::uintptr_t>;
    static FreeKey key_of(const Block& b);

    Block* take_free_block(std::size_t size, cudaStream_t stream, bool small);
    Block* new_segment(std::size_t size, cudaStream_t stream, bool small);
    void split(Block* b, std::size_t size);
    void merge_into(Block* keep, Block* gone);
    std::size_t release_cached_locked();

    std::unique_ptr<RawDeviceMemory> raw_;
    mutable std::mutex mutex_;
    std::map<const void*, std::unique_ptr<Block>> blocks_; // every block, by address
    std::set<FreeKey> free_;
    AllocatorStats stats_;
};

} // namespace trident::kernels::cuda
