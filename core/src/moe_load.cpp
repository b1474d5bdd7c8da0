// How evenly routed tokens fall on the expert-parallel ranks (moe.load_balance): the busiest
// rank's share sets the experts' time.
#include "trident/core/model_spec.h"
#include "trident/core/spec_error.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace trident::core {
namespace {

// One histogram: a non-empty array of non-negative counts that counts something.
std::vector<double> counts_from(const Json& counts, const std::string& field) {
    if (!counts.is_array() || counts.empty())
        throw SpecError(field, "must be a non-empty array of numbers");
    std::vector<double> h;
    for (std::size_t i = 0; i < counts.size(); ++i) {
        if (!counts[i].is_number() || counts[i].get<double>() < 0)
            throw SpecError(field + "[" + std::to_string(i) + "]", "must be a non-negative number");
        h.push_back(counts[i].get<double>());
    }
    if (std::accumulate(h.begin(), h.end(), 0.0) <= 0) throw SpecError(field, "counts no tokens");
    return h;
}

void histogram_from(const Json& j, const std::string& path, MoeSpec& m) {
    ObjectReader r(j, path);
    m.tokens_per_expert = counts_from(r.require("tokens_per_expert"), r.field("tokens_per_expert"));
    m.tokens_per_expert_passes.clear();
    if (const Json* passes = r.get("passes")) {
        if (!passes->is_array())
            throw SpecError(r.field("passes"), "must be an array of per-pass histograms");
        for (std::size_t i = 0; i < passes->size(); ++i) {
            const std::string field = r.field("passes") + "[" + std::to_string(i) + "]";
            m.tokens_per_expert_passes.push_back(counts_from((*passes)[i], field));
            if (m.tokens_per_expert_passes.back().size() != m.tokens_per_expert.size())
                throw SpecError(field,
                                "has " + std::to_string(m.tokens_per_expert_passes.back().size()) +
                                    " entries, tokens_per_expert " +
                                    std::to_string(m.tokens_per_expert.size()));
        }
    }
    r.finish();
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
        histogram_from(j, path, m);
    } else if (j.is_string() && j.get<std::string>().ends_with(".json")) {
        m.load_balance = LoadBalance::histogram;
        histogram_from(read_json_file(j.get<std::string>(), path), path, m);
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
    m.busiest_by_ep.clear();
    if (m.tokens_per_expert_passes.empty()) return;
    std::vector<std::pair<std::int64_t, double>> loads;
    for (std::int64_t ep = 1; ep <= m.num_experts; ++ep)
        if (m.num_experts % ep == 0) loads.emplace_back(ep, m.slowest_rank_load(ep));
    m.busiest_by_ep = std::move(loads);
}

Json load_balance_json(const MoeSpec& m) {
    if (m.load_balance == LoadBalance::histogram) {
        Json j = {{"tokens_per_expert", m.tokens_per_expert}};
        if (!m.tokens_per_expert_passes.empty()) j["passes"] = m.tokens_per_expert_passes;
        return j;
    }
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
    // A histogram's busiest rank over its mean, each expert capped.
    const auto busiest_of = [&](const std::vector<double>& counts) {
        const double total = std::accumulate(counts.begin(), counts.end(), 0.0);
        const double mean_expert = total / double(num_experts);
        double busiest = 0.0;
        for (std::int64_t r = 0; r < ep; ++r) {
            double rank = 0.0;
            for (std::int64_t e = r * local; e < (r + 1) * local; ++e)
                rank += capped(counts[std::size_t(e)] / mean_expert);
            busiest = std::max(busiest, rank);
        }
        return busiest / double(local);
    };
    if (tokens_per_expert_passes.empty()) return busiest_of(tokens_per_expert);
    if (std::isinf(expert_cap))
        for (const auto& [holders, load] : busiest_by_ep)
            if (holders == ep) return load;
    // Each pass waits for its own busiest rank: the mean of those.
    double sum = 0.0;
    for (const std::vector<double>& pass : tokens_per_expert_passes) sum += busiest_of(pass);
    return sum / double(tokens_per_expert_passes.size());
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
