#include "trident/simulator/sharding_overlap.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <utility>

namespace trident::simulator {

StreamOverlap stream_overlap(const std::vector<double>& gather_s,
                             const std::vector<double>& compute_s,
                             const std::vector<double>& scatter_s, std::int64_t prefetch) {
    const std::size_t n = compute_s.size();
    StreamOverlap out;
    std::vector<double> compute_end(n, 0.0);
    std::deque<std::pair<double, double>> scatters; // (issued at, seconds), in issue order
    double stream_free = 0.0, computed = 0.0;
    const auto run_scatters_issued_by = [&](double t) {
        while (!scatters.empty() && scatters.front().first <= t) {
            stream_free = std::max(stream_free, scatters.front().first) + scatters.front().second;
            scatters.pop_front();
        }
    };
    for (std::size_t i = 0; i < n; ++i) {
        double ready = 0.0; // when unit i's parameters are in place
        if (gather_s[i] > 0) {
            // Issued once the unit `prefetch + 1` places back has freed its buffer.
            const std::int64_t freed = std::int64_t(i) - 1 - prefetch;
            const double issued = freed >= 0 ? compute_end[std::size_t(freed)] : 0.0;
            run_scatters_issued_by(issued);
            stream_free = std::max(stream_free, issued) + gather_s[i];
            ready = stream_free;
        }
        const double start = std::max(ready, i > 0 ? compute_end[i - 1] : 0.0);
        compute_end[i] = start + compute_s[i];
        computed += compute_s[i];
        if (scatter_s[i] > 0) scatters.emplace_back(compute_end[i], scatter_s[i]);
        out.stream_s += gather_s[i] + scatter_s[i];
    }
    run_scatters_issued_by(INFINITY);
    const double end = std::max(n ? compute_end[n - 1] : 0.0, stream_free);
    out.exposed_s = std::max(0.0, end - computed);
    return out;
}

} // namespace trident::simulator
