// How evenly routed tokens fall on the expert-parallel ranks (moe.load_balance): the busiest
// rank's share sets the experts' time.
#include "trident/core/model_spec.h"
#include "trident/core/spec_error.h"

#include <algorithm>
#include <numeric>

namespace trident::core {
namespace {

std::vector<double> histogram_from(const Json& j, const std::string& path) {
    ObjectReader r(j, path);
    const Json& counts = r.require("tokens_per_expert");
    if (!counts.is_array() || counts.empty())
        throw SpecError(r.field("tokens_per_expert"), "must be a non-empty array of numbers");
    std::vector<double> h;
    for (std::size_t i = 0; i < counts.size(); ++i) {
        if (!counts[i].is_number() || counts[i].get<double>() < 0)
            throw SpecError(r.field("tokens_per_expert") + "[" + std::to_string(i) + "]",
                            "must be a non-negative number");
        h.push_back(counts[i].get<double>());
    }
    if (std::accumulate(h.begin(), h.end(), 0.0) <= 0)
        throw SpecError(r.field("tokens_per_expert"), "counts no tokens");
    r.finish();
    return h;
}

// The chance that k distinct experts drawn from `pool` all avoid `excluded` of them:
// C(pool − excluded, k) / C(pool, k).
double avoids(double pool, double excluded, std::int64_t k) {
    double p = 1.0;
    for (std::int64_t i = 0; i < k; ++i)
        p *= std::max(0.0, (pool - excluded - double(i)) / (pool - double(i)));
    return p;
}

// C(n, r) for small n (group counts).
double choose(std::int64_t n, std::int64_t r) {
    if (r < 0 || r > n) return 0.0;
    double c = 1.0;
    for (std::int64_t i = 1; i <= r; ++i) c = c * double(n - r + i) / double(i);
    return c;
}

} // namespace

void read_load_balance(const Json& j, const std::string& path, MoeSpec& m) {
    if (j.is_object()) {
        m.load_balance = LoadBalance::histogram;
        m.tokens_per_expert = histogram_from(j, path);
    } else if (j.is_string() && j.get<std::string>().ends_with(".json")) {
        m.load_balance = LoadBalance::histogram;
        m.tokens_per_expert = histogram_from(read_json_file(j.get<std::string>(), path), path);
    } else if (j.is_string()) {
        // A histogram is given as {"tokens_per_expert": [...]} or a .json file holding it.
        static constexpr std::array<std::string_view, 2> names = {kLoadBalanceNames[0],
                                                                  kLoadBalanceNames[1]};
        m.load_balance = static_cast<LoadBalance>(enum_index(j.get<std::string>(), names, path));
    } else {
        throw SpecError(path, "must be \"forced\", \"aux-loss\", {\"tokens_per_expert\": [...]} "
                              "or a .json file");
    }
    if (m.load_balance == LoadBalance::histogram &&
        std::int64_t(m.tokens_per_expert.size()) != m.num_experts)
        throw SpecError(path, "tokens_per_expert has " +
                                  std::to_string(m.tokens_per_expert.size()) + " entries for " +
                                  std::to_string(m.num_experts) + " experts");
}

Json load_balance_json(const MoeSpec& m) {
    if (m.load_balance == LoadBalance::histogram)
        return {{"tokens_per_expert", m.tokens_per_expert}};
    return std::string(kLoadBalanceNames[int(m.load_balance)]);
}

double MoeSpec::slowest_rank_load(std::int64_t ep, double expert_cap) const {
    const std::int64_t local = num_experts / std::max<std::int64_t>(1, ep);
    // Loads are over the mean expert's; a capped expert computes at most expert_cap of them.
    const auto capped = [expert_cap](double load) { return std::min(load, expert_cap); };
    switch (load_balance) {
    case LoadBalance::forced:
        return capped(1.0);
    case LoadBalance::aux_loss:
        // The hottest expert at 1 + MaxVio times the mean, the rest of its rank at the mean.
        return (capped(1.0 + kAuxLossMaxViolation) + double(local - 1) * capped(1.0)) /
               double(local);
    case LoadBalance::histogram:
        break;
    }
    const double total = std::accumulate(tokens_per_expert.begin(), tokens_per_expert.end(), 0.0);
    const double mean_expert = total / double(num_experts);
    double busiest = 0.0;
    for (std::int64_t r = 0; r < ep; ++r) {
        double rank = 0.0;
        for (std::int64_t e = r * local; e < (r + 1) * local; ++e)
            rank += capped(tokens_per_expert[std::size_t(e)] / mean_expert);
        busiest = std::max(busiest, rank);
    }
    return busiest / double(local);
}

double MoeSpec::expected_destinations(std::int64_t holders) const {
    const double experts = double(num_experts), per_holder = experts / double(holders);
    const std::int64_t groups = router_num_groups, chosen = router_group_topk;
    if (groups == 0 || chosen == groups)
        return double(holders) * (1.0 - avoids(experts, per_holder, top_k));
    const double per_group = experts / double(groups), pool = double(chosen) * per_group;
    if (holders % groups == 0) {
        // Each group spans holders / groups holders: only the chosen groups' are candidates.
        const double candidates = double(chosen * (holders / groups));
        return candidates * (1.0 - avoids(pool, per_holder, top_k));
    }
    if (groups % holders != 0) // groups straddle holders: the unlimited count bounds it
        return double(holders) * (1.0 - avoids(experts, per_holder, top_k));
    // Each holder holds groups / holders groups, j of them chosen (hypergeometric); it
    // receives none when the token's k experts avoid those j groups' experts.
    const std::int64_t held = groups / holders;
    double none = 0.0;
    for (std::int64_t j = 0; j <= std::min(held, chosen); ++j)
        none += choose(held, j) * choose(groups - held, chosen - j) / choose(groups, chosen) *
                avoids(pool, double(j) * per_group, top_k);
    return double(holders) * (1.0 - none);
}

} // namespace trident::core
