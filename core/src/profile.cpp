#include "trident/core/profile.h"

#include "profile_rows.h"
#include "trident/core/presets.h"
#include "trident/core/spec_error.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <set>

namespace trident::core {
namespace detail {

const Json& array_field(ObjectReader& r, std::string_view key) {
    const Json& v = r.require(key);
    if (!v.is_array() || v.empty()) throw SpecError(r.field(key), "must be a non-empty array");
    return v;
}

// Reads a row of positive numbers of a given length.
std::vector<double> row(const Json& v, std::size_t n, const std::string& field) {
    if (!v.is_array() || v.size() != n)
        throw SpecError(field, "must be an array of " + std::to_string(n) + " numbers");
    std::vector<double> out;
    for (std::size_t i = 0; i < n; ++i) {
        if (!v[i].is_number()) throw SpecError(field, "must hold numbers only");
        out.push_back(v[i].get<double>());
        if (!(out.back() >= 0.0) || !std::isfinite(out.back()))
            throw SpecError(field, "must hold finite non-negative numbers");
    }
    return out;
}

} // namespace detail

using detail::array_field;
using detail::row;

double bus_bandwidth_factor(Collective c, std::int64_t n) {
    const double g = double(n);
    switch (c) {
    case Collective::all_reduce:
        return 2.0 * (g - 1.0) / g;
    case Collective::all_gather:
    case Collective::reduce_scatter:
    case Collective::all_to_all:
        return (g - 1.0) / g;
    case Collective::broadcast:
    case Collective::send_recv:
        return 1.0;
    }
    return 1.0;
}

double Profile::Curve::at(double x, bool* outside) const {
    const double lx = std::log(std::max(x, 1e-300));
    std::size_t i = 0;
    double f = 0.0;
    if (bracket_log_axis(log_x, lx, i, f)) {
        *outside = false;
        if (log_x.size() == 1) return std::exp(log_y[0]);
        return std::exp(log_y[i] + f * (log_y[i + 1] - log_y[i]));
    }
    *outside = true;
    if (lx < log_x.front()) return std::exp(log_y.front()); // latency floor
    // Beyond the largest point: bandwidth-bound, time grows linearly in size.
    return std::exp(log_y.back()) * x / std::exp(log_x.back());
}

namespace {

// A log-log curve from (x, y) rows; two rows at one x are an error naming `field` and `what`.
template <typename Curve>
Curve curve_of(std::vector<std::pair<double, double>> points, const std::string& field,
               const std::string& what) {
    std::sort(points.begin(), points.end());
    Curve c;
    for (auto [x, y] : points) {
        if (!c.log_x.empty() && std::log(x) <= c.log_x.back())
            throw SpecError(field, "has two rows for " + what);
        c.log_x.push_back(std::log(x));
        c.log_y.push_back(std::log(y));
    }
    return c;
}

} // namespace

Profile Profile::from_json(const Json& j, const std::string& path) {
    ObjectReader top(j, path);
    if (top.has("format")) top.expect_format("trident.profile/1");
    Profile p;
    p.name_ = top.string("name");
    p.read_provenance(top);
    p.read_device(top);
    ObjectReader kernels(top.require("kernels"), top.field("kernels"));
    p.read_gemm(kernels, top.field("device.peak_flops_per_s"));
    p.read_grouped_gemm(kernels);
    p.read_attention(kernels);
    p.read_memory_bound(kernels);
    kernels.finish();
    p.read_fabrics(top);
    top.finish();
    return p;
}

void Profile::read_provenance(ObjectReader& top) {
    ObjectReader r(top.require("provenance"), top.field("provenance"));
    provenance_.kind = r.string("kind");
    if (provenance_.kind != "measured" && provenance_.kind != "derived")
        throw SpecError(r.field("kind"), "must be \"measured\" or \"derived\"");
    provenance_.method = r.string_or("method", "");
    if (const Json* s = r.get("sources")) {
        if (!s->is_array()) throw SpecError(r.field("sources"), "must be an array of strings");
        for (const Json& x : *s) {
            if (!x.is_string()) throw SpecError(r.field("sources"), "must be an array of strings");
            provenance_.sources.push_back(x.get<std::string>());
        }
    }
    provenance_.generated_by = r.string_or("generated_by", "");
    provenance_.date = r.string_or("date", "");
    r.get("measured_on");
    r.get("command");
    r.finish();
}

void Profile::read_device(ObjectReader& top) {
    ObjectReader r(top.require("device"), top.field("device"));
    ObjectReader peaks(r.require("peak_flops_per_s"), r.field("peak_flops_per_s"));
    for (auto name : kDtypeNames)
        if (peaks.has(name))
            peak_[parse_dtype(std::string(name), peaks.field(name))] =
                peaks.number(name, 1.0, 1.0e20);
    peaks.finish();
    // The device generation ("ampere", "hopper", "blackwell", "cpu"): what `trident accuracy`
    // groups published runs by. Optional; a profile without it has no error band.
    architecture_ = r.string_or("architecture", "");
    memory_bytes_ = r.number("memory_bytes", 1.0, 1.0e15);
    memory_bandwidth_ = r.number("memory_bandwidth_bytes_per_s", 1.0, 1.0e15);
    // The SMs a bandwidth-bound communication kernel occupies, of the device's: what compute
    // loses while a collective overlaps it. Both or neither.
    if (r.has("sms") || r.has("communication_sms")) {
        sms_ = r.number("sms", 1.0, 1.0e6);
        overlap_slowdown_ = r.number("communication_sms", 0.0, sms_) / sms_;
    }
    // Transformer Engine's userbuffers, not NCCL, run the tensor-parallel overlap.
    tp_overlap_slowdown_ = overlap_slowdown_;
    if (r.has("tp_overlap_sms")) {
        if (sms_ == 0) throw SpecError(r.field("tp_overlap_sms"), "needs device.sms beside it");
        tp_overlap_slowdown_ = r.number("tp_overlap_sms", 0.0, sms_) / sms_;
    }
    // Host time the framework takes to issue one operation (Python, dispatch, launch): a pass
    // of many small kernels runs at the rate the host issues them.
    if (r.has("host_op_issue_s")) host_op_issue_s_ = r.number("host_op_issue_s", 0.0, 1.0e-2);
    if (const Json* recipes = r.get("fp8_recipes")) {
        ObjectReader fr(*recipes, r.field("fp8_recipes"));
        for (const char* name : {"delayed", "tensorwise", "blockwise", "mxfp8"})
            if (fr.has(name)) fp8_recipes_[name] = fr.number(name, 1e-3, 10.0);
        fr.finish();
        if (!fp8_recipes_.empty() && !peak_.contains(Dtype::fp8))
            throw SpecError(r.field("fp8_recipes"), "needs an fp8 peak in peak_flops_per_s");
    }
    // NVFP4 runs on the fp4 GEMM table at its own rate (device.fp4_recipes).
    if (const Json* recipes = r.get("fp4_recipes")) {
        ObjectReader fr(*recipes, r.field("fp4_recipes"));
        if (fr.has("nvfp4")) fp8_recipes_["nvfp4"] = fr.number("nvfp4", 1e-3, 10.0);
        fr.finish();
        if (fp8_recipes_.contains("nvfp4") && !peak_.contains(Dtype::fp4))
            throw SpecError(r.field("fp4_recipes"), "needs an fp4 peak in peak_flops_per_s");
    }
    r.finish();
}

double Profile::fp8_gemm_rate(const std::string& recipe) const {
    const auto it = fp8_recipes_.find(recipe);
    return it == fp8_recipes_.end() ? 0.0 : it->second;
}

void Profile::read_attention(ObjectReader& kernels) {
    ObjectReader a(kernels.require("attention"), kernels.field("attention"));
    for (auto name : kDtypeNames) {
        if (!a.has(name)) continue;
        const Dtype d = parse_dtype(std::string(name), a.field(name));
        const Json& rows = array_field(a, name);
        std::map<std::pair<std::int64_t, bool>, std::vector<std::vector<double>>> groups;
        for (std::size_t i = 0; i < rows.size(); ++i) {
            auto rw = row(rows[i], 6, a.field(name) + "[" + std::to_string(i) + "]");
            if (rw[0] < 1 || rw[1] < 1 || rw[2] < 1 || rw[4] <= 0 || rw[5] <= 0)
                throw SpecError(a.field(name) + "[" + std::to_string(i) + "]",
                                "needs positive sizes and times");
            groups[{std::int64_t(rw[2]), rw[3] != 0.0}].push_back(rw);
        }
        for (auto& [key, list] : groups) {
            // Two grids over (batch_heads, seq): the forward and the backward time.
            std::vector<std::vector<double>> forward, backward;
            for (const auto& rw : list) {
                forward.push_back({rw[0], rw[1], rw[4]});
                backward.push_back({rw[0], rw[1], rw[5]});
            }
            const std::string what = "batch_heads×seq (head_dim " + std::to_string(key.first) + ")";
            AttentionGrid grid{LogGrid::from_rows(forward, 2, a.field(name), what),
                               LogGrid::from_rows(backward, 2, a.field(name), what)};
            attention_[d][key] = std::move(grid);
        }
    }
    a.finish();
}

void Profile::read_memory_bound(ObjectReader& kernels) {
    ObjectReader mb(kernels.require("memory_bound"), kernels.field("memory_bound"));
    for (std::size_t k = 0; k < kMemoryKernelNames.size(); ++k) {
        const auto name = kMemoryKernelNames[k];
        if (!mb.has(name)) continue;
        const Json& rows = array_field(mb, name);
        std::vector<std::pair<double, double>> points;
        for (std::size_t i = 0; i < rows.size(); ++i) {
            auto rw = row(rows[i], 2, mb.field(name) + "[" + std::to_string(i) + "]");
            if (rw[0] <= 0 || rw[1] <= 0)
                throw SpecError(mb.field(name) + "[" + std::to_string(i) + "]",
                                "needs positive bytes and time");
            points.emplace_back(rw[0], rw[1]);
        }
        memory_bound_[MemoryKernel(k)] =
            curve_of<Curve>(std::move(points), mb.field(name), "the same size");
    }
    mb.finish();
}

void Profile::read_fabrics(ObjectReader& top) {
    const Json& fabrics = top.require("fabrics");
    ObjectReader all(fabrics, top.field("fabrics"));
    if (!fabrics.is_object() || fabrics.empty())
        throw SpecError(top.field("fabrics"), "must name at least one fabric");
    for (auto it = fabrics.begin(); it != fabrics.end(); ++it) {
        all.get(it.key());
        ObjectReader r(it.value(), all.field(it.key()));
        Fabric f;
        r.string_or("scope", "");
        f.alpha_s = r.number("alpha_s", 0.0, 1.0);
        f.bus_bandwidth = r.number("bus_bandwidth_bytes_per_s", 1.0, 1.0e15);
        // The SMs (NCCL channels) this fabric's collectives occupy; else the device's figure.
        f.overlap_slowdown = overlap_slowdown_;
        if (r.has("communication_sms")) {
            if (sms_ == 0)
                throw SpecError(r.field("communication_sms"), "needs device.sms beside it");
            f.overlap_slowdown = r.number("communication_sms", 0.0, sms_) / sms_;
        }
        ObjectReader cs(r.require("collectives"), r.field("collectives"));
        for (std::size_t c = 0; c < kCollectiveNames.size(); ++c) {
            const auto name = kCollectiveNames[c];
            if (!cs.has(name)) continue;
            const Json& rows = array_field(cs, name);
            std::map<std::int64_t, std::vector<std::pair<double, double>>> by_group;
            for (std::size_t i = 0; i < rows.size(); ++i) {
                auto rw = row(rows[i], 3, cs.field(name) + "[" + std::to_string(i) + "]");
                if (rw[0] < 2 || rw[1] <= 0 || rw[2] <= 0)
                    throw SpecError(cs.field(name) + "[" + std::to_string(i) + "]",
                                    "needs group >= 2, positive bytes and time");
                by_group[std::int64_t(rw[0])].emplace_back(rw[1], rw[2]);
            }
            for (auto& [group, points] : by_group) {
                f.tables[{int(c), group}] =
                    curve_of<Curve>(std::move(points), cs.field(name),
                                    "group " + std::to_string(group) + " and one size");
            }
        }
        cs.finish();
        r.finish();
        fabrics_[it.key()] = std::move(f);
    }
}

double Profile::peak_flops_per_s(Dtype d) const {
    auto it = find_rate_table(peak_, d);
    if (it == peak_.end())
        throw SpecError("profile." + name_ + ".device.peak_flops_per_s",
                        "has no " + to_string(d) + " peak");
    return it->second;
}

Timing Profile::attention(Dtype d, std::int64_t bh, std::int64_t seq, std::int64_t head_dim,
                          bool causal, bool backward) const {
    auto it = find_rate_table(attention_, d);
    if (it == attention_.end())
        throw SpecError("profile." + name_ + ".kernels.attention",
                        "has no " + to_string(d) + " table");
    if (bh <= 0 || seq <= 0) return {};
    // Nearest tabulated head dim with this mask; time scales with FLOPs (∝ head_dim).
    const AttentionGrid* grid = nullptr;
    std::int64_t tab_dim = 0;
    for (const auto& [key, g] : it->second)
        if (key.second == causal &&
            (!grid || std::llabs(key.first - head_dim) < std::llabs(tab_dim - head_dim))) {
            grid = &g;
            tab_dim = key.first;
        }
    if (!grid)
        throw SpecError("profile." + name_ + ".kernels.attention",
                        std::string("has no ") + (causal ? "causal" : "non-causal") + " rows");
    std::string fallback;
    if (tab_dim != head_dim)
        fallback = "attention head_dim " + std::to_string(head_dim) + " scaled from " +
                   std::to_string(tab_dim);
    // Clamp into the table and scale by FLOPs (∝ bh · seq²) outside it.
    const LogGrid& g = backward ? grid->backward : grid->forward;
    const double cbh = std::clamp(double(bh), g.front(0), g.back(0));
    const double cseq = std::clamp(double(seq), g.front(1), g.back(1));
    if (cbh != double(bh) || cseq != double(seq)) {
        if (!fallback.empty()) fallback += "; ";
        fallback += "attention " + std::to_string(bh) + "x" + std::to_string(seq) +
                    " outside the table: FLOP-scaled";
    }
    const double point[2] = {cbh, cseq};
    const double scale =
        double(bh) / cbh * std::pow(double(seq) / cseq, 2.0) * double(head_dim) / double(tab_dim);
    return {*g.at(point) * scale, fallback};
}

Timing Profile::memory_bound(MemoryKernel kernel, double bytes) const {
    auto it = memory_bound_.find(kernel);
    if (it == memory_bound_.end()) {
        kernel = forward_kernel(kernel);
        it = memory_bound_.find(kernel);
    }
    if (it == memory_bound_.end())
        throw SpecError("profile." + name_ + ".kernels.memory_bound",
                        "has no " + std::string(kMemoryKernelNames[int(kernel)]) + " table");
    if (bytes <= 0) return {};
    bool outside = false;
    const double t = it->second.at(bytes, &outside);
    return {t, outside ? std::string(kMemoryKernelNames[int(kernel)]) + " size outside the table"
                       : ""};
}

double Profile::overlap_slowdown(const std::string& fabric) const {
    const auto f = fabrics_.find(fabric);
    if (f == fabrics_.end())
        throw SpecError("profile." + name_ + ".fabrics", "has no fabric \"" + fabric + "\"");
    return f->second.overlap_slowdown;
}

Timing Profile::collective(const std::string& fabric, Collective c, std::int64_t group,
                           double bytes) const {
    auto f = fabrics_.find(fabric);
    if (f == fabrics_.end())
        throw SpecError("profile." + name_ + ".fabrics", "has no fabric \"" + fabric + "\"");
    if (group <= 1 || bytes <= 0) return {};
    const Fabric& fab = f->second;
    auto t = fab.tables.find({int(c), group});
    if (t != fab.tables.end()) {
        bool outside = false;
        const double s = t->second.at(bytes, &outside);
        return {s, outside ? fabric + " " + std::string(kCollectiveNames[int(c)]) +
                                 " size outside the table"
                           : ""};
    }
    // Between two tabulated group sizes: interpolate in log(group) at this size.
    auto above = fab.tables.lower_bound({int(c), group});
    if (above != fab.tables.end() && above->first.first == int(c) && above != fab.tables.begin()) {
        auto below = std::prev(above);
        if (below->first.first == int(c)) {
            bool out_low = false, out_high = false;
            const double lo = std::log(below->second.at(bytes, &out_low));
            const double hi = std::log(above->second.at(bytes, &out_high));
            const double f =
                (std::log(double(group)) - std::log(double(below->first.second))) /
                (std::log(double(above->first.second)) - std::log(double(below->first.second)));
            return {std::exp(lo + f * (hi - lo)),
                    out_low || out_high ? fabric + " " + std::string(kCollectiveNames[int(c)]) +
                                              " size outside the table"
                                        : ""};
        }
    }
    // α–β model (nccl-tests conventions): ring steps of latency α, then bytes at bus bandwidth.
    const double n = double(group);
    double steps = n - 1.0;
    if (c == Collective::all_reduce) steps = 2.0 * (n - 1.0);
    if (c == Collective::broadcast) steps = std::ceil(std::log2(n));
    if (c == Collective::send_recv) steps = 1.0;
    const double seconds =
        steps * fab.alpha_s + bus_bandwidth_factor(c, group) * bytes / fab.bus_bandwidth;
    return {seconds, fabric + " " + std::string(kCollectiveNames[int(c)]) + " group " +
                         std::to_string(group) + " not in the table: alpha-beta"};
}

} // namespace trident::core
