#include "opened_file.h"

#include "job_simulation.h"
#include "trident/core/job_loader.h"
#include "trident/core/spec_error.h"

#include <QTemporaryFile>

namespace trident::gui {
namespace {

std::string format_of(const core::Json& document) {
    if (!document.is_object()) return "";
    if (const auto it = document.find("format"); it != document.end() && it->is_string())
        return it->get<std::string>();
    // Chrome traces keep Trident's tag under otherData (other tools' keys stay free).
    if (const auto other = document.find("otherData");
        other != document.end() && other->is_object())
        if (const auto it = other->find("format"); it != other->end() && it->is_string())
            return it->get<std::string>();
    return "";
}

// A report records its job as a self-contained plan; load_job reads plans from files, so the
// job goes through a temporary one (which also validates it like any plan file).
core::JobSpec job_of_report(const core::Json& report, const std::string& path) {
    const auto job = report.find("job");
    if (job == report.end() || !job->is_object())
        throw core::SpecError(path + ": job", "missing (not a trident simulate --json report)");
    QTemporaryFile file;
    const std::string text = job->dump();
    if (!file.open() || file.write(text.data(), qint64(text.size())) != qint64(text.size()) ||
        !file.flush())
        throw core::SpecError(path, "cannot write a temporary plan file for its job");
    core::JobInputs inputs;
    inputs.plan = file.fileName().toStdString();
    return core::load_job(inputs);
}

} // namespace

FileKind file_kind(const core::Json& document, const std::string& path) {
    const std::string format = format_of(document);
    if (format == "trident.trace/1" || (document.is_object() && document.contains("traceEvents")))
        return FileKind::trace;
    if (format == "trident.plan/1") return FileKind::plan;
    if (format == "trident.report/1") return FileKind::report;
    throw core::SpecError(path, format.empty()
                                    ? "not a Trident trace, plan or report (no format tag)"
                                    : "cannot open a " + format + " file (expected a trace, " +
                                          "plan or report)");
}

OpenedFile open_trident_file(const std::string& path, const std::string& profile) {
    OpenedFile f;
    f.path = path;
    f.document = core::read_json_file(path, path);
    f.kind = file_kind(f.document, path);
    switch (f.kind) {
    case FileKind::trace:
        f.trace = core::read_chrome_trace(f.document, path);
        break;
    case FileKind::plan: {
        core::JobInputs inputs;
        inputs.plan = path;
        f.report = simulate_with_trace(core::load_job(inputs), profile);
        f.trace = f.report->trace;
        break;
    }
    case FileKind::report:
        // simulate --json writes no events; a report that carries them is shown as it is.
        if (const auto it = f.document.find("trace"); it != f.document.end() && it->is_object()) {
            f.trace = core::read_chrome_trace(*it, path + ": trace");
        } else {
            f.report = simulate_with_trace(job_of_report(f.document, path), profile);
            f.trace = f.report->trace;
        }
        break;
    }
    return f;
}

} // namespace trident::gui
