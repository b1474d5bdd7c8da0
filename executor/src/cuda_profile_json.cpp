#include "trident/executor/cuda_profile_json.h"

#include "trident/core/profile.h"

#include <algorithm>
#include <stdexcept>

namespace trident::executor {
namespace {

void require_positive(double value, const std::string& what) {
    if (!(value > 0.0)) throw std::invalid_argument("cuda_profile_json: " + what + " must be > 0");
}

} // namespace

core::Json cuda_profile_json(const CudaMeasurements& m) {
    if (m.gemm_bf16.empty()) throw std::invalid_argument("cuda_profile_json: no GEMM timings");
    if (m.attention_bf16.empty())
        throw std::invalid_argument("cuda_profile_json: no attention timings");
    require_positive(m.memory_bytes, "memory_bytes");
    require_positive(m.copy_bytes_per_s, "copy_bytes_per_s");

    double peak = 0.0;
    core::Json gemm = core::Json::array();
    for (const auto& g : m.gemm_bf16) {
        require_positive(g.seconds, "gemm time");
        peak = std::max(peak, 2.0 * double(g.m) * double(g.n) * double(g.k) / g.seconds);
        gemm.push_back({g.m, g.n, g.k, g.seconds});
    }
    core::Json attention = core::Json::array();
    for (const auto& a : m.attention_bf16) {
        require_positive(a.forward_s, "attention forward time");
        require_positive(a.backward_s, "attention backward time");
        attention.push_back({a.batch_heads, a.seq, a.head_dim, 1, a.forward_s, a.backward_s});
    }
    core::Json memory = core::Json::object();
    for (const auto name : core::kMemoryKernelNames) {
        const auto it = m.memory_bound.find(std::string(name));
        if (it == m.memory_bound.end() || it->second.empty())
            throw std::invalid_argument("cuda_profile_json: no timings for memory-bound kernel " +
                                        std::string(name));
        core::Json rows = core::Json::array();
        for (const auto& t : it->second) {
            require_positive(t.seconds, std::string(name) + " time");
            rows.push_back({t.bytes, t.seconds});
        }
        memory[std::string(name)] = rows;
    }

    core::Json collectives = core::Json::object();
    double alpha = 0.0, busbw = 0.0;
    for (const auto& c : m.collectives) {
        const auto* known =
            std::find(core::kCollectiveNames.begin(), core::kCollectiveNames.end(), c.collective);
        if (known == core::kCollectiveNames.end())
            throw std::invalid_argument("cuda_profile_json: unknown collective " + c.collective);
        require_positive(c.seconds, c.collective + " time");
        collectives[c.collective].push_back({c.group, c.bytes, c.seconds});
        if (c.collective == "send_recv" && (alpha == 0.0 || c.seconds < alpha)) alpha = c.seconds;
        if (c.collective == "all_reduce")
            busbw = std::max(busbw,
                             c.bytes / c.seconds *
                                 core::bus_bandwidth_factor(core::Collective::all_reduce, c.group));
    }
    const bool one_gpu = m.collectives.empty();
    // Without collectives the fabric's α–β figures are placeholders the simulator only reaches
    // for a group of two or more, which a plan on these GPUs cannot form.
    if (alpha == 0.0) alpha = 1e-5;
    if (busbw == 0.0) busbw = m.copy_bytes_per_s;

    std::string method =
        "Measured by trident profile --backend cuda on " + m.device_name +
        ": cuBLASLt bf16 GEMMs (fp32 accumulate; mean of the forward, dgrad and wgrad layouts), "
        "Trident's causal flash attention (bf16) and fused memory-bound kernels, medians of "
        "CUDA-event-timed launches. bf16 peak = best measured GEMM rate; memory bandwidth = "
        "device-to-device copy rate (read + write). ";
    method += one_gpu ? "One GPU visible: no collective tables (NCCL needs two or more GPUs); "
                        "the nvlink fabric's alpha and bandwidth are placeholders."
                      : "NCCL collectives and send/recv over " + std::to_string(m.visible_devices) +
                            " visible GPUs (one process, groups of consecutive devices).";
    core::Json j;
    j["format"] = "trident.profile/1";
    j["name"] = m.name;
    j["provenance"] = {
        {"kind", "measured"},
        {"method", method},
        {"measured_on", m.host + ": " + std::to_string(m.visible_devices) + " × " + m.device_name},
        {"date", m.date},
        {"command", m.command}};
    j["device"] = {{"peak_flops_per_s", {{"bf16", peak}}},
                   {"memory_bytes", m.memory_bytes},
                   {"memory_bandwidth_bytes_per_s", m.copy_bytes_per_s}};
    j["kernels"] = {
        {"gemm", {{"bf16", gemm}}}, {"attention", {{"bf16", attention}}}, {"memory_bound", memory}};
    j["fabrics"] = {{"nvlink",
                     {{"scope", "intra_node"},
                      {"alpha_s", alpha},
                      {"bus_bandwidth_bytes_per_s", busbw},
                      {"collectives", collectives}}}};
    return j;
}

} // namespace trident::executor
