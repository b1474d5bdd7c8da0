#pragma once
// RAII owners of a CUDA stream and a CUDA event. Move-only; destruction never throws.
#include <cuda_runtime_api.h>

namespace trident::kernels::cuda {

class Stream {
public:
    Stream(); // a non-blocking stream on the current device
    ~Stream();
    Stream(Stream&& other) noexcept;
    Stream& operator=(Stream&& other) noexcept;
    Stream(const Stream&) = delete;
    Stream& operator=(const Stream&) = delete;

    cudaStream_t get() const { return stream_; }
    void synchronize() const;

private:
    cudaStream_t stream_ = nullptr;
};

class Event {
public:
    Event(); // an event that records time
    ~Event();
    Event(Event&& other) noexcept;
    Event& operator=(Event&& other) noexcept;
    Event(const Event&) = delete;
    Event& operator=(const Event&) = delete;

    cudaEvent_t get() const { return event_; }
    void record(cudaStream_t stream) const;
    void synchronize() const;
    // Milliseconds between `start` and this event, both recorded and complete.
    float elapsed_ms_since(const Event& start) const;

private:
    cudaEvent_t event_ = nullptr;
};

// Number of CUDA devices visible; 0 (never an exception) when there is no driver or device.
int visible_device_count();

} // namespace trident::kernels::cuda
