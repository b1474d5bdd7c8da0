#pragma once
// A full grid of positive values over log-spaced axes (a kernel time by shape), read from rows
// [x1, …, xD, value] and interpolated multilinearly in log space — the GEMM and grouped-GEMM
// tables of a profile. A grid with holes or duplicate rows is a SpecError naming the field.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace trident::core {

// Index i and fraction f with axis[i] <= x <= axis[i+1] on a sorted log-space axis (x in log
// units too); false when x lies outside it.
bool bracket_log_axis(const std::vector<double>& axis, double x, std::size_t& i, double& f);

class LogGrid {
public:
    LogGrid() = default;
    // `rows` hold dims coordinates (each >= 1) and a positive value; `axes` names the
    // coordinates for errors ("m×n×k").
    static LogGrid from_rows(const std::vector<std::vector<double>>& rows, std::size_t dims,
                             const std::string& field, const std::string& axes);

    std::size_t dims() const { return log_axes_.size(); }
    // Smallest and largest coordinate along `d` (linear units).
    double front(std::size_t d) const;
    double back(std::size_t d) const;
    // The value at `point` (linear units), or nothing when it lies outside some axis.
    std::optional<double> at(std::span<const double> point) const;
    double min_value() const;

private:
    std::vector<std::vector<double>> axes_, log_axes_; // the coordinates, and their logs
    std::vector<double> log_values_;                   // row-major over the axes
};

} // namespace trident::core
