#pragma once
// `trident plan`'s outputs: the ranking as a table, CSV or JSON, the --explain lines, and the
// search's progress bar.
#include "trident/core/json_io.h"
#include "trident/planner/planner.h"
#include "trident/planner/tp_pp_map.h"

#include <chrono>
#include <cstdio>
#include <ostream>
#include <string>
#include <unistd.h>

namespace trident::cli {

void print_table(const planner::PlanResult& r, double budget, std::ostream& out);
void print_csv(const planner::PlanResult& r, std::ostream& out);
core::Json result_json(const planner::PlanResult& r, double budget);
void print_explain(const planner::PlanResult& r, std::ostream& out);
// --tp-pp-map: tokens/s per device of each pair's best layout (tp rows, pp columns), "-"
// where none fits; and the same as JSON rows.
void print_tp_pp_map(const std::vector<planner::TpPpCell>& cells, std::int64_t devices,
                     std::ostream& out);
core::Json tp_pp_map_json(const std::vector<planner::TpPpCell>& cells);

// A progress bar on stderr, drawn only on a terminal and only once the search has taken a second.
class ProgressBar {
public:
    ProgressBar() : start_(std::chrono::steady_clock::now()), tty_(::isatty(2) == 1) {}
    ~ProgressBar() {
        if (drawn_) std::fprintf(stderr, "\r%70s\r", "");
    }
    void operator()(const planner::Progress& p) {
        if (!tty_ || std::chrono::steady_clock::now() - start_ < std::chrono::seconds(1)) return;
        const int width = 30;
        const int filled = p.total > 0 ? int(width * double(p.done) / double(p.total)) : 0;
        std::fprintf(stderr, "\r%-8s [%s%s] %lld/%lld", std::string(p.phase).c_str(),
                     std::string(std::size_t(filled), '#').c_str(),
                     std::string(std::size_t(width - filled), ' ').c_str(), (long long)p.done,
                     (long long)p.total);
        drawn_ = true;
    }

private:
    std::chrono::steady_clock::time_point start_;
    bool tty_;
    bool drawn_ = false;
};

} // namespace trident::cli
