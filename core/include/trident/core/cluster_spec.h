#pragma once
// ClusterSpec: identical nodes of identical devices. Fabric names key into a device profile's
// interconnect tables (intra-node e.g. "nvlink", inter-node e.g. "infiniband").
#include "trident/core/json_io.h"

#include <cstdint>
#include <optional>
#include <string>

namespace trident::core {

// What a long run on this cluster loses to failures and checkpoints (docs/simulator.md, "Failures
// and checkpoints"). Rates and bandwidths are the cluster's, each preset citing its source.
struct ClusterReliability {
    double failures_per_gpu_hour = 0.0;  // job-stopping interruptions per GPU-hour
    double failures_per_node_hour = 0.0; // the same per node-hour (hosts, NICs, switches)
    // The shared file system's sustained write and read rates available to the job, and one
    // node's link to it (0: not limiting).
    double storage_write_bytes_per_s = 0.0;
    double storage_read_bytes_per_s = 0.0;
    double node_storage_bytes_per_s = 0.0;
    // Device-to-host copy rate per GPU: what staging an asynchronous save blocks on.
    double host_copy_bytes_per_s = 0.0;
    // Scheduler, start-up and rendezvous before the checkpoint load; unset: not counted.
    std::optional<double> relaunch_s;
    std::string source;
};

struct ClusterSpec {
    std::string name;
    std::string source;
    std::int64_t nodes = 0;
    std::int64_t devices_per_node = 0;
    std::string device;            // device profile name, e.g. "a100-sxm4-80gb"
    std::string intra_node_fabric; // e.g. "nvlink", "shm"
    std::string inter_node_fabric; // e.g. "infiniband"
    // Devices on one NVLink fabric (`nvlink_domain_size`): a node's (0, the default), or a
    // rack's — GB200/GB300 NVL72 join 18 trays of 4 GPUs into one 72-GPU NVLink domain, where
    // groups spanning trays still talk over the intra-node fabric.
    std::int64_t nvlink_domain = 0;
    std::optional<ClusterReliability> reliability; // "reliability"; absent: failures not modelled

    std::int64_t devices() const { return nodes * devices_per_node; }
    // The localhost cluster's device (or another "cpu…" profile): this machine's CPU, no GPU.
    bool host_cpu_device() const { return device.rfind("cpu", 0) == 0; }
    // The devices that share the intra-node fabric: the NVLink domain, else one node.
    std::int64_t fabric_domain() const {
        return nvlink_domain > 0 ? nvlink_domain : devices_per_node;
    }
};

// `devices_per_node` may be the word "cores": this machine's online CPU cores (the localhost
// preset runs one MPI rank per core).
ClusterSpec cluster_from_json(const Json& j, const std::string& path = "cluster");
Json to_json(const ClusterSpec& c);
void validate(const ClusterSpec& c, const std::string& path = "cluster");

} // namespace trident::core
