#include "trident/executor/measured_profile.h"

#include "trident/core/profile.h"

#include <algorithm>
#include <stdexcept>

namespace trident::executor {
namespace {

void require_positive(double value, const std::string& what) {
    if (!(value > 0.0))
        throw std::invalid_argument("measured_profile_json: " + what + " must be > 0");
}

// The collective tables and the fabric's α and bandwidth derived from them (placeholders
// without collectives), with the sentence the provenance says it in.
struct FabricFigures {
    core::Json collectives = core::Json::object();
    double alpha_s = 0.0, bus_bandwidth = 0.0;
    std::string method;
};

FabricFigures fabric_figures(const ProfileMeasurements& m) {
    FabricFigures f;
    double smallest_message = 0.0;
    for (const auto& c : m.collectives) {
        const auto* known =
            std::find(core::kCollectiveNames.begin(), core::kCollectiveNames.end(), c.collective);
        if (known == core::kCollectiveNames.end())
            throw std::invalid_argument("measured_profile_json: unknown collective " +
                                        c.collective);
        require_positive(c.seconds, c.collective + " time");
        f.collectives[c.collective].push_back({c.group, c.bytes, c.seconds});
        if (c.collective == "send_recv" &&
            (f.alpha_s == 0.0 || c.bytes < smallest_message ||
             (c.bytes == smallest_message && c.seconds < f.alpha_s))) {
            f.alpha_s = c.seconds;
            smallest_message = c.bytes;
        }
        if (c.collective == "all_reduce")
            f.bus_bandwidth =
                std::max(f.bus_bandwidth,
                         c.bytes / c.seconds *
                             core::bus_bandwidth_factor(core::Collective::all_reduce, c.group));
    }
    if (m.collectives.empty()) {
        f.method = "No collective tables (one rank or one device): the " + m.fabric +
                   " fabric's alpha and bandwidth are placeholders.";
        f.alpha_s = 1e-6;
        f.bus_bandwidth = m.memory_bandwidth_bytes_per_s;
        return f;
    }
    f.method = "Fabric alpha = the smallest send/recv message's time; bandwidth = the best "
               "all-reduce bus bandwidth.";
    if (f.alpha_s == 0.0) f.alpha_s = 1e-6; // collectives without a send/recv table
    if (f.bus_bandwidth == 0.0) f.bus_bandwidth = m.memory_bandwidth_bytes_per_s;
    return f;
}

} // namespace

core::Json measured_profile_json(const ProfileMeasurements& m) {
    if (m.gemm.empty()) throw std::invalid_argument("measured_profile_json: no GEMM timings");
    if (m.attention.empty())
        throw std::invalid_argument("measured_profile_json: no attention timings");
    require_positive(m.memory_bytes, "memory_bytes");
    require_positive(m.memory_bandwidth_bytes_per_s, "memory_bandwidth_bytes_per_s");

    double peak = 0.0;
    core::Json gemm = core::Json::array();
    for (const auto& g : m.gemm) {
        require_positive(g.seconds, "gemm time");
        peak = std::max(peak, 2.0 * double(g.m) * double(g.n) * double(g.k) / g.seconds);
        gemm.push_back({g.m, g.n, g.k, g.seconds});
    }
    core::Json grouped = core::Json::array();
    for (const auto& g : m.grouped_gemm) {
        require_positive(g.seconds, "grouped gemm time");
        grouped.push_back({g.groups, g.m, g.n, g.k, g.seconds});
    }
    core::Json attention = core::Json::array();
    for (const auto& a : m.attention) {
        require_positive(a.forward_s, "attention forward time");
        require_positive(a.backward_s, "attention backward time");
        attention.push_back({a.batch_heads, a.seq, a.head_dim, 1, a.forward_s, a.backward_s});
    }
    core::Json memory = core::Json::object();
    for (std::size_t k = 0; k < core::kMemoryKernelNames.size(); ++k) {
        const auto name = core::kMemoryKernelNames[k];
        const auto it = m.memory_bound.find(std::string(name));
        const bool optional = core::forward_kernel(core::MemoryKernel(k)) != core::MemoryKernel(k);
        if (optional && it == m.memory_bound.end()) continue; // timed at the forward's rate
        if (it == m.memory_bound.end() || it->second.empty())
            throw std::invalid_argument(
                "measured_profile_json: no timings for memory-bound kernel " + std::string(name));
        core::Json rows = core::Json::array();
        for (const auto& t : it->second) {
            require_positive(t.seconds, std::string(name) + " time");
            rows.push_back({t.bytes, t.seconds});
        }
        memory[std::string(name)] = rows;
    }

    const FabricFigures fabric = fabric_figures(m);
    std::string method = m.method;
    if (!method.empty() && method.back() != ' ') method += ' ';
    method +=
        "Peak " + core::to_string(m.dtype) + " = the best measured GEMM rate. " + fabric.method;
    core::Json j;
    j["format"] = "trident.profile/1";
    j["name"] = m.name;
    j["provenance"] = {{"kind", "measured"},
                       {"method", method},
                       {"measured_on", m.measured_on},
                       {"date", m.date},
                       {"command", m.command}};
    const std::string dtype = core::to_string(m.dtype);
    j["device"] = {{"peak_flops_per_s", {{dtype, peak}}},
                   {"memory_bytes", m.memory_bytes},
                   {"memory_bandwidth_bytes_per_s", m.memory_bandwidth_bytes_per_s}};
    if (!m.architecture.empty()) j["device"]["architecture"] = m.architecture;
    if (m.host_op_issue_s > 0) j["device"]["host_op_issue_s"] = m.host_op_issue_s;
    if (m.communication_blocks_compute) {
        j["device"]["sms"] = 1;
        j["device"]["communication_sms"] = 1;
    }
    j["kernels"] = {
        {"gemm", {{dtype, gemm}}}, {"attention", {{dtype, attention}}}, {"memory_bound", memory}};
    if (!grouped.empty()) j["kernels"]["grouped_gemm"] = {{dtype, grouped}};
    j["fabrics"] = {{m.fabric,
                     {{"scope", "intra_node"},
                      {"alpha_s", fabric.alpha_s},
                      {"bus_bandwidth_bytes_per_s", fabric.bus_bandwidth},
                      {"collectives", fabric.collectives}}}};
    return j;
}

std::vector<SweepPoint> collective_sweep(const std::vector<double>& sizes_bytes,
                                         std::int64_t group) {
    std::vector<SweepPoint> points;
    for (double bytes : sizes_bytes) {
        const std::size_t whole = std::max<std::size_t>(1, std::size_t(bytes / 4));
        const std::size_t block = std::max<std::size_t>(1, whole / std::size_t(group));
        const double whole_bytes = double(whole) * 4, blocks_bytes = double(block * group) * 4;
        using C = core::Collective;
        points.push_back({C::all_reduce, group, whole, whole_bytes});
        points.push_back({C::all_gather, group, block, blocks_bytes});
        points.push_back({C::reduce_scatter, group, block, blocks_bytes});
        points.push_back({C::all_to_all, group, block, blocks_bytes});
        points.push_back({C::broadcast, group, whole, whole_bytes});
        if (group == 2) points.push_back({C::send_recv, group, whole, whole_bytes});
    }
    return points;
}

std::vector<CollectiveTiming>
run_collective_sweep(const std::vector<SweepPoint>& points,
                     const std::function<double(const SweepPoint&)>& time) {
    std::vector<CollectiveTiming> rows;
    for (const SweepPoint& p : points) {
        const double seconds = time(p);
        if (seconds > 0)
            rows.push_back({std::string(core::kCollectiveNames[std::size_t(p.collective)]), p.group,
                            p.recorded_bytes, seconds});
    }
    return rows;
}

} // namespace trident::executor
