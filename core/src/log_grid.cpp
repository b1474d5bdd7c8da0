#include "trident/core/log_grid.h"

#include "trident/core/spec_error.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace trident::core {

bool bracket_log_axis(const std::vector<double>& axis, double x, std::size_t& i, double& f) {
    if (axis.size() == 1) {
        i = 0;
        f = 0.0;
        return std::fabs(x - axis[0]) < 1e-9;
    }
    if (x < axis.front() - 1e-9 || x > axis.back() + 1e-9) return false;
    i = std::size_t(std::upper_bound(axis.begin(), axis.end(), x) - axis.begin());
    i = std::clamp<std::size_t>(i, 1, axis.size() - 1) - 1;
    f = std::clamp((x - axis[i]) / (axis[i + 1] - axis[i]), 0.0, 1.0);
    return true;
}

namespace {

std::size_t position(const std::vector<double>& axis, double log_value) {
    return std::size_t(std::lower_bound(axis.begin(), axis.end(), log_value - 1e-12) -
                       axis.begin());
}

} // namespace

LogGrid LogGrid::from_rows(const std::vector<std::vector<double>>& rows, std::size_t dims,
                           const std::string& field, const std::string& axes) {
    std::vector<std::set<double>> values(dims);
    for (std::size_t i = 0; i < rows.size(); ++i) {
        const auto& r = rows[i];
        const bool coordinates_ok =
            std::all_of(r.begin(), r.begin() + long(dims), [](double x) { return x >= 1; });
        if (!coordinates_ok || !(r[dims] > 0))
            throw SpecError(field + "[" + std::to_string(i) + "]",
                            "needs positive " + axes + " and time");
        for (std::size_t d = 0; d < dims; ++d) values[d].insert(r[d]);
    }
    LogGrid g;
    std::size_t total = 1;
    for (const auto& v : values) {
        std::vector<double> axis;
        for (double x : v) axis.push_back(std::log(x));
        total *= axis.size();
        g.log_axes_.push_back(std::move(axis));
        g.axes_.emplace_back(v.begin(), v.end());
    }
    if (rows.size() != total)
        throw SpecError(field, "must be a full " + axes + " grid (" + std::to_string(total) +
                                   " rows), got " + std::to_string(rows.size()));
    g.log_values_.assign(total, NAN);
    for (const auto& r : rows) {
        std::size_t at = 0;
        for (std::size_t d = 0; d < dims; ++d)
            at = at * g.log_axes_[d].size() + position(g.log_axes_[d], std::log(r[d]));
        g.log_values_[at] = std::log(r[dims]);
    }
    if (std::any_of(g.log_values_.begin(), g.log_values_.end(),
                    [](double v) { return std::isnan(v); }))
        throw SpecError(field, "has duplicate rows, so the grid has holes");
    return g;
}

double LogGrid::front(std::size_t d) const {
    return axes_.at(d).front();
}
double LogGrid::back(std::size_t d) const {
    return axes_.at(d).back();
}

double LogGrid::min_value() const {
    return std::exp(*std::min_element(log_values_.begin(), log_values_.end()));
}

std::optional<double> LogGrid::at(std::span<const double> point) const {
    const std::size_t n = dims();
    std::vector<std::size_t> lower(n);
    std::vector<double> fraction(n);
    for (std::size_t d = 0; d < n; ++d)
        if (point[d] <= 0 ||
            !bracket_log_axis(log_axes_[d], std::log(point[d]), lower[d], fraction[d]))
            return std::nullopt;
    // Sum over the 2^n corners of the cell, each weighted by its share along every axis.
    double v = 0.0;
    for (std::size_t corner = 0; corner < (std::size_t(1) << n); ++corner) {
        double weight = 1.0;
        std::size_t at = 0;
        for (std::size_t d = 0; d < n; ++d) {
            const bool up = (corner >> d) & 1;
            weight *= up ? fraction[d] : 1.0 - fraction[d];
            const std::size_t i = std::min(lower[d] + (up ? 1 : 0), log_axes_[d].size() - 1);
            at = at * log_axes_[d].size() + i;
        }
        if (weight > 0) v += weight * log_values_[at];
    }
    return std::exp(v);
}

} // namespace trident::core
