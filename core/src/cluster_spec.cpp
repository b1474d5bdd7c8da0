#include "trident/core/cluster_spec.h"

#include "limits.h"
#include "trident/core/spec_error.h"

#include <thread>

namespace trident::core {
namespace {

constexpr double kGB = 1e9; // the JSON's rates are in GB/s (10^9 bytes), as storage is sold

ClusterReliability reliability_from_json(const Json& j, const std::string& path) {
    ObjectReader r(j, path);
    ClusterReliability c;
    c.failures_per_gpu_hour = r.number_or("failures_per_gpu_hour", 0.0, 0.0, 1.0);
    c.failures_per_node_hour = r.number_or("failures_per_node_hour", 0.0, 0.0, 1.0);
    c.storage_write_bytes_per_s = kGB * r.number("storage_write_gb_per_s", 1e-6, 1e9);
    c.storage_read_bytes_per_s = kGB * r.number("storage_read_gb_per_s", 1e-6, 1e9);
    c.node_storage_bytes_per_s = kGB * r.number_or("node_storage_gb_per_s", 0.0, 0.0, 1e6);
    c.host_copy_bytes_per_s = kGB * r.number_or("host_copy_gb_per_s", 0.0, 0.0, 1e6);
    if (r.has("relaunch_s")) c.relaunch_s = r.number("relaunch_s", 0.0, 1e7);
    c.source = r.string_or("source", "");
    r.finish();
    if (c.failures_per_gpu_hour == 0.0 && c.failures_per_node_hour == 0.0)
        throw SpecError(path + ".failures_per_gpu_hour",
                        "give failures_per_gpu_hour or failures_per_node_hour (both are 0: "
                        "leave \"reliability\" out when failures are not modelled)");
    return c;
}

Json to_json(const ClusterReliability& c) {
    Json j;
    j["failures_per_gpu_hour"] = c.failures_per_gpu_hour;
    j["failures_per_node_hour"] = c.failures_per_node_hour;
    j["storage_write_gb_per_s"] = c.storage_write_bytes_per_s / kGB;
    j["storage_read_gb_per_s"] = c.storage_read_bytes_per_s / kGB;
    if (c.node_storage_bytes_per_s > 0)
        j["node_storage_gb_per_s"] = c.node_storage_bytes_per_s / kGB;
    if (c.host_copy_bytes_per_s > 0) j["host_copy_gb_per_s"] = c.host_copy_bytes_per_s / kGB;
    if (c.relaunch_s) j["relaunch_s"] = *c.relaunch_s;
    if (!c.source.empty()) j["source"] = c.source;
    return j;
}

} // namespace

ClusterSpec cluster_from_json(const Json& j, const std::string& path) {
    ObjectReader r(j, path);
    if (r.has("format")) r.expect_format("trident.cluster/1");
    ClusterSpec c;
    c.name = r.string_or("name", "");
    c.source = r.string_or("source", "");
    c.nodes = r.integer("nodes", 1, limits::kMaxNodes);
    const Json& per_node = r.require("devices_per_node");
    if (per_node.is_string()) {
        if (per_node.get<std::string>() != "cores")
            throw SpecError(r.field("devices_per_node"),
                            "must be a positive integer or \"cores\", got \"" +
                                per_node.get<std::string>() + "\"");
        // The localhost preset runs one MPI rank per online core of this machine.
        c.devices_per_node = std::max<std::int64_t>(1, std::thread::hardware_concurrency());
    } else {
        c.devices_per_node =
            as_integer(per_node, r.field("devices_per_node"), 1, limits::kMaxDevicesPerNode);
    }
    c.device = r.string("device");
    c.intra_node_fabric = r.string("intra_node_fabric");
    c.inter_node_fabric = r.string("inter_node_fabric");
    if (r.has("nvlink_domain_size"))
        c.nvlink_domain = r.integer("nvlink_domain_size", 1, limits::kMaxDevicesPerNode * 1024);
    if (r.has("reliability"))
        c.reliability = reliability_from_json(r.require("reliability"), r.field("reliability"));
    r.finish();
    validate(c, path);
    return c;
}

void validate(const ClusterSpec& c, const std::string& path) {
    for (auto [key, value] : {std::pair<const char*, const std::string*>{"device", &c.device},
                              {"intra_node_fabric", &c.intra_node_fabric},
                              {"inter_node_fabric", &c.inter_node_fabric}})
        if (value->empty()) throw SpecError(path + "." + key, "must not be empty");
    if (c.nvlink_domain > 0 && c.nvlink_domain % c.devices_per_node != 0)
        throw SpecError(path + ".nvlink_domain_size",
                        std::to_string(c.nvlink_domain) +
                            " must be a multiple of devices_per_node " +
                            std::to_string(c.devices_per_node) + " (whole nodes share a domain)");
}

Json to_json(const ClusterSpec& c) {
    Json j;
    j["format"] = "trident.cluster/1";
    j["name"] = c.name;
    if (!c.source.empty()) j["source"] = c.source;
    j["nodes"] = c.nodes;
    j["devices_per_node"] = c.devices_per_node;
    j["device"] = c.device;
    j["intra_node_fabric"] = c.intra_node_fabric;
    j["inter_node_fabric"] = c.inter_node_fabric;
    if (c.nvlink_domain > 0) j["nvlink_domain_size"] = c.nvlink_domain;
    if (c.reliability) j["reliability"] = to_json(*c.reliability);
    return j;
}

} // namespace trident::core
