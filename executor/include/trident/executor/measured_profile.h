#pragma once
// The `trident.profile/1` document both profilers write (`trident profile --backend cpu` and
// `--backend cuda`), assembled from measured tables by one pure function: the file's shape and
// the figures derived from the tables follow one rule whichever machine measured them, and are
// tested on any machine with made-up timings.
#include "trident/core/dtype.h"
#include "trident/core/json_io.h"
#include "trident/core/profile.h"

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace trident::executor {

struct GemmTiming {
    std::int64_t m = 0, n = 0, k = 0;
    double seconds = 0.0; // mean of the forward, dgrad and wgrad layouts
};

struct GroupedGemmTiming { // `groups` GEMMs of one shape, each with its own operands
    std::int64_t groups = 0, m = 0, n = 0, k = 0;
    double seconds = 0.0; // all groups, mean of the three layouts
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

// The collective sweep both profilers run, nccl-tests style: for each message size, every
// collective of the table once (send/recv only in a group of two), each rank passing `count`
// elements — the whole buffer, or the per-rank block of the all-gather, reduce-scatter and
// all-to-all — and the table recording `recorded_bytes`, the whole buffer nccl-tests counts
// (the bus-bandwidth factor that turns it into bus bandwidth is the simulator's:
// core::Profile's bus_bandwidth_factor).
struct SweepPoint {
    core::Collective collective = core::Collective::all_reduce;
    std::int64_t group = 0;
    std::size_t count = 0; // fp32 elements each rank passes to the call
    double recorded_bytes = 0.0;
};
std::vector<SweepPoint> collective_sweep(const std::vector<double>& sizes_bytes,
                                         std::int64_t group);
// Runs `points` with a backend's `time` (seconds of one point; 0: not measured on this rank)
// and returns the rows of the measured ones, calling `done` after each size.
std::vector<CollectiveTiming>
run_collective_sweep(const std::vector<SweepPoint>& points,
                     const std::function<double(const SweepPoint&)>& time);

struct ProfileMeasurements {
    std::string name;
    core::Dtype dtype = core::Dtype::fp32; // of the GEMM and attention tables and of the peak
    std::string fabric = "shm";            // the intra-node fabric the collectives ran over
    std::string method;                    // how it was measured (the derivations are appended)
    std::string measured_on, date, command;
    // device.architecture: "cpu", or the GPU generation from its compute capability.
    std::string architecture;
    double memory_bytes = 0.0;
    // Streaming rate: the CPU's element-wise kernel at its largest size, a GPU's device copy.
    double memory_bandwidth_bytes_per_s = 0.0;
    std::vector<GemmTiming> gemm;
    std::vector<GroupedGemmTiming> grouped_gemm; // optional (kernels.grouped_gemm)
    std::vector<AttentionTiming> attention;
    std::map<std::string, std::vector<MemoryTiming>> memory_bound; // core::kMemoryKernelNames
    std::vector<CollectiveTiming> collectives;                     // empty with one rank or one GPU
    // Host seconds to issue one kernel (device.host_op_issue_s); 0: not measured — the CPU
    // backend runs each kernel synchronously, so its kernel times already include it.
    double host_op_issue_s = 0.0;
    // Whether a collective holds the compute unit it runs on for its whole time (the CPU
    // backend: one core per rank, blocking MPI that makes no progress in the background), so
    // no compute hides it: written as device.sms = device.communication_sms = 1.
    bool communication_blocks_compute = false;
};

// The derived figures, one rule for both backends:
//   peak[dtype]       = the best GEMM rate measured (2·m·n·k / t);
//   fabric α          = the time of the smallest send/recv message;
//   fabric bandwidth  = the best all-reduce bus bandwidth (nccl-tests' busbw: algbw·2(n−1)/n);
// with no collectives, α and bandwidth are placeholders (1 µs, the memory bandwidth) the
// simulator reaches only for a group of two or more, which the measured machine cannot form,
// and the provenance says so. Throws std::invalid_argument naming the first empty or
// non-positive table.
core::Json measured_profile_json(const ProfileMeasurements& m);

} // namespace trident::executor
