#pragma once
// PipelineSplit: which transformer layers each virtual pipeline stage holds. By default every
// stage holds the same number; Megatron-Core also lets the first and last pipeline rank hold a
// different count (--decoder-first/last-pipeline-num-layers), count the embedding and the loss
// as a layer each (--account-for-embedding/loss-in-pipeline-split), or list every stage
// (`parallel.pipeline_layout`, Megatron's --pipeline-model-parallel-layout). Llama 3 405B was
// trained with pp 16 and a first and last stage one layer shorter (Dubey et al. 2024, §3.3).
#include "trident/core/model_spec.h"
#include "trident/core/parallel_plan.h"

#include <cstdint>
#include <string>
#include <vector>

namespace trident::core {

struct PipelineSplit {
    std::vector<std::int64_t> layers; // per virtual stage, in virtual-stage order
    std::vector<std::int64_t> first;  // the first layer of each virtual stage

    std::int64_t stages() const { return std::int64_t(layers.size()); }
    std::int64_t layers_of(std::int64_t virtual_stage) const;
    std::int64_t first_layer(std::int64_t virtual_stage) const;
    std::int64_t max_layers() const;
    // The virtual stage that holds `layer`, and the layer's place inside it (0-based).
    std::int64_t stage_of(std::int64_t layer) const;
    std::int64_t position(std::int64_t layer) const;
    bool even() const;
};

// The split a plan asks for. Throws SpecError naming the field and the real numbers when the
// layers cannot be split that way ("126 layers cannot fill pp 16 · vpp 2 evenly; …").
PipelineSplit pipeline_split(const ModelSpec& model, const ParallelPlan& plan);
// The split from layers per virtual stage (no checks beyond non-negative counts).
PipelineSplit split_of(std::vector<std::int64_t> layers);
// Whether the even split — with the embedding and/or loss counted as layers when the plan says
// so — fits the layers (what pipeline_split checks; the planner asks without an exception).
bool counted_split_fits(const ModelSpec& model, const ParallelPlan& plan);
// Does the plan ask for anything but the even split?
bool uneven_split_requested(const ParallelPlan& plan);

// Contiguous groups of the items [first_extra, layer_0 … layer_{n-1}, last_extra] — the
// embedding, the layers, the loss — over `stages` virtual stages, each stage but the first and
// last holding at least one layer, that minimise the heaviest stage (the bottleneck linear
// partition, solved by bisection on the bottleneck with a greedy fill from the last stage, so
// that leftover slack lands on the first stages, which hold the most activations under 1F1B).
// Returns layers per stage; empty when there are fewer layers than stages need.
std::vector<std::int64_t> balanced_layout(double first_extra, const std::vector<double>& layer_cost,
                                          double last_extra, std::int64_t stages);

// Megatron-Core's --pipeline-model-parallel-layout for a split: "Et*7|t*8|…|t*7L".
// Stages are separated by '|'; 'E' is the embedding (first stage only), 't' a transformer
// layer, 'm' a multi-token-prediction module (right before the loss), 'L' the loss (last stage
// only); "x*N" and "(…)*N" repeat.
std::string megatron_layout_string(const PipelineSplit& split, std::int64_t mtp_layers = 0);
// Layers per virtual stage from such a string; throws SpecError naming `field` and the
// offending character.
std::vector<std::int64_t> parse_megatron_layout(const std::string& text, const std::string& field);
// A command line's layout: layers per virtual stage "7,8,8,7", or Megatron's layout string.
std::vector<std::int64_t> parse_pipeline_layout(const std::string& text, const std::string& field);
// "8 per stage" or "7,8,8,…,8,7" (runs of equal counts written n×k: "7,8×14,7").
std::string layout_text(const PipelineSplit& split);

} // namespace trident::core
