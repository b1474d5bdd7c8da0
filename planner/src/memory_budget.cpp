#include "trident/planner/memory_budget.h"

#include "trident/core/spec_error.h"
#include "trident/core/units.h"

#include <cmath>
#include <cstdio>
#include <map>

namespace trident::planner {

double parse_memory_budget(const std::string& text, double capacity_bytes,
                           const std::string& field) {
    static const std::map<std::string, double> kUnitBytes = {
        {"B", 1.0},         {"KB", 1e3},         {"MB", 1e6},
        {"GB", 1e9},        {"TB", 1e12},        {"KiB", 1024.0},
        {"MiB", 1048576.0}, {"GiB", core::kGiB}, {"TiB", core::kGiB * 1024.0}};
    double value = 0.0;
    char unit[8] = {0};
    char tail = 0;
    const int n = std::sscanf(text.c_str(), " %lf %7[A-Za-z%] %c", &value, unit, &tail);
    double bytes = -1.0;
    if ((n == 1 || n == 2) && std::isfinite(value) && value > 0) {
        const std::string u = n == 2 ? unit : "";
        if (u.empty())
            bytes = value <= 1.0 ? value * capacity_bytes : value;
        else if (u == "%")
            bytes = value / 100.0 * capacity_bytes;
        else if (const auto it = kUnitBytes.find(u); it != kUnitBytes.end())
            bytes = value * it->second;
    }
    if (bytes <= 0)
        throw core::SpecError(field,
                              "cannot read \"" + text + "\" (use e.g. 70GiB, 80GB, 0.9 or 90%)");
    return bytes;
}

} // namespace trident::planner
