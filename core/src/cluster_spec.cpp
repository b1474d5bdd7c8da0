#include "trident/core/cluster_spec.h"

#include "limits.h"
#include "trident/core/spec_error.h"

#include <thread>

namespace trident::core {

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
    return j;
}

} // namespace trident::core
