// Why layouts were refused and why a search found nothing — one explanation for `trident plan`
// and the GUI's planner.
#include "trident/core/units.h"
#include "trident/planner/planner.h"

#include <algorithm>
#include <cctype>

namespace trident::planner {
namespace {

bool is_digit(char c) {
    return c >= '0' && c <= '9';
}

bool is_name_char(char c) {
    return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == '-';
}

// "·" in UTF-8: joins the numbers of a product ("16·1").
bool middle_dot_at(const std::string& s, std::size_t i) {
    return i + 1 < s.size() && s[i] == '\xC2' && s[i + 1] == '\xB7';
}

} // namespace

std::string rejection_kind(const std::string& field, const std::string& reason) {
    // The rule up to its details (a parenthesis or a semicolon), each number — digits, with
    // '.' or '·' between digits — written N unless it is part of a name ("interleaved-1f1b").
    const std::string rule = reason.substr(0, std::min(reason.find('('), reason.find(';')));
    std::string kind;
    std::size_t i = 0;
    while (i < rule.size()) {
        const bool starts_number =
            is_digit(rule[i]) && (i == 0 || !(is_name_char(rule[i - 1]) || is_digit(rule[i - 1])));
        if (!starts_number) {
            kind += rule[i++];
            continue;
        }
        std::size_t end = i;
        while (end < rule.size()) {
            if (is_digit(rule[end])) {
                ++end;
            } else if (rule[end] == '.' && end + 1 < rule.size() && is_digit(rule[end + 1])) {
                ++end;
            } else if (middle_dot_at(rule, end) && end + 2 < rule.size() &&
                       is_digit(rule[end + 2])) {
                end += 2;
            } else {
                break;
            }
        }
        if (end < rule.size() && is_name_char(rule[end])) { // "1f1b": a name, kept
            kind.append(rule, i, end - i);
        } else {
            kind += 'N';
        }
        i = end;
    }
    while (!kind.empty() && kind.back() == ' ') kind.pop_back();
    return field + ": " + kind;
}

void record_rejection(PlanResult& result, const std::string& field, const std::string& reason) {
    RejectionGroup& group = result.rejections[rejection_kind(field, reason)];
    if (group.count++ == 0) {
        group.field = field;
        group.example = reason;
    }
}

std::vector<std::string> rejection_lines(const PlanResult& result, std::size_t at_most) {
    std::vector<const RejectionGroup*> groups;
    for (const auto& [kind, g] : result.rejections) groups.push_back(&g);
    std::stable_sort(groups.begin(), groups.end(),
                     [](const auto* a, const auto* b) { return a->count > b->count; });
    std::vector<std::string> lines;
    for (std::size_t i = 0; i < groups.size() && i < at_most; ++i)
        lines.push_back(groups[i]->field + " ×" + std::to_string(groups[i]->count) + ": " +
                        (groups[i]->count > 1 ? "e.g. " : "") + groups[i]->example);
    return lines;
}

core::SpecError why_no_candidate(const core::JobSpec& specs, const PlanResult& result,
                                 double memory_budget_bytes, const std::string& budget_field) {
    if (result.feasible == 0 && result.smallest_peak_bytes > 0)
        return core::SpecError(
            budget_field,
            "no layout fits in " + core::bytes_text(memory_budget_bytes) + "; the smallest needs " +
                core::bytes_text(result.smallest_peak_bytes) + " (" + result.smallest_layout + ")");
    std::string reasons;
    for (const std::string& line : rejection_lines(result, 3))
        reasons += (reasons.empty() ? "" : "; ") + line;
    return core::SpecError("cluster", "no valid layout of " +
                                          std::to_string(specs.cluster.devices()) +
                                          " devices for " + specs.model.name + ": " + reasons);
}

} // namespace trident::planner
