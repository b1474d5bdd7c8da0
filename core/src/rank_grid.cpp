#include "trident/core/rank_grid.h"

#include "trident/core/spec_error.h"

#include <algorithm>

namespace trident::core {

RankGrid::RankGrid(const ParallelPlan& plan)
    : tp_(plan.tp), cp_(plan.cp), dp_(plan.dp), pp_(plan.pp), ep_(plan.ep), etp_(plan.expert_tp()),
      edp_(0), instances_(plan.sharding.instances),
      ends_on_one_rank_(placement_of(plan.schedule) == StagePlacement::v_shape) {
    if (tp_ < 1 || cp_ < 1 || dp_ < 1 || pp_ < 1 || ep_ < 1 || etp_ < 1)
        throw SpecError("parallel", "rank grid needs positive degrees");
    if (!plan.expert_grid_tiles())
        throw SpecError("parallel.ep", "etp·ep = " + std::to_string(etp_) + "·" +
                                           std::to_string(ep_) + " must divide a stage's " +
                                           std::to_string(tp_ * cp_ * dp_) + " ranks");
    edp_ = tp_ * cp_ * dp_ / (etp_ * ep_);
    if (instances_ < 1 || edp_ % instances_ != 0)
        throw SpecError("parallel.num_distributed_optimizer_instances",
                        "must divide expert-dp = " + std::to_string(edp_));
}

RankCoord RankGrid::coord(std::int64_t rank) const {
    if (rank < 0 || rank >= world_size())
        throw SpecError("rank", std::to_string(rank) + " is outside [0, " +
                                    std::to_string(world_size()) + ")");
    RankCoord c;
    c.tp = rank % tp_;
    std::int64_t rest = rank / tp_;
    c.cp = rest % cp_;
    rest /= cp_;
    c.dp = rest % dp_;
    c.pp = rest / dp_;
    // Expert view: the rank's index in its stage, split as etp (fastest) × ep × expert-dp.
    const std::int64_t k = rank % (tp_ * cp_ * dp_);
    c.etp = k % etp_;
    c.ep = k / etp_ % ep_;
    c.edp = k / (etp_ * ep_);
    return c;
}

std::int64_t RankGrid::rank(std::int64_t tp, std::int64_t cp, std::int64_t dp,
                            std::int64_t pp) const {
    return tp + tp_ * (cp + cp_ * (dp + dp_ * pp));
}

std::vector<std::int64_t> RankGrid::group_of(GroupKind kind, std::int64_t r) const {
    const RankCoord c = coord(r);
    std::vector<std::int64_t> members;
    // Rank of the cp·dp index j at this rank's tp and pp.
    const auto at_j = [&](std::int64_t j) { return rank(c.tp, j % cp_, j / cp_, c.pp); };
    switch (kind) {
    case GroupKind::tensor:
        for (std::int64_t t = 0; t < tp_; ++t) members.push_back(rank(t, c.cp, c.dp, c.pp));
        break;
    case GroupKind::context:
        for (std::int64_t k = 0; k < cp_; ++k) members.push_back(rank(c.tp, k, c.dp, c.pp));
        break;
    case GroupKind::data:
        for (std::int64_t d = 0; d < dp_; ++d) members.push_back(rank(c.tp, c.cp, d, c.pp));
        break;
    case GroupKind::data_context:
        for (std::int64_t j = 0; j < cp_ * dp_; ++j) members.push_back(at_j(j));
        break;
    case GroupKind::pipeline:
        for (std::int64_t s = 0; s < pp_; ++s) members.push_back(rank(c.tp, c.cp, c.dp, s));
        break;
    case GroupKind::expert:
        for (std::int64_t e = 0; e < ep_; ++e)
            members.push_back(expert_rank(c.etp, e, c.edp, c.pp));
        break;
    case GroupKind::tensor_expert:
        for (std::int64_t e = 0; e < ep_; ++e)
            for (std::int64_t t = 0; t < etp_; ++t)
                members.push_back(expert_rank(t, e, c.edp, c.pp));
        break;
    case GroupKind::expert_tensor:
        for (std::int64_t t = 0; t < etp_; ++t)
            members.push_back(expert_rank(t, c.ep, c.edp, c.pp));
        break;
    case GroupKind::expert_data:
        for (std::int64_t d = 0; d < edp_; ++d)
            members.push_back(expert_rank(c.etp, c.ep, d, c.pp));
        break;
    case GroupKind::model:
        for (std::int64_t s = 0; s < pp_; ++s)
            for (std::int64_t t = 0; t < tp_; ++t) members.push_back(rank(t, c.cp, c.dp, s));
        break;
    case GroupKind::data_shard: {
        const std::int64_t size = cp_ * dp_ / instances_, j = c.cp + cp_ * c.dp;
        for (std::int64_t k = 0; k < size; ++k) members.push_back(at_j(j / size * size + k));
        break;
    }
    case GroupKind::data_replica: {
        const std::int64_t size = cp_ * dp_ / instances_, j = c.cp + cp_ * c.dp;
        for (std::int64_t i = 0; i < instances_; ++i) members.push_back(at_j(j % size + size * i));
        break;
    }
    case GroupKind::expert_data_shard: {
        const std::int64_t size = edp_ / instances_;
        for (std::int64_t k = 0; k < size; ++k)
            members.push_back(expert_rank(c.etp, c.ep, c.edp / size * size + k, c.pp));
        break;
    }
    case GroupKind::expert_data_replica: {
        const std::int64_t size = edp_ / instances_;
        for (std::int64_t i = 0; i < instances_; ++i)
            members.push_back(expert_rank(c.etp, c.ep, c.edp % size + size * i, c.pp));
        break;
    }
    case GroupKind::embedding:
        if (ends_on_one_rank_) break;            // summed on pipeline rank 0 itself
        if (c.pp != 0 && c.pp != pp_ - 1) break; // middle stages hold no embedding
        members.push_back(rank(c.tp, c.cp, c.dp, 0));
        if (pp_ > 1) members.push_back(rank(c.tp, c.cp, c.dp, pp_ - 1));
        break;
    }
    return members;
}

std::int64_t RankGrid::nodes_spanned(GroupKind kind, std::int64_t r,
                                     std::int64_t devices_per_node) const {
    return domains_spanned(group_of(kind, r), devices_per_node);
}

std::int64_t domains_spanned(std::vector<std::int64_t> members, std::int64_t ranks_per_domain) {
    // Members mostly come in rank order (the planner asks this for groups of thousands of
    // ranks), so the distinct domains are the changes of domain along the list.
    for (auto& member : members) member /= ranks_per_domain;
    if (!std::is_sorted(members.begin(), members.end())) std::sort(members.begin(), members.end());
    return std::int64_t(std::unique(members.begin(), members.end()) - members.begin());
}

std::vector<std::vector<std::int64_t>> RankGrid::groups(GroupKind kind) const {
    std::vector<std::vector<std::int64_t>> all;
    std::vector<bool> seen(static_cast<std::size_t>(world_size()), false);
    for (std::int64_t r = 0; r < world_size(); ++r) {
        if (seen[static_cast<std::size_t>(r)]) continue;
        auto members = group_of(kind, r);
        if (members.empty()) continue; // a middle stage has no embedding group
        for (auto m : members) seen[static_cast<std::size_t>(m)] = true;
        all.push_back(std::move(members));
    }
    return all;
}

} // namespace trident::core
