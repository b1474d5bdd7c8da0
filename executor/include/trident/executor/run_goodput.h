#pragma once
// Where a run's wall time went — steps, checkpoint saves, validation, start-up and checkpoint
// load — measured on rank 0 (a report, never a decision the ranks share), and the run so far
// across every launch that saved into one folder: `DIR/goodput.json` (trident.goodput/1),
// rewritten at each save and log line, read back by the next launch that resumes from DIR.
// The steps a launch ran past its last save are redone by the next and count as lost.
#include "trident/core/json_io.h"

#include <cstdint>
#include <string>

namespace trident::executor {

struct RunTime {
    double wall_s = 0.0;          // from the command's start to now
    double startup_s = 0.0;       // start-up, process groups and the checkpoint load
    double steps_s = 0.0;         // in steps (each step's measured time)
    double saves_s = 0.0;         // blocked in checkpoint saves
    double validation_s = 0.0;    // in validation passes
    double unsaved_steps_s = 0.0; // step time since the last save: lost if the launch died now
    double lost_s = 0.0;          // earlier launches' steps redone after their restarts
    std::int64_t launches = 1;
    // Steps that count (run once) over the wall time.
    double goodput() const { return wall_s > 0 ? (steps_s - lost_s) / wall_s : 0.0; }
};

// The earlier launches' totals in `dir` (a resumed run's save folder), the steps each ran past
// its last save moved into lost_s; launches 0 when there is no ledger. SpecError for a
// corrupt one, naming the file.
RunTime read_goodput_ledger(const std::string& dir);

// The earlier launches' totals plus this one's so far.
RunTime run_so_far(const RunTime& earlier, const RunTime& launch);

void write_goodput_ledger(const std::string& dir, const RunTime& so_far);
core::Json to_json(const RunTime& t);

} // namespace trident::executor
