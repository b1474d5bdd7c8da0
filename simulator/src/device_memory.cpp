#include "trident/simulator/device_memory.h"

#include "trident/core/dtype.h"

#include <algorithm>
#include <array>

namespace trident::simulator {
namespace {

// A group of `size` ranks `stride` apart (Megatron's rank order: tp fastest, then cp, dp, pp;
// experts etp, ep, expert-dp): how many of them share the fabric domain with its first rank.
std::int64_t members_on_fabric(std::int64_t size, std::int64_t stride, std::int64_t domain) {
    if (stride >= domain) return 1;
    return std::min(size, std::max<std::int64_t>(1, domain / stride));
}

// A ring collective's buffers: one receive and one send connection per channel.
double ring_bytes(std::int64_t size) {
    return size > 1 ? kNcclChannels * kNcclConnectionBytes : 0.0;
}

// Point-to-point buffers to `peers` ranks of a group `stride` apart (neighbours, or every
// member of an all-to-all): a connection per channel per peer, fewer channels off the fabric.
double p2p_bytes(std::int64_t size, std::int64_t peers, std::int64_t stride, std::int64_t domain,
                 bool neighbours) {
    if (size <= 1 || peers <= 0) return 0.0;
    const std::int64_t on =
        neighbours ? (stride < domain ? peers : 0) : members_on_fabric(size, stride, domain) - 1;
    const std::int64_t off = peers - on;
    return kNcclConnectionBytes *
           (double(on) * kNcclChannels + double(off) * kNcclNetChannelsPerPeer);
}

// DeepEP's default Config(num_sms, nvl_send, nvl_recv, rdma_send, rdma_recv) per rank count,
// for dispatch and for combine (deep_ep/buffer.py get_dispatch_config / get_combine_config at
// 567632d): the parts the size hints read. A count it does not list takes the largest listed
// below it.
struct DeepEpConfig {
    std::int64_t nvl_recv, rdma_send, rdma_recv;
};
struct DeepEpConfigs {
    std::int64_t ranks;
    DeepEpConfig dispatch, combine;
};
constexpr std::array<DeepEpConfigs, 10> kDeepEpConfigs = {{{2, {256, 6, 128}, {256, 6, 128}},
                                                           {4, {256, 6, 128}, {256, 6, 128}},
                                                           {8, {256, 6, 128}, {256, 6, 128}},
                                                           {16, {288, 20, 128}, {288, 12, 128}},
                                                           {24, {288, 8, 128}, {288, 8, 128}},
                                                           {32, {288, 8, 128}, {288, 8, 128}},
                                                           {48, {288, 8, 128}, {288, 8, 128}},
                                                           {64, {288, 8, 128}, {288, 8, 128}},
                                                           {96, {480, 12, 128}, {480, 8, 128}},
                                                           {128, {560, 12, 128}, {560, 8, 128}}}};

const DeepEpConfigs& configs_for(std::int64_t ranks) {
    const DeepEpConfigs* chosen = &kDeepEpConfigs.front();
    for (const DeepEpConfigs& c : kDeepEpConfigs)
        if (c.ranks <= ranks) chosen = &c;
    return *chosen;
}

double align_up(double bytes, double to) {
    return double(std::int64_t((bytes + to - 1) / to)) * to;
}

// csrc/config.hpp: a token slot carries its row, a source meta (8 B), 128 top-k indices (8 B
// each), 128 weights and 128 scales (4 B each); the RDMA slot 16 B more, twice (send, recv).
double deepep_size_hints(const DeepEpConfig& c, double hidden_bytes, std::int64_t ranks,
                         bool rdma) {
    constexpr double kNvlPeers = 8, kChannels = 10; // 20 SMs, Megatron-Core's default
    const double rdma_ranks = double(std::max<std::int64_t>(ranks / 8, 1));
    const double nvl_ranks = double(std::min<std::int64_t>(ranks, 8));
    const double slot = hidden_bytes + 8 + 128 * 8 + 128 * 4 + 128 * 4;
    if (!rdma)
        return align_up(kChannels * nvl_ranks * (2 * rdma_ranks + 3) * 4 +
                            kChannels * nvl_ranks * double(c.nvl_recv) * slot,
                        128);
    if (ranks <= 8) return 0.0;
    const double tokens = align_up(double(c.rdma_recv), double(c.rdma_send));
    return align_up(kChannels * rdma_ranks * (kNvlPeers * 2 + 2) * 2 * 4 +
                        kChannels * rdma_ranks * tokens * 2 * (slot + 16),
                    128);
}

} // namespace

double allocator_reserve_fraction(const core::JobSpec& job) {
    if (job.cluster.host_cpu_device()) return 0.0;
    const bool dropless = job.model.moe && !job.model.moe->capacity_factor;
    return dropless ? kDroplessMoeAllocatorReserveFraction : kAllocatorReserveFraction;
}

double deepep_buffer_bytes(double hidden_bytes, std::int64_t ranks) {
    if (ranks <= 1) return 0.0;
    double nvl = 0.0, rdma = 0.0;
    const DeepEpConfigs& configs = configs_for(ranks);
    for (const DeepEpConfig& c : {configs.dispatch, configs.combine}) {
        nvl = std::max(nvl, deepep_size_hints(c, hidden_bytes, ranks, false));
        rdma = std::max(rdma, deepep_size_hints(c, hidden_bytes, ranks, true));
    }
    return nvl + rdma + 32.0 * core::kMiB;
}

double nccl_buffer_bytes(const core::JobSpec& job, std::int32_t stage) {
    const core::ParallelPlan& p = job.plan;
    const std::int64_t domain = job.cluster.fabric_domain();
    double bytes = ring_bytes(p.tp) + ring_bytes(p.dp * p.cp);
    bytes += p2p_bytes(p.cp, std::min<std::int64_t>(2, p.cp - 1), p.tp, domain, true);
    bytes += p2p_bytes(p.pp, std::min<std::int64_t>(2, p.pp - 1), p.tp * p.cp * p.dp, domain, true);
    if (job.model.tied_embeddings && p.pp > 1 && (stage == 0 || stage == p.pp - 1))
        bytes += ring_bytes(2);
    if (!job.model.moe) return bytes;
    const std::int64_t etp = p.expert_tp();
    bytes += ring_bytes(p.expert_dp()); // Megatron's expert-data group: a communicator of its own
    switch (p.token_dispatcher) {
    case core::TokenDispatcher::alltoall:
        bytes += p2p_bytes(p.ep, p.ep - 1, etp, domain, false);
        break;
    case core::TokenDispatcher::allgather:
        bytes += ring_bytes(etp * p.ep);
        break;
    case core::TokenDispatcher::flex: // DeepEP's own buffer (deepep_buffer_bytes)
        break;
    }
    return bytes;
}

double cublas_workspace_bytes(const core::JobSpec& job) {
    if (job.cluster.host_cpu_device()) return 0.0;
    return kCublasWorkspaceBytes * (job.plan.tp_comm_overlap ? 4.0 : 1.0);
}

RuntimeMemory runtime_memory(const core::JobSpec& job, std::int32_t stage) {
    RuntimeMemory m;
    if (job.cluster.host_cpu_device()) return m;
    m.cuda_context_bytes = kCudaContextBytes;
    m.nccl_bytes = nccl_buffer_bytes(job, stage);
    if (job.model.moe && job.plan.token_dispatcher == core::TokenDispatcher::flex) {
        const double element = std::max(2.0, double(core::dtype_bytes(job.model.precision.params)));
        m.deepep_bytes = deepep_buffer_bytes(double(job.model.hidden_size) * element,
                                             job.plan.expert_tp() * job.plan.ep);
    }
    return m;
}

} // namespace trident::simulator
