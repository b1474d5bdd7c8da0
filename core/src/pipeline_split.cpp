#include "trident/core/pipeline_split.h"

#include "trident/core/spec_error.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <numeric>

namespace trident::core {

namespace {

std::string s(std::int64_t v) {
    return std::to_string(v);
}

const char* kHowToSplit =
    "give --decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers, "
    "--account-for-embedding-in-pipeline-split / --account-for-loss-in-pipeline-split or "
    "--pipeline-layout, or let the planner split (trident plan)";

// "pp·vpp = 4·2 = 8 virtual stages", or DualPipe's "pp = 4 stages (two copies of one split)".
std::string stages_text(const ParallelPlan& p) {
    if (placement_of(p.schedule) == StagePlacement::two_copies)
        return "pp = " + s(p.pp) + " stages (dualpipe's two copies share one split)";
    return "pp·vpp = " + s(p.pp) + "·" + s(p.vpp) + " = " + s(p.pp * p.vpp) + " virtual stages";
}

PipelineSplit listed_split(const ModelSpec& m, const ParallelPlan& p) {
    const std::string field = "parallel.pipeline_layout";
    if (p.first_stage_layers || p.last_stage_layers || p.account_for_embedding ||
        p.account_for_loss)
        throw SpecError(field, "lists every stage already; drop decoder_first/last_pipeline_num_"
                               "layers and account_for_embedding/loss_in_pipeline_split");
    const std::int64_t stages = p.model_stages();
    const auto n = std::int64_t(p.pipeline_layout.size());
    if (n != stages) throw SpecError(field, "has " + s(n) + " entries but " + stages_text(p));
    for (std::int64_t vs = 0; vs < n; ++vs) {
        const std::int64_t layers = p.pipeline_layout[std::size_t(vs)];
        if (layers < 0)
            throw SpecError(field + "[" + s(vs) + "]", "must be >= 0, got " + s(layers));
        if (layers == 0 && vs != 0 && vs != n - 1)
            throw SpecError(field + "[" + s(vs) + "]",
                            "virtual stage " + s(vs) +
                                " holds no layers (only the first and last may: they hold the "
                                "embedding and the loss)");
    }
    const std::int64_t sum =
        std::accumulate(p.pipeline_layout.begin(), p.pipeline_layout.end(), std::int64_t{0});
    if (sum != m.num_layers)
        throw SpecError(field,
                        "sums to " + s(sum) + " layers but the model has " + s(m.num_layers));
    return split_of(p.pipeline_layout);
}

// Megatron-Core's get_num_layers_to_build: the first and/or last pipeline rank hold the given
// counts, the other ranks share the rest evenly, and each rank's layers are split evenly over
// its vpp model chunks.
PipelineSplit first_last_split(const ModelSpec& m, const ParallelPlan& p) {
    const std::string field = p.first_stage_layers ? "parallel.decoder_first_pipeline_num_layers"
                                                   : "parallel.decoder_last_pipeline_num_layers";
    if (p.account_for_embedding || p.account_for_loss)
        throw SpecError(field, "cannot be combined with account_for_embedding/loss_in_pipeline_"
                               "split (Megatron-Core's rule)");
    if (p.pp < 2) throw SpecError(field, "needs pp >= 2, got pp " + s(p.pp));
    std::int64_t rest = m.num_layers, others = p.pp;
    for (const auto& given : {p.first_stage_layers, p.last_stage_layers})
        if (given) rest -= *given, --others;
    if (rest < 0 || (others == 0 && rest != 0) || (others > 0 && rest % others != 0))
        throw SpecError(field, "leaves " + s(rest) + " of the " + s(m.num_layers) +
                                   " layers for the other " + s(others) +
                                   " pipeline ranks, which must share them evenly");
    const std::int64_t middle = others > 0 ? rest / others : 0;
    std::vector<std::int64_t> per_rank(std::size_t(p.pp), middle);
    if (p.first_stage_layers) per_rank.front() = *p.first_stage_layers;
    if (p.last_stage_layers) per_rank.back() = *p.last_stage_layers;
    // DualPipe's stage r is rank r's chunk of copy 0: the counts are per stage.
    if (placement_of(p.schedule) == StagePlacement::two_copies) return split_of(per_rank);
    std::vector<std::int64_t> layers(std::size_t(p.model_stages()));
    for (std::int64_t r = 0; r < p.pp; ++r) {
        const std::int64_t n = per_rank[std::size_t(r)];
        if (n % p.vpp != 0 || (r != 0 && r != p.pp - 1 && n < p.vpp))
            throw SpecError(field, "pipeline rank " + s(r) + "'s " + s(n) +
                                       " layers cannot be split evenly over its vpp " + s(p.vpp) +
                                       " model chunks");
        for (std::int32_t c = 0; c < std::int32_t(p.vpp); ++c)
            layers[std::size_t(virtual_stage(p.schedule, c, std::int32_t(p.pp), std::int32_t(r)))] =
                n / p.vpp;
    }
    return split_of(layers);
}

// The even split, optionally counting the embedding and the loss as one layer each
// (Megatron-Core's --account-for-embedding/loss-in-pipeline-split).
PipelineSplit counted_split(const ModelSpec& m, const ParallelPlan& p) {
    const std::int64_t extra = std::int64_t(p.account_for_embedding) + p.account_for_loss;
    const std::int64_t total = m.num_layers + extra, stages = p.model_stages();
    if (counted_split_fits(m, p)) {
        std::vector<std::int64_t> layers(std::size_t(stages), total / stages);
        if (p.account_for_embedding) --layers.front();
        if (p.account_for_loss) --layers.back();
        return split_of(layers);
    }
    if (total % stages != 0) {
        if (extra == 0 && placement_of(p.schedule) == StagePlacement::two_copies)
            throw SpecError("parallel.pp", s(m.num_layers) + " layers cannot fill " +
                                               stages_text(p) + " evenly; " + kHowToSplit);
        if (extra == 0)
            throw SpecError(p.vpp > 1 ? "parallel.vpp" : "parallel.pp",
                            s(m.num_layers) + " layers cannot fill pp " + s(p.pp) + " · vpp " +
                                s(p.vpp) + " evenly; " + kHowToSplit);
        throw SpecError(p.account_for_embedding ? "parallel.account_for_embedding_in_pipeline_split"
                                                : "parallel.account_for_loss_in_pipeline_split",
                        s(m.num_layers) + " layers + " + s(extra) + " = " + s(total) +
                            " cannot fill pp " + s(p.pp) + " · vpp " + s(p.vpp) + " evenly");
    }
    throw SpecError("parallel.account_for_embedding_in_pipeline_split",
                    s(m.num_layers) + " layers are too few for pp " + s(p.pp) + " · vpp " +
                        s(p.vpp) + " with the embedding and loss counted as layers");
}

} // namespace

bool counted_split_fits(const ModelSpec& m, const ParallelPlan& p) {
    const std::int64_t extra = std::int64_t(p.account_for_embedding) + p.account_for_loss;
    const std::int64_t total = m.num_layers + extra, stages = p.model_stages();
    // Megatron-Core lets a counted stage hold the embedding or the loss alone (Llama 3 405B's
    // 126 layers over pp 16 · vpp 8 = 128 slots).
    if (stages < 1 || stages > total || total % stages != 0) return false;
    const std::int64_t per_stage = total / stages;
    return per_stage - std::int64_t(p.account_for_embedding) >= 0 &&
           per_stage - std::int64_t(p.account_for_loss) >= 0 && !(stages > 2 && per_stage < 1);
}

std::int64_t PipelineSplit::layers_of(std::int64_t vs) const {
    return layers.at(std::size_t(vs));
}
std::int64_t PipelineSplit::first_layer(std::int64_t vs) const {
    return first.at(std::size_t(vs));
}
std::int64_t PipelineSplit::max_layers() const {
    return layers.empty() ? 0 : *std::max_element(layers.begin(), layers.end());
}
std::int64_t PipelineSplit::stage_of(std::int64_t layer) const {
    // The last stage whose first layer is <= layer and that holds any.
    auto it = std::upper_bound(first.begin(), first.end(), layer);
    std::int64_t vs = std::int64_t(it - first.begin()) - 1;
    while (vs > 0 && layers[std::size_t(vs)] == 0) --vs;
    return std::max<std::int64_t>(vs, 0);
}
std::int64_t PipelineSplit::position(std::int64_t layer) const {
    return layer - first_layer(stage_of(layer));
}
bool PipelineSplit::even() const {
    return std::adjacent_find(layers.begin(), layers.end(), std::not_equal_to<>()) == layers.end();
}

PipelineSplit split_of(std::vector<std::int64_t> layers) {
    PipelineSplit split;
    split.first.reserve(layers.size());
    std::int64_t at = 0;
    for (std::int64_t n : layers) {
        split.first.push_back(at);
        at += n;
    }
    split.layers = std::move(layers);
    return split;
}

bool uneven_split_requested(const ParallelPlan& p) {
    return !p.pipeline_layout.empty() || p.first_stage_layers || p.last_stage_layers ||
           p.account_for_embedding || p.account_for_loss;
}

PipelineSplit pipeline_split(const ModelSpec& m, const ParallelPlan& p) {
    const std::int64_t counted = std::int64_t(p.account_for_embedding) + p.account_for_loss;
    if (p.model_stages() > m.num_layers + counted && p.pipeline_layout.empty())
        throw SpecError(p.vpp > 1 ? "parallel.vpp" : "parallel.pp",
                        stages_text(p) + " exceed the " + s(m.num_layers) + " layers");
    if (!p.pipeline_layout.empty()) return listed_split(m, p);
    if (p.first_stage_layers || p.last_stage_layers) return first_last_split(m, p);
    return counted_split(m, p);
}

std::vector<std::int64_t> balanced_layout(double first_extra, const std::vector<double>& cost,
                                          double last_extra, std::int64_t stages) {
    const auto n = std::int64_t(cost.size());
    if (stages < 1 || n < std::max<std::int64_t>(stages - 2, 0)) return {};
    if (stages == 1) return {n};
    // Items: the embedding, the layers, the loss. The greedy fill from the back at bottleneck
    // `cap`: each stage takes items while they fit, keeping a layer for every stage still to
    // fill (the first stage may be left the embedding alone, the last the loss alone). Taking
    // as much as fits is never worse, so the fill succeeds exactly when `cap` is achievable.
    std::vector<double> item;
    item.push_back(first_extra);
    item.insert(item.end(), cost.begin(), cost.end());
    item.push_back(last_extra);
    const auto fill = [&](double cap, std::vector<std::int64_t>* out) {
        std::vector<std::int64_t> layers(std::size_t(stages), 0);
        std::int64_t i = n + 1; // the next item to place, from the back
        for (std::int64_t st = stages - 1; st >= 1; --st) {
            // Items 0 … st-1 stay for stages 0 … st-1: the embedding and a layer each.
            double load = 0.0;
            bool took = false;
            while (i >= st && (!took || load + item[std::size_t(i)] <= cap)) {
                load += item[std::size_t(i)];
                took = true;
                if (i >= 1 && i <= n) ++layers[std::size_t(st)];
                --i;
            }
            if (load > cap) return false;
        }
        double load = 0.0; // the first stage takes what is left
        for (; i >= 0; --i) {
            load += item[std::size_t(i)];
            if (i >= 1 && i <= n) ++layers[0];
        }
        if (load > cap) return false;
        if (out) *out = std::move(layers);
        return true;
    };
    double lo = *std::max_element(item.begin(), item.end());
    double hi = std::accumulate(item.begin(), item.end(), 0.0);
    if (!fill(hi, nullptr)) return {};
    for (int iter = 0; iter < 64 && hi - lo > 1e-12 * hi; ++iter) {
        const double mid = 0.5 * (lo + hi);
        if (fill(mid, nullptr))
            hi = mid;
        else
            lo = mid;
    }
    std::vector<std::int64_t> layers;
    fill(hi, &layers);
    return layers;
}

std::string megatron_layout_string(const PipelineSplit& split, std::int64_t mtp_layers) {
    // Megatron-Core's PipelineParallelLayerLayout: stages separated by '|', 'E' the
    // embedding, 't' a transformer layer ("t*7" seven of them), 'm' a multi-token-prediction
    // module, 'L' the loss.
    std::string out;
    for (std::int64_t vs = 0; vs < split.stages(); ++vs) {
        if (vs > 0) out += '|';
        if (vs == 0) out += 'E';
        const std::int64_t n = split.layers_of(vs);
        if (n == 1) out += 't';
        if (n > 1) out += "t*" + s(n);
        if (vs == split.stages() - 1) out += std::string(std::size_t(mtp_layers), 'm') + 'L';
    }
    return out;
}

namespace {

// Expands "x*N" and "(…)*N" in a Megatron layout string.
std::string expand_layout(const std::string& text, std::size_t& at, const std::string& field,
                          int depth) {
    if (depth > 16) throw SpecError(field, "nests parentheses more than 16 deep");
    std::string out;
    while (at < text.size() && text[at] != ')') {
        std::string unit;
        const char c = text[at];
        if (c == '(') {
            ++at;
            unit = expand_layout(text, at, field, depth + 1);
            if (at >= text.size() || text[at] != ')')
                throw SpecError(field, "\"" + text + "\": a '(' is never closed");
            ++at;
        } else if (c == ' ' || c == ',') {
            ++at;
            continue;
        } else if (c == 'E' || c == 't' || c == 'm' || c == 'L' || c == '|') {
            unit = std::string(1, c);
            ++at;
        } else {
            throw SpecError(field, "\"" + text + "\": unexpected '" + std::string(1, c) +
                                       "' at position " + std::to_string(at) +
                                       " (stages are E, t, m, L separated by '|')");
        }
        std::int64_t times = 1;
        if (at < text.size() && text[at] == '*') {
            std::size_t end = ++at;
            while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end]))) ++end;
            if (end == at || end - at > 6)
                throw SpecError(field, "\"" + text + "\": '*' needs a repeat count");
            times = std::stoll(text.substr(at, end - at));
            at = end;
        }
        if (double(out.size()) + double(unit.size()) * double(times) > 1e6)
            throw SpecError(field, "\"" + text + "\" expands to over a million stages");
        for (std::int64_t k = 0; k < times; ++k) out += unit;
    }
    return out;
}

} // namespace

