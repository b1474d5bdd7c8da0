#include "trident/executor/run_goodput.h"

#include "trident/core/atomic_file.h"
#include "trident/core/spec_error.h"

#include <filesystem>
#include <fstream>
#include <sstream>

namespace trident::executor {
namespace {

const char* kLedger = "goodput.json";

} // namespace

RunTime read_goodput_ledger(const std::string& dir) {
    const std::filesystem::path path = std::filesystem::path(dir) / kLedger;
    RunTime t;
    t.launches = 0;
    std::ifstream in(path);
    if (!in) return t;
    std::stringstream text;
    text << in.rdbuf();
    const std::string field = path.string();
    try {
        const core::Json ledger = core::parse_json_text(text.str(), field);
        core::ObjectReader r(ledger, field);
        r.expect_format("trident.goodput/1");
        t.launches = r.integer("launches", 1, 1 << 30);
        t.wall_s = r.number("wall_s", 0.0, 1e12);
        t.startup_s = r.number("startup_s", 0.0, 1e12);
        t.steps_s = r.number("steps_s", 0.0, 1e12);
        t.saves_s = r.number("saves_s", 0.0, 1e12);
        t.validation_s = r.number("validation_s", 0.0, 1e12);
        t.lost_s = r.number("lost_s", 0.0, 1e12) + r.number("unsaved_steps_s", 0.0, 1e12);
        r.string_or("fraction_note", "");
        r.number_or("goodput", 0.0, -1e12, 1e12);
        r.finish();
    } catch (const core::SpecError& e) {
        throw core::SpecError(e.field(), e.reason() + " (delete it to start the count afresh)");
    }
    return t;
}

RunTime run_so_far(const RunTime& earlier, const RunTime& launch) {
    RunTime t = launch;
    t.launches = earlier.launches + 1;
    t.wall_s += earlier.wall_s;
    t.startup_s += earlier.startup_s;
    t.steps_s += earlier.steps_s;
    t.saves_s += earlier.saves_s;
    t.validation_s += earlier.validation_s;
    t.lost_s += earlier.lost_s;
    return t;
}

core::Json to_json(const RunTime& t) {
    return {{"launches", t.launches},   {"wall_s", t.wall_s},
            {"startup_s", t.startup_s}, {"steps_s", t.steps_s},
            {"saves_s", t.saves_s},     {"validation_s", t.validation_s},
            {"lost_s", t.lost_s},       {"unsaved_steps_s", t.unsaved_steps_s},
            {"goodput", t.goodput()}};
}

void write_goodput_ledger(const std::string& dir, const RunTime& so_far) {
    core::Json j = to_json(so_far);
    j["format"] = "trident.goodput/1";
    j["fraction_note"] = "goodput = (steps_s - lost_s) / wall_s over every launch; the time "
                         "between launches (queue, detection) is not seen";
    core::write_file_atomically((std::filesystem::path(dir) / kLedger).string(), j.dump(2) + "\n",
                                "--save");
}

} // namespace trident::executor
