#include "trident/core/trace.h"

#include "trident/core/spec_error.h"

#include <ostream>
#include <set>

namespace trident::core {
namespace {

constexpr double kMicroseconds = 1.0e6;

template <std::size_t N>
std::size_t index_of(std::string_view word, const std::string_view (&names)[N],
                     const std::string& field) {
    return enum_index(std::string(word), std::span<const std::string_view>(names, N), field);
}

} // namespace

void write_chrome_trace(const Trace& trace, std::ostream& out) {
    // Streamed by hand rather than through a JSON object: traces reach 10^5–10^6 events.
    out << "{\"traceEvents\":[\n";
    std::set<std::int32_t> ranks;
    for (const auto& e : trace.events) ranks.insert(e.rank);
    bool first = true;
    const auto comma = [&] {
        if (!first) out << ",\n";
        first = false;
    };
    for (std::int32_t r : ranks) {
        comma();
        out << R"({"ph":"M","name":"process_name","pid":)" << r << R"(,"args":{"name":"rank )" << r
            << "\"}}";
        for (std::size_t s = 0; s < std::size(kStreamNames); ++s) {
            comma();
            out << R"({"ph":"M","name":"thread_name","pid":)" << r << ",\"tid\":" << s
                << R"(,"args":{"name":")" << kStreamNames[s] << "\"}}";
        }
    }
    char number[64];
    const auto fmt = [&](double v) {
        std::snprintf(number, sizeof number, "%.17g", v);
        return number;
    };
    for (const auto& e : trace.events) {
        comma();
        out << R"({"ph":"X","name":")" << kEventKindNames[int(e.kind)] << R"(","pid":)" << e.rank
            << ",\"tid\":" << int(e.stream) << ",\"ts\":" << fmt(e.start_s * kMicroseconds);
        out << ",\"dur\":" << fmt((e.end_s - e.start_s) * kMicroseconds)
            << ",\"args\":{\"microbatch\":" << e.microbatch << ",\"chunk\":" << e.chunk;
        if (e.stage >= 0) out << ",\"stage\":" << e.stage;
        out << ",\"bytes\":" << fmt(e.bytes);
        out << ",\"flops\":" << fmt(e.flops) << "}}";
    }
    out << "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{\"format\":\"trident.trace/1\","
        << "\"source\":\"" << trace.source << "\"";
    if (!trace.plan.is_null()) out << ",\"plan\":" << trace.plan.dump();
    out << "}}\n";
}

Trace read_chrome_trace(const Json& document, const std::string& path) {
    ObjectReader top(document, path);
    const Json& events = top.require("traceEvents");
    if (!events.is_array()) throw SpecError(path + ".traceEvents", "must be an array");
    Trace trace;
    if (const Json* other = top.get("otherData")) {
        ObjectReader o(*other, path + ".otherData");
        o.expect_format("trident.trace/1");
        trace.source = o.string_or("source", "");
        if (const Json* plan = o.get("plan")) {
            if (!plan->is_object()) throw SpecError(o.field("plan"), "must be an object");
            trace.plan = *plan;
        }
        o.finish();
    } else {
        throw SpecError(path + ".otherData", "missing (not a Trident trace)");
    }
    top.get("displayTimeUnit");
    top.finish();
    std::size_t index = 0;
    for (const Json& item : events) {
        const std::string field = path + ".traceEvents[" + std::to_string(index++) + "]";
        ObjectReader r(item, field);
        const std::string ph = r.string("ph");
        if (ph == "M") continue; // process/thread names
        if (ph != "X")
            throw SpecError(field + ".ph", "expected \"X\" or \"M\", got \"" + ph + "\"");
        TraceEvent e;
        e.kind = EventKind(index_of(r.string("name"), kEventKindNames, r.field("name")));
        e.rank = std::int32_t(r.integer("pid", 0, INT32_MAX));
        const std::int64_t tid = r.integer("tid", 0, std::int64_t(std::size(kStreamNames)) - 1);
        e.stream = Stream(tid);
        e.start_s = r.number("ts", 0.0, 1.0e15) / kMicroseconds;
        e.end_s = e.start_s + r.number("dur", 0.0, 1.0e15) / kMicroseconds;
        ObjectReader args(r.require("args"), r.field("args"));
        e.microbatch = std::int32_t(args.integer("microbatch", -1, INT32_MAX));
        e.chunk = std::int32_t(args.integer("chunk", -1, INT32_MAX));
        e.stage = std::int32_t(args.integer_or("stage", -1, -1, INT32_MAX));
        e.bytes = args.number("bytes", 0.0, 1.0e30);
        e.flops = args.number("flops", 0.0, 1.0e30);
        args.finish();
        r.finish();
        trace.events.push_back(e);
    }
    return trace;
}

} // namespace trident::core
