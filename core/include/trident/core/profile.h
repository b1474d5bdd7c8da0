#pragma once
// Profile: measured (or derived) performance of one device type and its fabrics
// (`trident.profile/1`). Lookups interpolate in log-space between table points; outside a table
// they fall back to a fitted model (roofline for kernels, α–β for collectives) and say so in
// the returned Timing, so reports can list every fallback. A missing table, dtype, kernel,
// fabric or collective is a SpecError, never a zero.
#include "trident/core/cluster_spec.h"
#include "trident/core/dtype.h"
#include "trident/core/json_io.h"
#include "trident/core/log_grid.h"

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace trident::core {

// The activations' backward kernels are optional in a profile: without their tables the
// backward is timed at the forward kernel's rate per byte (forward_kernel).
enum class MemoryKernel {
    layernorm,
    rmsnorm,
    gelu,
    swiglu,
    softmax_cross_entropy,
    adamw,
    elementwise,
    gelu_backward,
    swiglu_backward
};
inline constexpr std::array<std::string_view, 9> kMemoryKernelNames = {
    "layernorm", "rmsnorm",     "gelu",          "swiglu",         "softmax_cross_entropy",
    "adamw",     "elementwise", "gelu_backward", "swiglu_backward"};
// The forward kernel whose table an absent backward table falls back to (else the kernel).
inline constexpr MemoryKernel forward_kernel(MemoryKernel k) {
    return k == MemoryKernel::gelu_backward     ? MemoryKernel::gelu
           : k == MemoryKernel::swiglu_backward ? MemoryKernel::swiglu
                                                : k;
}

enum class Collective { all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, send_recv };
inline constexpr std::array<std::string_view, 6> kCollectiveNames = {
    "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "send_recv"};

// Bus-bandwidth factor of nccl-tests: busbw = algbw · factor(n).
double bus_bandwidth_factor(Collective c, std::int64_t group);

struct Timing {
    double seconds = 0.0;
    std::string fallback; // empty when interpolated inside a table
};

struct Provenance {
    std::string kind; // "measured" or "derived"
    std::string method;
    std::vector<std::string> sources;
    std::string generated_by;
    std::string date;
};

// The entry of a per-dtype table for `d`. FP16 and BF16 run at one tensor-core rate on every
// GPU generation Trident ships profiles for (dense TFLOP/s in NVIDIA's datasheets: A100 312 and
// 312, H100 SXM 989 and 989, B200 2,250 and 2,250), so a profile measured in BF16 times an FP16
// job with its BF16 tables; any other missing dtype stays missing (the caller names it).
template <class Map>
auto find_rate_table(const Map& tables, Dtype d) {
    auto it = tables.find(d);
    if (it == tables.end() && d == Dtype::fp16) it = tables.find(Dtype::bf16);
    return it;
}

class Profile {
public:
    static Profile from_json(const Json& j, const std::string& path = "profile");

    const std::string& name() const { return name_; }
    const Provenance& provenance() const { return provenance_; }
    // device.architecture: "ampere", "hopper", "blackwell", "cpu"; empty when not given.
    const std::string& architecture() const { return architecture_; }
    double peak_flops_per_s(Dtype d) const;
    double memory_bytes() const { return memory_bytes_; }
    double memory_bandwidth_bytes_per_s() const { return memory_bandwidth_; }
    bool has_fabric(const std::string& fabric) const { return fabrics_.contains(fabric); }
    // FP8 recipes the device runs ("delayed", "tensorwise", "blockwise", "mxfp8") and each
    // one's GEMM rate relative to the fp8 GEMM table (device.fp8_recipes), and NVFP4's ("nvfp4")
    // relative to the fp4 table (device.fp4_recipes); 0: not supported.
    double fp8_gemm_rate(const std::string& recipe) const;
    const std::map<std::string, double>& fp8_recipes() const { return fp8_recipes_; }
    // The fraction of compute throughput an overlapped collective takes (device.communication_
    // sms / device.sms); 0 when the profile does not say (contention then goes unmodelled).
    double overlap_slowdown() const { return overlap_slowdown_; }
    // The same for a collective over `fabric`: its fabrics.X.communication_sms (the NCCL
    // channels it runs, one SM each), else the device's figure.
    double overlap_slowdown(const std::string& fabric) const;
    // The same for tensor-parallel communication overlapped with its GEMMs (device.
    // tp_overlap_sms: Transformer Engine's userbuffer kernels), else the device's figure.
    double tp_overlap_slowdown() const { return tp_overlap_slowdown_; }
    // Host (CPU) seconds to issue one operation — framework dispatch and kernel launch
    // (device.host_op_issue_s); 0 when the profile does not say (the kernel times then include
    // it, as on a synchronous CPU backend).
    double host_op_issue_s() const { return host_op_issue_s_; }

    // C[m×n] = A[m×k]·B[k×n].
    Timing gemm(Dtype d, std::int64_t m, std::int64_t n, std::int64_t k) const;
    // `groups` such GEMMs, each with its own B, in one grouped kernel (MoE experts:
    // kernels.grouped_gemm). Without a table for `d`: the GEMMs one after another, said in
    // the Timing's fallback.
    Timing grouped_gemm(Dtype d, std::int64_t groups, std::int64_t m, std::int64_t n,
                        std::int64_t k) const;
    // Flash attention over batch·heads sequences of length seq (queries and keys).
    Timing attention(Dtype d, std::int64_t batch_heads, std::int64_t seq, std::int64_t head_dim,
                     bool causal, bool backward) const;
    Timing memory_bound(MemoryKernel kernel, double bytes) const;
    // `bytes` as nccl-tests counts it: the whole buffer.
    Timing collective(const std::string& fabric, Collective c, std::int64_t group,
                      double bytes) const;

private:
    struct Curve { // log-log 1-D table
        std::vector<double> log_x, log_y;
        double at(double x, bool* outside) const;
    };
    struct GemmGrid {
        LogGrid time_s;               // over m × n × k
        double best_efficiency = 0.0; // fitted roofline: best FLOP/s ÷ peak
    };
    struct AttentionGrid { // one per (head_dim, causal), over batch_heads × seq
        LogGrid forward, backward;
    };
    struct Fabric {
        double alpha_s = 0.0;
        double bus_bandwidth = 0.0;
        double overlap_slowdown = 0.0;                        // Profile::overlap_slowdown(fabric)
        std::map<std::pair<int, std::int64_t>, Curve> tables; // (collective, group) -> bytes curve
    };

    // from_json's parts, one per section of the file.
    void read_provenance(ObjectReader& top);
    void read_device(ObjectReader& top);
    void read_gemm(ObjectReader& kernels, const std::string& peak_field);
    void read_grouped_gemm(ObjectReader& kernels);
    void read_attention(ObjectReader& kernels);
    void read_memory_bound(ObjectReader& kernels);
    void read_fabrics(ObjectReader& top);

    std::string name_;
    std::string architecture_;
    Provenance provenance_;
    std::map<Dtype, double> peak_;
    double memory_bytes_ = 0.0;
    double memory_bandwidth_ = 0.0;
    std::map<std::string, double> fp8_recipes_;
    double sms_ = 0.0; // device.sms (0: not given)
    double overlap_slowdown_ = 0.0, tp_overlap_slowdown_ = 0.0;
    double host_op_issue_s_ = 0.0;
    std::map<Dtype, GemmGrid> gemm_;
    std::map<Dtype, LogGrid> grouped_gemm_; // over groups × m × n × k
    std::map<Dtype, std::map<std::pair<std::int64_t, bool>, AttentionGrid>> attention_;
    std::map<MemoryKernel, Curve> memory_bound_;
    std::map<std::string, Fabric> fabrics_;
};

// The device profile a command works with — the first of:
//   1. `reference` (--profile): a preset name or a trident.profile/1 file;
//   2. `recorded`: the profile a plan file recorded (`trident plan --out` writes it there);
//   3. ./DEVICE.json, DEVICE being the cluster's device — where `trident profile` writes;
//   4. user_profile_dir()/DEVICE.json — where `trident profile` keeps a copy;
//   5. the preset named DEVICE.
// A --profile that cannot be loaded is an error; a recorded one that is not on this machine is
// passed over, and `note` says so. Nothing found: SpecError("cluster.device") naming where it
// looked and the command that measures a profile.
struct ProfileChoice {
    std::string reference; // what was loaded: a file's absolute path, or a preset's name
    std::string note;      // a recorded profile passed over (printed as a warning), else empty
    Json json;
};
ProfileChoice find_profile(const std::string& reference, const ClusterSpec& cluster,
                           const std::string& recorded = "");
Profile load_profile(const std::string& reference, const ClusterSpec& cluster,
                     const std::string& recorded = "");
// Per user: $TRIDENT_PROFILE_DIR, else $XDG_DATA_HOME/trident/profiles, else
// $HOME/.local/share/trident/profiles; empty when none of them is set.
std::string user_profile_dir();

} // namespace trident::core
