#include "trident/kernels/cuda/stream.h"

#include "trident/kernels/cuda/error.h"

#include <utility>

namespace trident::kernels::cuda {

Stream::Stream() {
    TRIDENT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
}
Stream::~Stream() {
    if (stream_) cudaStreamDestroy(stream_);
}
Stream::Stream(Stream&& other) noexcept : stream_(std::exchange(other.stream_, nullptr)) {}
Stream& Stream::operator=(Stream&& other) noexcept {
    if (this != &other) {
        if (stream_) cudaStreamDestroy(stream_);
        stream_ = std::exchange(other.stream_, nullptr);
    }
    return *this;
}
void Stream::synchronize() const {
    TRIDENT_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

Event::Event() {
    TRIDENT_CUDA_CHECK(cudaEventCreate(&event_));
}
Event::~Event() {
    if (event_) cudaEventDestroy(event_);
}
Event::Event(Event&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}
Event& Event::operator=(Event&& other) noexcept {
    if (this != &other) {
        if (event_) cudaEventDestroy(event_);
        event_ = std::exchange(other.event_, nullptr);
    }
    return *this;
}
void Event::record(cudaStream_t stream) const {
    TRIDENT_CUDA_CHECK(cudaEventRecord(event_, stream));
}
void Event::synchronize() const {
    TRIDENT_CUDA_CHECK(cudaEventSynchronize(event_));
}
float Event::elapsed_ms_since(const Event& start) const {
    float ms = 0.0f;
    TRIDENT_CUDA_CHECK(cudaEventElapsedTime(&ms, start.event_, event_));
    return ms;
}

int visible_device_count() {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        cudaGetLastError(); // clear the sticky "no device" error
        return 0;
    }
    return count;
}

} // namespace trident::kernels::cuda