std::vector<std::int64_t> parse_megatron_layout(const std::string& text, const std::string& field) {
    std::size_t at = 0;
    const std::string flat = expand_layout(text, at, field, 0);
    if (at != text.size()) throw SpecError(field, "\"" + text + "\": an unmatched ')'");
    std::vector<std::int64_t> layers(1, 0);
    std::size_t stage_start = 0;
    for (std::size_t i = 0; i < flat.size(); ++i) {
        const char c = flat[i];
        if (c == '|') {
            layers.push_back(0);
            stage_start = i + 1;
        } else if (c == 't') {
            ++layers.back();
        } else if (c == 'E' && (layers.size() > 1 || i != stage_start)) {
            throw SpecError(field,
                            "\"" + text + "\": 'E' (the embedding) must open the first stage");
        } else if (c == 'L' && (flat.find('|', i) != std::string::npos || i + 1 != flat.size())) {
            throw SpecError(field, "\"" + text + "\": 'L' (the loss) must close the last stage");
        } else if (c == 'm' && flat.find_first_not_of('m', i) != flat.find('L', i)) {
            // Trident runs the MTP modules (model.mtp_num_layers) with the loss they feed.
            throw SpecError(field, "\"" + text +
                                       "\": 'm' (a multi-token-prediction module) goes right "
                                       "before 'L', in the last stage");
        }
    }
    if (flat.find('E') == std::string::npos || flat.find('L') == std::string::npos)
        throw SpecError(field,
                        "\"" + text + "\": needs 'E' in the first stage and 'L' in the last");
    return layers;
}

