// The GEMM and grouped-GEMM tables of a profile: reading them and looking a shape up.
#include "profile_rows.h"
#include "trident/core/profile.h"
#include "trident/core/spec_error.h"

#include <algorithm>
#include <array>
#include <cmath>

namespace trident::core {

using detail::array_field;
using detail::row;

namespace {

std::string shape_text(std::initializer_list<std::int64_t> dims) {
    std::string out;
    for (std::int64_t d : dims) out += (out.empty() ? "" : "x") + std::to_string(d);
    return out;
}

// The rows of table `name`, each `width` numbers.
std::vector<std::vector<double>> table_rows(ObjectReader& r, std::string_view name,
                                            std::size_t width) {
    const Json& rows = array_field(r, name);
    std::vector<std::vector<double>> out;
    for (std::size_t i = 0; i < rows.size(); ++i)
        out.push_back(row(rows[i], width, r.field(name) + "[" + std::to_string(i) + "]"));
    return out;
}

} // namespace

void Profile::read_gemm(ObjectReader& kernels, const std::string& peak_field) {
    ObjectReader g(kernels.require("gemm"), kernels.field("gemm"));
    for (auto name : kDtypeNames) {
        if (!g.has(name)) continue;
        const Dtype d = parse_dtype(std::string(name), g.field(name));
        const auto rows = table_rows(g, name, 4);
        GemmGrid grid{LogGrid::from_rows(rows, 3, g.field(name), "m×n×k")};
        const double peak = peak_.contains(d) ? peak_[d] : 0.0;
        if (peak <= 0.0)
            throw SpecError(peak_field, "has no " + std::string(name) + " peak for the gemm table");
        for (const auto& rw : rows)
            grid.best_efficiency =
                std::max(grid.best_efficiency, 2.0 * rw[0] * rw[1] * rw[2] / rw[3] / peak);
        gemm_[d] = std::move(grid);
    }
    g.finish();
}

void Profile::read_grouped_gemm(ObjectReader& kernels) {
    if (!kernels.has("grouped_gemm")) return; // optional: then one GEMM per group
    ObjectReader g(kernels.require("grouped_gemm"), kernels.field("grouped_gemm"));
    for (auto name : kDtypeNames) {
        if (!g.has(name)) continue;
        const Dtype d = parse_dtype(std::string(name), g.field(name));
        if (!gemm_.contains(d))
            throw SpecError(g.field(name),
                            "needs a gemm " + std::string(name) + " table beside it");
        grouped_gemm_[d] =
            LogGrid::from_rows(table_rows(g, name, 5), 4, g.field(name), "groups×m×n×k");
    }
    g.finish();
}

Timing Profile::gemm(Dtype d, std::int64_t m, std::int64_t n, std::int64_t k) const {
    auto it = find_rate_table(gemm_, d);
    if (it == gemm_.end())
        throw SpecError("profile." + name_ + ".kernels.gemm", "has no " + to_string(d) + " table");
    if (m <= 0 || n <= 0 || k <= 0) return {};
    const LogGrid& g = it->second.time_s;
    const double point[3] = {double(m), double(n), double(k)};
    if (const auto t = g.at(point)) return {*t, ""};
    // Smaller than the table in some dimension (and nowhere larger): small GEMMs run far below
    // peak, so scale the nearest table point's time by FLOPs rather than trust a roofline.
    const bool nowhere_larger = [&] {
        for (std::size_t i = 0; i < 3; ++i)
            if (point[i] > g.back(i) * (1 + 1e-9)) return false;
        return true;
    }();
    if (nowhere_larger) {
        double edge[3], scale = 1.0;
        for (std::size_t i = 0; i < 3; ++i) {
            edge[i] = std::max(point[i], g.front(i));
            scale *= point[i] / edge[i];
        }
        return {*g.at(edge) * scale,
                "gemm " + shape_text({m, n, k}) + " below the table: FLOP-scaled"};
    }
    // Larger than the table: roofline at its best achieved efficiency, never below its fastest
    // entry.
    const double flops = 2.0 * double(m) * double(n) * double(k);
    const double bytes = double(dtype_bytes(d)) * (double(m) * k + double(k) * n + double(m) * n);
    const double roof = std::max(flops / (peak_flops_per_s(d) * it->second.best_efficiency),
                                 bytes / memory_bandwidth_);
    return {std::max(roof, g.min_value()),
            "gemm " + shape_text({m, n, k}) + " outside the table: roofline"};
}

Timing Profile::grouped_gemm(Dtype d, std::int64_t groups, std::int64_t m, std::int64_t n,
                             std::int64_t k) const {
    if (groups <= 1) return gemm(d, m, n, k);
    if (m <= 0 || n <= 0 || k <= 0) return {};
    const auto it = find_rate_table(grouped_gemm_, d);
    if (it == grouped_gemm_.end()) {
        const Timing one = gemm(d, m, n, k);
        return {double(groups) * one.seconds,
                "grouped gemm " + to_string(d) + ": no table in the profile, one GEMM per group"};
    }
    // Outside the table: more groups, or larger m, n, k, scale the edge's time by FLOPs (more
    // tiles of the same kind); smaller ones take the edge's time, as a grouped kernel pads a
    // group to its smallest tile rather than running it faster.
    const LogGrid& g = it->second;
    const double point[4] = {double(groups), double(m), double(n), double(k)};
    double edge[4], scale = 1.0;
    for (std::size_t i = 0; i < 4; ++i) {
        edge[i] = std::clamp(point[i], g.front(i), g.back(i));
        if (point[i] > edge[i]) scale *= point[i] / edge[i];
    }
    const double t = *g.at(edge) * scale;
    if (std::equal(point, point + 4, edge)) return {t, ""};
    return {t, "grouped gemm " + shape_text({groups, m, n, k}) + " outside the table: scaled"};
}

} // namespace trident::core
