#pragma once
// The options every job-taking command shares: --model/--cluster/--nodes/--training/--plan and
// one flag per plan field, with Megatron-LM's long names accepted as aliases.
#include "trident/core/job_loader.h"

#include <CLI/CLI.hpp>

namespace trident::cli {

void add_job_options(CLI::App& app, core::JobInputs& inputs);
// Only the model, cluster (--nodes), training and plan-file inputs: what `plan` takes before
// its own search options. With `nodes_list`, --nodes is kept as text there (plan's list of
// cluster sizes) instead of setting inputs.nodes.
void add_spec_options(CLI::App& app, core::JobInputs& inputs, std::string* nodes_list = nullptr);

// The uneven-pipeline flags (--pipeline-layout, Megatron-Core's --decoder-first/last-pipeline-
// num-layers and --account-for-embedding/loss-in-pipeline-split): part of the job options,
// and pins of `plan`.
void add_split_options(CLI::App& app, core::JobInputs& inputs);

// FP8 (--precision, Megatron's --fp8-format, --fp8-recipe, --fp8-param-gather,
// --first-last-layers-bf16, …): part of the job options, and pins of `plan`.
void add_fp8_options(CLI::App& app, core::JobInputs& inputs);
// --data-parallel-sharding-strategy, --zero-stage, --use-megatron-fsdp, --use-torch-fsdp2,
// --num-distributed-optimizer-instances, --fsdp-prefetch-units.
void add_sharding_options(CLI::App& app, core::JobInputs& inputs);

// Megatron's optimizer and learning-rate flags (--lr, --min-lr, --lr-warmup-iters, …) and
// --seed: what `run` takes on top of the job options.
void add_optimizer_options(CLI::App& app, core::JobInputs& inputs);

} // namespace trident::cli
