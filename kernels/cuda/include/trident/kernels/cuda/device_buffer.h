#pragma once
// RAII owner of `count` elements of T in device memory (cudaMalloc). Move-only.
#include "trident/kernels/cuda/error.h"

#include <cstddef>
#include <cuda_runtime_api.h>
#include <utility>
#include <vector>

namespace trident::kernels::cuda {

template <typename T>
class DeviceBuffer {
public:
    DeviceBuffer() = default;
    explicit DeviceBuffer(std::size_t count) : count_(count) {
        if (count_ > 0) {
            void* p = nullptr;
            TRIDENT_CUDA_CHECK(cudaMalloc(&p, count_ * sizeof(T)));
            data_ = static_cast<T*>(p);
        }
    }
    explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) {
        copy_from(host);
    }
    ~DeviceBuffer() {
        if (data_) cudaFree(data_);
    }
    DeviceBuffer(DeviceBuffer&& other) noexcept
        : data_(std::exchange(other.data_, nullptr)), count_(std::exchange(other.count_, 0)) {}
    DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
        if (this != &other) {
            if (data_) cudaFree(data_);
            data_ = std::exchange(other.data_, nullptr);
            count_ = std::exchange(other.count_, 0);
        }
        return *this;
    }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;

    T* get() const { return data_; }
    std::size_t size() const { return count_; }
    std::size_t size_bytes() const { return count_ * sizeof(T); }

    // Synchronous copies (the legacy default stream), for set-up and tests.
    void copy_from(const std::vector<T>& host) {
        if (host.size() != count_) throw CudaError("DeviceBuffer::copy_from", "size mismatch");
        TRIDENT_CUDA_CHECK(cudaMemcpy(data_, host.data(), size_bytes(), cudaMemcpyHostToDevice));
    }
    std::vector<T> to_host() const {
        std::vector<T> host(count_);
        TRIDENT_CUDA_CHECK(cudaMemcpy(host.data(), data_, size_bytes(), cudaMemcpyDeviceToHost));
        return host;
    }
    // Fills every byte with `byte` (tests poison outputs with 0xFF = NaN in bf16 and fp32).
    void fill_bytes(int byte) { TRIDENT_CUDA_CHECK(cudaMemset(data_, byte, size_bytes())); }

private:
    T* data_ = nullptr;
    std::size_t count_ = 0;
};

} // namespace trident::kernels::cuda
