#pragma once
// The `trident.profile/1` document `trident profile --backend cuda` writes, assembled from
// measured tables. A pure function, apart from the GPU measurements (cuda_profiler.h), so the
// file's shape is tested on any machine with made-up timings.
#include "trident/core/json_io.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace trident::executor {

struct GemmTiming {
    std::int64_t m = 0, n = 0, k = 0;
    double seconds = 0.0; // mean of the forward, dgrad and wgrad layouts
};

struct AttentionTiming {
    std::int64_t batch_heads = 0, seq = 0, head_dim = 0;
    double forward_s = 0.0, backward_s = 0.0; // causal
};

struct MemoryTiming {
    double bytes = 0.0; // the fewest bytes the kernel must move, as the simulator counts them
    double seconds = 0.0;
};

struct CollectiveTiming {
    std::string collective; // one of core::kCollectiveNames
    std::int64_t group = 0;
    double bytes = 0.0; // the whole buffer, as nccl-tests counts it
    double seconds = 0.0;
};

struct CudaMeasurements {
    std::string name;        // the profile's name
    std::string device_name; // e.g. "NVIDIA H200"
    int visible_devices = 1;
    double memory_bytes = 0.0;
    double copy_bytes_per_s = 0.0; // device-to-device copy, read + write
    std::vector<GemmTiming> gemm_bf16;
    std::vector<AttentionTiming> attention_bf16;
    std::map<std::string, std::vector<MemoryTiming>> memory_bound; // core::kMemoryKernelNames
    std::vector<CollectiveTiming> collectives;                     // empty with one GPU
    std::string host, date, command;
};

// Peak bf16 = the best GEMM rate measured; memory bandwidth = the copy rate. The collectives
// become the "nvlink" fabric (intra_node; α = the smallest send/recv time, bus bandwidth = the
// best all-reduce bus bandwidth); with none, that fabric has no tables and the provenance says
// why. Throws std::invalid_argument naming the first empty or non-positive table.
core::Json cuda_profile_json(const CudaMeasurements& m);

} // namespace trident::executor
