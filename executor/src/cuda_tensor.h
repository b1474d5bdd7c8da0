#pragma once
// A typed block of the caching allocator, returned to it when the owner goes: the CUDA
// backend's activations, allocated on the compute stream and freed in stream order.
#include "trident/kernels/cuda/caching_allocator.h"
#include "trident/kernels/cuda/error.h"

#include <cstdint>
#include <utility>

namespace trident::executor {

template <typename T>
class CudaTensor {
public:
    CudaTensor() = default;
    CudaTensor(kernels::cuda::CachingAllocator& allocator, std::int64_t count, cudaStream_t stream)
        : allocator_(&allocator), count_(count),
          data_(static_cast<T*>(allocator.allocate(std::size_t(count) * sizeof(T), stream))) {}
    ~CudaTensor() { reset(); }
    CudaTensor(CudaTensor&& o) noexcept
        : allocator_(o.allocator_), count_(std::exchange(o.count_, 0)),
          data_(std::exchange(o.data_, nullptr)) {}
    CudaTensor& operator=(CudaTensor&& o) noexcept {
        if (this != &o) {
            reset();
            allocator_ = o.allocator_;
            count_ = std::exchange(o.count_, 0);
            data_ = std::exchange(o.data_, nullptr);
        }
        return *this;
    }
    CudaTensor(const CudaTensor&) = delete;
    CudaTensor& operator=(const CudaTensor&) = delete;

    void reset() noexcept {
        if (data_) allocator_->deallocate(data_); // a pointer it handed out: cannot throw
        data_ = nullptr;
        count_ = 0;
    }
    T* get() const { return data_; }
    std::int64_t size() const { return count_; }
    bool empty() const { return data_ == nullptr; }

private:
    kernels::cuda::CachingAllocator* allocator_ = nullptr;
    std::int64_t count_ = 0;
    T* data_ = nullptr;
};

// Page-locked host memory (cudaMallocHost): copies from it are truly asynchronous, where
// copies from pageable memory may make the host wait for the stream.
template <typename T>
class PinnedHostBuffer {
public:
    PinnedHostBuffer() = default;
    explicit PinnedHostBuffer(std::int64_t count) : count_(count) {
        void* p = nullptr;
        if (count > 0) TRIDENT_CUDA_CHECK(cudaMallocHost(&p, std::size_t(count) * sizeof(T)));
        data_ = static_cast<T*>(p);
    }
    ~PinnedHostBuffer() {
        if (data_) cudaFreeHost(data_);
    }
    PinnedHostBuffer(PinnedHostBuffer&& o) noexcept
        : count_(std::exchange(o.count_, 0)), data_(std::exchange(o.data_, nullptr)) {}
    PinnedHostBuffer& operator=(PinnedHostBuffer&& o) noexcept {
        if (this != &o) {
            if (data_) cudaFreeHost(data_);
            count_ = std::exchange(o.count_, 0);
            data_ = std::exchange(o.data_, nullptr);
        }
        return *this;
    }
    PinnedHostBuffer(const PinnedHostBuffer&) = delete;
    PinnedHostBuffer& operator=(const PinnedHostBuffer&) = delete;

    T* get() const { return data_; }
    std::int64_t size() const { return count_; }

private:
    std::int64_t count_ = 0;
    T* data_ = nullptr;
};

} // namespace trident::executor
