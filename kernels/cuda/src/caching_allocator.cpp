#include "trident/kernels/cuda/caching_allocator.h"

#include "trident/kernels/cuda/error.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace trident::kernels::cuda {
namespace {

class CudaDeviceMemory final : public RawDeviceMemory {
public:
    void* allocate(std::size_t bytes) override {
        void* p = nullptr;
        const cudaError_t status = cudaMalloc(&p, bytes);
        if (status == cudaErrorMemoryAllocation) {
            cudaGetLastError(); // clear the sticky-until-read error so later checks pass
            return nullptr;
        }
        check_cuda(status, "cudaMalloc");
        return p;
    }
    void deallocate(void* p) noexcept override { cudaFree(p); }
};

std::size_t round_up(std::size_t bytes, std::size_t unit) {
    return (bytes + unit - 1) / unit * unit;
}

} // namespace

std::unique_ptr<RawDeviceMemory> cuda_device_memory() {
    return std::make_unique<CudaDeviceMemory>();
}

CachingAllocator::CachingAllocator(std::unique_ptr<RawDeviceMemory> raw) : raw_(std::move(raw)) {
    if (!raw_) throw std::invalid_argument("CachingAllocator: no raw device memory given");
}

CachingAllocator::~CachingAllocator() {
    for (const auto& [ptr, block] : blocks_)
        if (!block->prev) raw_->deallocate(block->ptr); // a segment's first block owns it
}

std::size_t CachingAllocator::round_size(std::size_t bytes) {
    return round_up(std::max<std::size_t>(bytes, 1), kRoundBytes);
}

CachingAllocator::FreeKey CachingAllocator::key_of(const Block& b) {
    return {reinterpret_cast<std::uintptr_t>(b.stream), b.small, b.size,
            reinterpret_cast<std::uintptr_t>(b.ptr)};
}

void* CachingAllocator::allocate(std::size_t bytes, cudaStream_t stream) {
    if (bytes == 0) return nullptr;
    const std::size_t size = round_size(bytes);
    const bool small = size <= kSmallRequestBytes;
    std::lock_guard lock(mutex_);
    Block* b = take_free_block(size, stream, small);
    if (b) {
        ++stats_.cache_hits;
    } else {
        b = new_segment(size, stream, small);
        if (!b) {
            release_cached_locked();
            b = new_segment(size, stream, small);
        }
        if (!b)
            throw CudaError("CachingAllocator::allocate",
                            "out of device memory: " + std::to_string(bytes) + " bytes asked, " +
                                std::to_string(stats_.in_use_bytes) + " in use, " +
                                std::to_string(stats_.reserved_bytes) + " reserved");
    }
    split(b, size);
    b->free = false;
    stats_.in_use_bytes += b->size;
    stats_.peak_in_use_bytes = std::max(stats_.peak_in_use_bytes, stats_.in_use_bytes);
    return b->ptr;
}

CachingAllocator::Block* CachingAllocator::take_free_block(std::size_t size, cudaStream_t stream,
                                                           bool small) {
    const auto s = reinterpret_cast<std::uintptr_t>(stream);
    const auto it = free_.lower_bound({s, small, size, 0});
    if (it == free_.end() || std::get<0>(*it) != s || std::get<1>(*it) != small) return nullptr;
    Block* b = blocks_.at(reinterpret_cast<const void*>(std::get<3>(*it))).get();
    free_.erase(it);
    return b;
}

CachingAllocator::Block* CachingAllocator::new_segment(std::size_t size, cudaStream_t stream,
                                                       bool small) {
    const std::size_t segment = small ? kSegmentRoundBytes : round_up(size, kSegmentRoundBytes);
    void* p = raw_->allocate(segment);
    if (!p) return nullptr;
    auto block = std::make_unique<Block>();
    block->ptr = static_cast<std::byte*>(p);
    block->size = segment;
    block->stream = stream;
    block->small = small;
    Block* b = block.get();
    blocks_.emplace(p, std::move(block));
    ++stats_.raw_allocations;
    stats_.reserved_bytes += segment;
    stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.reserved_bytes);
    return b;
}

// Cuts `b` to `size` when the rest is worth keeping: any rest in a small segment, over 1 MiB in
// a large one (a smaller rest stays with the block rather than fragmenting the large pool).
void CachingAllocator::split(Block* b, std::size_t size) {
    const std::size_t rest = b->size - size;
    if (rest < kRoundBytes || (!b->small && rest <= kSmallRequestBytes)) return;
    auto tail = std::make_unique<Block>();
    tail->ptr = b->ptr + size;
    tail->size = rest;
    tail->stream = b->stream;
    tail->small = b->small;
    tail->free = true;
    tail->prev = b;
    tail->next = b->next;
    if (b->next) b->next->prev = tail.get();
    b->next = tail.get();
    b->size = size;
    free_.insert(key_of(*tail));
    blocks_.emplace(tail->ptr, std::move(tail));
}

void CachingAllocator::deallocate(void* p) {
    if (!p) return;
    std::lock_guard lock(mutex_);
    const auto it = blocks_.find(p);
    if (it == blocks_.end() || it->second->free)
        throw std::invalid_argument("CachingAllocator::deallocate: pointer not allocated here "
                                    "or already freed");
    Block* b = it->second.get();
    b->free = true;
    stats_.in_use_bytes -= b->size;
    // Merge with free neighbours so a segment freed piecewise is whole again.
    if (b->next && b->next->free) {
        free_.erase(key_of(*b->next));
        merge_into(b, b->next);
    }
    if (b->prev && b->prev->free) {
        Block* prev = b->prev;
        free_.erase(key_of(*prev));
        merge_into(prev, b);
        b = prev;
    }
    free_.insert(key_of(*b));
}

// `gone` (the block right after `keep`) joins `keep` and is destroyed.
void CachingAllocator::merge_into(Block* keep, Block* gone) {
    keep->size += gone->size;
    keep->next = gone->next;
    if (gone->next) gone->next->prev = keep;
    blocks_.erase(gone->ptr);
}

std::size_t CachingAllocator::release_cached() {
    std::lock_guard lock(mutex_);
    return release_cached_locked();
}

std::size_t CachingAllocator::release_cached_locked() {
    std::size_t released = 0;
    for (auto it = free_.begin(); it != free_.end();) {
        const auto found = blocks_.find(reinterpret_cast<const void*>(std::get<3>(*it)));
        Block* b = found->second.get();
        if (b->prev || b->next) { // part of a segment still in use
            ++it;
            continue;
        }
        raw_->deallocate(b->ptr);
        released += b->size;
        stats_.reserved_bytes -= b->size;
        it = free_.erase(it);
        blocks_.erase(found);
    }
    return released;
}

AllocatorStats CachingAllocator::stats() const {
    std::lock_guard lock(mutex_);
    return stats_;
}

void CachingAllocator::reset_peaks() {
    std::lock_guard lock(mutex_);
    stats_.peak_in_use_bytes = stats_.in_use_bytes;
    stats_.peak_reserved_bytes = stats_.reserved_bytes;
}

} // namespace trident::kernels::cuda