std::vector<std::int64_t> parse_pipeline_layout(const std::string& text, const std::string& field) {
    if (text.find_first_of("EtL") != std::string::npos) return parse_megatron_layout(text, field);
    std::vector<std::int64_t> layers;
    std::size_t start = 0;
    while (start <= text.size()) {
        const std::size_t comma = std::min(text.find(',', start), text.size());
        const std::string item = text.substr(start, comma - start);
        char* end = nullptr;
        const long long v = std::strtoll(item.c_str(), &end, 10);
        if (item.empty() || *end != '\0' || v < 0 || item.size() > 9)
            throw SpecError(field, "expected layers per virtual stage like 7,8,8,7 or Megatron's "
                                   "\"Et*7|t*8|t*8|t*7L\", got \"" +
                                       text + "\"");
        layers.push_back(v);
        start = comma + 1;
    }
    return layers;
}

std::string layout_text(const PipelineSplit& split) {
    if (split.even() && !split.layers.empty()) return s(split.layers.front()) + " per stage";
    std::string out;
    for (std::size_t i = 0; i < split.layers.size();) {
        std::size_t j = i;
        while (j < split.layers.size() && split.layers[j] == split.layers[i]) ++j;
        if (!out.empty()) out += ',';
        out += s(split.layers[i]);
        if (j - i > 1) out += "×" + std::to_string(j - i);
        i = j;
    }
    return out;
}

} // namespace trident::core
