#pragma once
// `trident profile --backend cuda`: measures the visible GPUs — cuBLASLt bf16 GEMMs over an
// m×n×k grid, Trident's causal flash attention over (batch·heads, seq, head_dim), the fused
// memory-bound kernels, and NCCL collectives over groups of 2..N visible GPUs driven from this
// one process — and returns the measurements; measured_profile_json() turns them into the
// simulator's profile. Library trident::executor_cuda (TRIDENT_CUDA only).
#include "trident/executor/measured_profile.h"

#include <functional>
#include <string>

namespace trident::executor {

struct CudaProfileOptions {
    bool quick = false; // small grids: about a minute on one H200
    std::string name = "cuda-device";
    std::string command; // recorded in provenance
    std::function<void(double fraction, const std::string& what)> on_progress;
};

// Throws core::SpecError("--backend", ...) when no CUDA device is visible; CudaError or
// NcclError naming the call for a failure on the device.
ProfileMeasurements measure_cuda(const CudaProfileOptions& options);

} // namespace trident::executor
