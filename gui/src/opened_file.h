#pragma once
// A file the user opened, recognised by its content rather than its name: a Chrome trace
// (trident.trace/1) is shown as it is; a plan (trident.plan/1) or a simulation report
// (trident.report/1) is simulated, so it too has a timeline and a memory breakdown.
#include "trident/core/json_io.h"
#include "trident/core/trace.h"
#include "trident/simulator/simulate.h"

#include <optional>
#include <string>

namespace trident::gui {

enum class FileKind { trace, plan, report };

struct OpenedFile {
    FileKind kind = FileKind::trace;
    std::string path;
    core::Json document;                     // as read, for saving it again
    core::Trace trace;                       // the file's own, or its job's simulated one
    std::optional<simulator::Report> report; // plan and report files: the job simulated
};

// What a parsed document is; throws SpecError(path, ...) for JSON that is none of them.
FileKind file_kind(const core::Json& document, const std::string& path);

// Reads, recognises and (for plans and reports) simulates, on `profile` when given (see
// simulate_with_trace). Throws SpecError naming the file and the field at fault.
OpenedFile open_trident_file(const std::string& path, const std::string& profile = "");

} // namespace trident::gui
