#include "trident/core/job_loader.h"

#include "trident/core/pipeline_split.h"
#include "trident/core/presets.h"
#include "trident/core/spec_error.h"

#include <charconv>
#include <cstdlib>
#include <filesystem>

namespace trident::core {
namespace {

// String references inside a plan file are tried relative to the plan file's folder too.
Json relative_to(const Json* reference, const std::filesystem::path& dir) {
    if (!reference) return nullptr;
    if (reference->is_string() && !dir.empty()) {
        const std::string name = reference->get<std::string>();
        std::error_code ec;
        if (!std::filesystem::exists(name, ec) && std::filesystem::exists(dir / name, ec))
            return (dir / name).string();
    }
    return *reference;
}

// A dataset prefix P (P.bin + P.idx) in a plan file: tried relative to the plan's folder too.
std::string dataset_relative_to(const std::string& prefix, const std::filesystem::path& dir) {
    std::error_code ec;
    const auto here = [&](const std::filesystem::path& p) {
        return std::filesystem::exists(p.string() + ".idx", ec) || std::filesystem::exists(p, ec);
    };
    if (dir.empty() || std::filesystem::path(prefix).is_absolute() || here(prefix)) return prefix;
    return here(dir / prefix) ? (dir / prefix).string() : prefix;
}

// Adds the file a spec came from to its error, keeping the field as the first word.
template <typename F>
auto from_source(const std::string& source, F&& parse) {
    try {
        return parse();
    } catch (const SpecError& e) {
        // A syntax error already names the file as its field: said once is enough.
        if (source.empty() || e.field() == source) throw;
        throw SpecError(e.field(), e.reason() + " [in " + source + "]");
    }
}

std::string source_of(const Json& reference) {
    if (!reference.is_string()) return "";
    std::error_code ec;
    const std::string s = reference.get<std::string>();
    return std::filesystem::is_regular_file(s, ec) ? s : "preset " + s;
}

Json parse_dp_flag(const std::string& value) {
    if (value == "auto") return "auto";
    std::int64_t dp = 0;
    auto [end, err] = std::from_chars(value.data(), value.data() + value.size(), dp);
    if (err != std::errc() || end != value.data() + value.size())
        throw SpecError("parallel.dp",
                        "must be a positive integer or \"auto\", got \"" + value + "\"");
    return dp;
}

Json recompute_object(const Json* existing) {
    if (!existing) return Json::object();
    if (existing->is_string()) return Json{{"granularity", *existing}};
    return *existing;
}

// What a plan file contributes before command-line options override it.
struct PlanFile {
    Json model_ref, cluster_ref, training_ref, parallel = Json::object();
    std::string source, profile, data_path, data_split;
};

// `inline_plan`: a plan object given in place of in.plan (load_job's second form).
PlanFile read_plan_file(const JobInputs& in, const Json* inline_plan = nullptr,
                        const std::string& inline_source = "") {
    PlanFile f;
    if (!in.plan && !inline_plan) return f;
    if (in.plan && inline_plan)
        throw SpecError("plan", "give a plan reference or an inline plan, not both");
    const Json plan_file = inline_plan ? resolve_reference(*inline_plan, PresetKind::plan, "plan")
                                       : resolve_reference(*in.plan, PresetKind::plan, "plan");
    f.source = inline_plan ? inline_source : source_of(Json(*in.plan));
    std::filesystem::path plan_dir;
    std::error_code ec;
    if (in.plan && std::filesystem::is_regular_file(*in.plan, ec))
        plan_dir = std::filesystem::path(*in.plan).parent_path();
    from_source(f.source, [&] {
        ObjectReader top(plan_file, "");
        top.expect_format("trident.plan/1");
        top.string_or("name", "");
        top.string_or("source", "");
        top.string_or("description", "");
        if (const Json* planner = top.get("planner"); planner && !planner->is_object())
            throw SpecError("planner", "must be a JSON object (what the planner recorded)");
        f.model_ref = relative_to(top.get("model"), plan_dir);
        f.cluster_ref = relative_to(top.get("cluster"), plan_dir);
        f.training_ref = relative_to(top.get("training"), plan_dir);
        if (const Json* profile = top.get("profile")) {
            if (!profile->is_string())
                throw SpecError("profile", "must be a preset name or a file path (a string)");
            f.profile = relative_to(profile, plan_dir).get<std::string>();
        }
        if (const Json* data = top.get("data")) {
            ObjectReader d(*data, "data");
            f.data_path = dataset_relative_to(d.string("path"), plan_dir);
            f.data_split = d.string_or("split", "");
            d.finish();
        }
        if (const Json* p = top.get("parallel")) {
            if (!p->is_object()) throw SpecError("parallel", "must be a JSON object");
            f.parallel = *p;
        }
        top.finish();
        return 0;
    });
    return f;
}

} // namespace

std::optional<double> parse_capacity_factor(const std::string& text, const std::string& field) {
    if (text == "none" || text == "dropless") return std::nullopt;
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || !(v > 0.0) || v > 1.0e6)
        throw SpecError(field,
                        "expected a positive number or none (dropless), got \"" + text + "\"");
    return v;
}

namespace {

// Megatron's precision-aware optimizer flags, written into the model's precision: the main
// gradients' dtype and Adam's moments (one dtype for both here). Without
// --use-precision-aware-optimizer Megatron keeps all of them in fp32.
void apply_optimizer_precision(const JobInputs& in, Json& model) {
    if (!in.main_grads_dtype && !in.exp_avg_dtype && !in.exp_avg_sq_dtype && !in.main_params_dtype)
        return;
    const bool aware = in.use_precision_aware_optimizer.value_or(false);
    const auto check = [&](const std::optional<std::string>& given, const char* flag,
                           const std::string& field) {
        if (given && *given != "fp32" && !aware)
            throw SpecError(field, std::string(flag) + " " + *given +
                                       " needs --use-precision-aware-optimizer (without it "
                                       "Megatron keeps fp32)");
    };
    check(in.main_grads_dtype, "--main-grads-dtype", "model.precision.grads");
    check(in.exp_avg_dtype, "--exp-avg-dtype", "model.precision.optimizer_state");
    check(in.exp_avg_sq_dtype, "--exp-avg-sq-dtype", "model.precision.optimizer_state");
    if (in.main_params_dtype && *in.main_params_dtype != "fp32")
        throw SpecError("model.precision.master_weights",
                        "--main-params-dtype " + *in.main_params_dtype +
                            ": Trident models fp32 main parameters only");
    if (in.exp_avg_dtype && in.exp_avg_sq_dtype && *in.exp_avg_dtype != *in.exp_avg_sq_dtype)
        throw SpecError("model.precision.optimizer_state",
                        "Adam's two moments are kept in one dtype here; got --exp-avg-dtype " +
                            *in.exp_avg_dtype + " and --exp-avg-sq-dtype " + *in.exp_avg_sq_dtype);
    if (!model.contains("precision") || !model["precision"].is_object())
        model["precision"] = Json::object();
    if (in.main_grads_dtype) model["precision"]["grads"] = *in.main_grads_dtype;
    if (const auto& moments = in.exp_avg_dtype ? in.exp_avg_dtype : in.exp_avg_sq_dtype)
        model["precision"]["optimizer_state"] = *moments;
}

// Model, cluster and training from the plan file and the options.
void load_specs(JobSpec& job, const JobInputs& in, const PlanFile& f) {
    const std::string& plan_source = f.source;
    job.profile = f.profile;
    job.data_path = f.data_path;
    job.data_split = f.data_split;
    Json model_ref = f.model_ref, cluster_ref = f.cluster_ref, training_ref = f.training_ref;
    // Model.
    if (in.model) model_ref = *in.model;
    if (model_ref.is_null())
        throw SpecError("model", "missing (give --model NAME|FILE, or a plan with a model)");
    const std::string model_source = model_ref.is_string() ? source_of(model_ref) : plan_source;
    job.model = from_source(model_source, [&] {
        Json model = resolve_reference(model_ref, PresetKind::model, "model");
        if (in.make_vocab_size_divisible_by)
            model["make_vocab_size_divisible_by"] = *in.make_vocab_size_divisible_by;
        if (in.norm_epsilon) model["norm_epsilon"] = *in.norm_epsilon;
        for (const auto& [given, key] : {std::pair{&in.moe_aux_loss_coeff, "aux_loss_coeff"},
                                         std::pair{&in.moe_z_loss_coeff, "z_loss_coeff"}}) {
            if (!*given) continue;
            if (!model.contains("moe") || !model["moe"].is_object())
                throw SpecError(std::string("model.moe.") + key,
                                "the router losses need a mixture-of-experts model");
            model["moe"][key] = **given;
        }
        if (in.moe_expert_capacity_factor) {
            if (!model.contains("moe") || !model["moe"].is_object())
                throw SpecError("model.moe.capacity_factor",
                                "--moe-expert-capacity-factor needs a mixture-of-experts model");
            const auto factor =
                parse_capacity_factor(*in.moe_expert_capacity_factor, "model.moe.capacity_factor");
            model["moe"]["capacity_factor"] = factor ? Json(*factor) : Json(nullptr);
            // Dropless has no capacity to pad to: the override clears the model's padding.
            if (!factor) model["moe"].erase("pad_to_capacity");
        }
        if (in.moe_load_balance) {
            if (!model.contains("moe") || !model["moe"].is_object())
                throw SpecError("model.moe.load_balance",
                                "--moe-load-balance needs a mixture-of-experts model");
            model["moe"]["load_balance"] = *in.moe_load_balance;
        }
        if (in.moe_pad_expert_input_to_capacity) {
            if (!model.contains("moe") || !model["moe"].is_object())
                throw SpecError("model.moe.pad_to_capacity",
                                "--moe-pad-expert-input-to-capacity needs a mixture-of-experts "
                                "model");
            model["moe"]["pad_to_capacity"] = *in.moe_pad_expert_input_to_capacity;
        }
        if (in.mtp_num_layers) model["mtp_num_layers"] = *in.mtp_num_layers;
        if (in.mtp_loss_scaling_factor)
            model["mtp_loss_scaling_factor"] = *in.mtp_loss_scaling_factor;
        apply_optimizer_precision(in, model);
        return model_from_json(model);
    });

    // Cluster, with --nodes.
    if (in.cluster) cluster_ref = *in.cluster;
    if (cluster_ref.is_null())
        throw SpecError("cluster", "missing (give --cluster NAME|FILE, or a plan with a cluster)");
    const std::string cluster_source =
        cluster_ref.is_string() ? source_of(cluster_ref) : plan_source;
    job.cluster = from_source(cluster_source, [&] {
        Json cluster = resolve_reference(cluster_ref, PresetKind::cluster, "cluster");
        if (in.nodes) cluster["nodes"] = *in.nodes;
        if (in.devices_per_node) cluster["devices_per_node"] = *in.devices_per_node;
        return cluster_from_json(cluster);
    });

    // Training, with --gbs, --seq-length, --train-iters.
    if (in.training) training_ref = *in.training;
    const std::string training_source =
        training_ref.is_string() ? source_of(training_ref) : plan_source;
    job.training = from_source(training_source, [&] {
        Json training = training_ref.is_null() ? Json::object() : training_ref;
        if (training.is_string()) {
            training = read_json_file(training.get<std::string>(), "training");
            ObjectReader check(training, "training");
            check.expect_format("trident.training/1");
        }
        if (in.global_batch_size) training["global_batch_size"] = *in.global_batch_size;
        if (in.seq_length) training["seq_length"] = *in.seq_length;
        if (in.train_iters) training["train_iters"] = *in.train_iters;
        if (in.lr) training["lr"] = *in.lr;
        if (in.min_lr) training["min_lr"] = *in.min_lr;
        if (in.lr_warmup_iters) training["lr_warmup_iters"] = *in.lr_warmup_iters;
        if (in.lr_decay_iters) training["lr_decay_iters"] = *in.lr_decay_iters;
        if (in.lr_decay_style) training["lr_decay_style"] = *in.lr_decay_style;
        if (in.clip_grad) training["clip_grad"] = *in.clip_grad;
        if (in.weight_decay) training["weight_decay"] = *in.weight_decay;
        if (in.adam_beta1) training["adam_beta1"] = *in.adam_beta1;
        if (in.adam_beta2) training["adam_beta2"] = *in.adam_beta2;
        if (in.seed) training["seed"] = *in.seed;
        return training_from_json(training, job.model.max_position_embeddings);
    });
}

// The FP8 flags, merged into the plan's "fp8" object: --precision names a recipe
// ("fp8-tensorwise") or "bf16"; Megatron's --fp8-format turns FP8 on (recipe delayed unless
// --fp8-recipe says), and --fp8-recipe alone does too (format hybrid).
// NVFP4's flags (or --precision nvfp4) write parallel.fp4 in place of parallel.fp8; with FP8's
// own flags beside them they are refused, as Megatron refuses --fp4-format with --fp8-format.
bool apply_fp4_overrides(const JobInputs& in, Json& parallel) {
    const bool asked = in.fp4_format || in.fp4_recipe || in.fp4_param_gather ||
                       (in.precision && *in.precision == "nvfp4");
    if (!asked) return false;
    if (in.fp8_format || in.fp8_recipe || in.fp8_param_gather || in.fp8_amax_history)
        throw SpecError("--fp4-format", "FP4 and FP8 exclude each other (Megatron refuses "
                                        "--fp4-format with --fp8-format)");
    if (in.precision && *in.precision != "nvfp4")
        throw SpecError("--precision", *in.precision + " with the FP4 flags: give --precision "
                                                       "nvfp4, or drop them");
    Json fp4 =
        parallel.contains("fp4") && parallel["fp4"].is_object() ? parallel["fp4"] : Json::object();
    if (in.fp4_format) fp4["format"] = *in.fp4_format;
    if (in.fp4_recipe) fp4["recipe"] = *in.fp4_recipe;
    if (in.fp4_param_gather) fp4["param_gather"] = *in.fp4_param_gather;
    if (in.first_last_layers_bf16 && *in.first_last_layers_bf16) {
        fp4["num_layers_at_start_in_bf16"] = in.bf16_layers_at_start.value_or(1);
        fp4["num_layers_at_end_in_bf16"] = in.bf16_layers_at_end.value_or(1);
    }
    parallel.erase("fp8");
    parallel["fp4"] = fp4;
    return true;
}

void apply_fp8_overrides(const JobInputs& in, Json& parallel) {
    if (apply_fp4_overrides(in, parallel)) return;
    if (!in.precision && !in.fp8_format && !in.fp8_recipe && !in.fp8_param_gather &&
        !in.first_last_layers_bf16 && !in.bf16_layers_at_start && !in.bf16_layers_at_end &&
        !in.fp8_amax_history)
        return;
    Json fp8 = Json::object();
    if (parallel.contains("fp8")) {
        const Json& given = parallel["fp8"];
        if (given.is_string())
            fp8["recipe"] = given;
        else if (given.is_object())
            fp8 = given;
    }
    // An FP8 flag replaces a plan's NVFP4.
    parallel.erase("fp4");
    if (in.precision) {
        const std::string& p = *in.precision;
        if (p == "bf16") {
            parallel.erase("fp8");
            if (!in.fp8_format && !in.fp8_recipe) return;
            fp8 = Json::object();
        } else if (p == "mxfp8") {
            fp8["recipe"] = "mxfp8";
        } else if (p.rfind("fp8-", 0) == 0) {
            fp8["recipe"] = p.substr(4);
        } else {
            throw SpecError("--precision", "expected bf16, fp8-delayed, fp8-tensorwise, "
                                           "fp8-blockwise, mxfp8 or nvfp4, got \"" +
                                               p + "\"");
        }
    }
    if (in.fp8_format) fp8["format"] = *in.fp8_format;
    if (in.fp8_recipe) fp8["recipe"] = *in.fp8_recipe;
    if (in.fp8_param_gather) fp8["param_gather"] = *in.fp8_param_gather;
    if (in.first_last_layers_bf16 && *in.first_last_layers_bf16) {
        fp8["num_layers_at_start_in_bf16"] = in.bf16_layers_at_start.value_or(1);
        fp8["num_layers_at_end_in_bf16"] = in.bf16_layers_at_end.value_or(1);
    } else if (in.bf16_layers_at_start || in.bf16_layers_at_end) {
        throw SpecError("--num-layers-at-start-in-bf16",
                        "needs --first-last-layers-bf16 (Megatron's rule)");
    }
    if (in.fp8_amax_history) fp8["amax_history_len"] = *in.fp8_amax_history;
    parallel["fp8"] = fp8;
}

// The uneven-stage flags replace whatever split the plan file gave: one of them alone says how
// the layers are split.
void apply_split_overrides(const JobInputs& in, Json& parallel) {
    if (!in.pipeline_layout && !in.first_stage_layers && !in.last_stage_layers &&
        !in.account_for_embedding && !in.account_for_loss)
        return;
    for (const char* key :
         {"pipeline_layout", "decoder_first_pipeline_num_layers",
          "decoder_last_pipeline_num_layers", "account_for_embedding_in_pipeline_split",
          "account_for_loss_in_pipeline_split"})
        parallel.erase(key);
    if (in.pipeline_layout)
        parallel["pipeline_layout"] =
            parse_pipeline_layout(*in.pipeline_layout, "parallel.pipeline_layout");
    if (in.first_stage_layers)
        parallel["decoder_first_pipeline_num_layers"] = *in.first_stage_layers;
    if (in.last_stage_layers) parallel["decoder_last_pipeline_num_layers"] = *in.last_stage_layers;
    if (in.account_for_embedding)
        parallel["account_for_embedding_in_pipeline_split"] = *in.account_for_embedding;
    if (in.account_for_loss) parallel["account_for_loss_in_pipeline_split"] = *in.account_for_loss;
}

} // namespace

void apply_sharding_overrides(const JobInputs& in, Json& parallel) {
    if (in.data_parallel_sharding_strategy) {
        parallel["data_parallel_sharding_strategy"] = *in.data_parallel_sharding_strategy;
        if (!in.distributed_optimizer) parallel.erase("distributed_optimizer");
    }
    if (in.use_megatron_fsdp) parallel["use_megatron_fsdp"] = *in.use_megatron_fsdp;
    if (in.use_torch_fsdp2) {
        parallel["use_torch_fsdp2"] = *in.use_torch_fsdp2;
        if (!in.distributed_optimizer) parallel.erase("distributed_optimizer");
    }
    if (in.optimizer_instances)
        parallel["num_distributed_optimizer_instances"] = *in.optimizer_instances;
    if (in.fsdp_prefetch_units) parallel["fsdp_prefetch_units"] = *in.fsdp_prefetch_units;
    if (in.keep_fp8_transpose_cache)
        parallel["keep_fp8_transpose_cache"] = *in.keep_fp8_transpose_cache;
}

namespace {

// A plan that checks a recipe's own rules: whether a layout gathers the parameters a
// parameter gather needs (the distributed optimizer) is each searched layout's rule.
ParallelPlan recipe_check(const Fp8& recipe) {
    ParallelPlan check;
    check.fp8 = recipe;
    check.distributed_optimizer = true;
    return check;
}

} // namespace

std::optional<Fp8> fp8_override(const JobInputs& in) {
    Json parallel = Json::object();
    apply_fp8_overrides(in, parallel);
    if (parallel.contains("fp4")) {
        const Fp8 f = fp4_from_json(parallel["fp4"]);
        validate(recipe_check(f));
        return f;
    }
    if (!in.precision && !parallel.contains("fp8")) return std::nullopt;
    if (!parallel.contains("fp8")) return Fp8{}; // --precision bf16
    const Fp8 f = fp8_from_json(parallel["fp8"]);
    validate(recipe_check(f));
    return f;
}

JobSpec load_specs(const JobInputs& in) {
    JobSpec job;
    load_specs(job, in, read_plan_file(in));
    return job;
}

namespace {
JobSpec load_job(const JobInputs& in, const PlanFile& file);
} // namespace

JobSpec load_job(const JobInputs& in) {
    return load_job(in, read_plan_file(in));
}

JobSpec load_job(const Json& plan, const std::string& source, const JobInputs& in) {
    return load_job(in, read_plan_file(in, &plan, source));
}

namespace {

JobSpec load_job(const JobInputs& in, const PlanFile& file) {
    const std::string& plan_source = file.source;
    Json parallel = file.parallel;
    JobSpec job;
    load_specs(job, in, file);

    // Parallel plan, with flags.
    if (in.tp) parallel["tp"] = *in.tp;
    if (in.pp) parallel["pp"] = *in.pp;
    if (in.dp) parallel["dp"] = parse_dp_flag(*in.dp);
    if (in.cp) parallel["cp"] = *in.cp;
    if (in.ep) parallel["ep"] = *in.ep;
    if (in.etp) {
        if (parallel.is_object()) // the flag replaces either spelling
            parallel.erase("expert_tensor_parallel_size");
        parallel["etp"] = *in.etp;
    }
    if (in.vpp && in.num_layers_per_virtual_stage)
        throw SpecError("parallel.vpp", "give either --vpp or --num-layers-per-virtual-"
                                        "pipeline-stage, not both");
    if (in.vpp) parallel["vpp"] = *in.vpp;
    if (in.micro_batch_size) parallel["micro_batch_size"] = *in.micro_batch_size;
    if (in.schedule) parallel["schedule"] = *in.schedule;
    apply_split_overrides(in, parallel);
    apply_fp8_overrides(in, parallel);
    if (in.recompute || in.recompute_method || in.recompute_num_layers || in.recompute_modules) {
        Json rc =
            recompute_object(parallel.contains("recompute") ? &parallel["recompute"] : nullptr);
        // A granularity other than full from the command line replaces the plan's whole
        // recomputation: its full-only method and layer count do not apply any more.
        if (in.recompute && *in.recompute != "full") rc = Json::object();
        if (in.recompute) rc["granularity"] = *in.recompute;
        if (in.recompute_method) rc["method"] = *in.recompute_method;
        if (in.recompute_num_layers) rc["num_layers"] = *in.recompute_num_layers;
        if (in.recompute_modules) {
            if (!in.recompute) rc = Json{{"granularity", "selective"}};
            rc["modules"] = *in.recompute_modules;
        }
        parallel["recompute"] = rc;
    }
    if (in.sequence_parallel) parallel["sequence_parallel"] = *in.sequence_parallel;
    if (in.distributed_optimizer) parallel["distributed_optimizer"] = *in.distributed_optimizer;
    apply_sharding_overrides(in, parallel);
    if (in.allow_cross_node_tp) parallel["allow_cross_node_tp"] = *in.allow_cross_node_tp;
    if (in.overlap_grad_reduce) parallel["overlap_grad_reduce"] = *in.overlap_grad_reduce;
    if (in.overlap_param_gather) parallel["overlap_param_gather"] = *in.overlap_param_gather;
    if (in.tp_comm_overlap) parallel["tp_comm_overlap"] = *in.tp_comm_overlap;
    if (in.overlap_p2p_comm) parallel["overlap_p2p_comm"] = *in.overlap_p2p_comm;
    if (in.async_tp_backward)
        parallel["async_tensor_model_parallel_allreduce"] = *in.async_tp_backward;
    if (in.overlap_moe_expert_parallel_comm)
        parallel["overlap_moe_expert_parallel_comm"] = *in.overlap_moe_expert_parallel_comm;
    if (in.moe_shared_expert_overlap)
        parallel["moe_shared_expert_overlap"] = *in.moe_shared_expert_overlap;
    if (in.moe_token_dispatcher) parallel["moe_token_dispatcher_type"] = *in.moe_token_dispatcher;
    if (in.flash_attention) parallel["flash_attention"] = *in.flash_attention;
    if (in.num_layers_per_virtual_stage) {
        // Megatron spells virtual stages as layers per chunk: vpp = (L / pp) / n.
        const std::int64_t n = *in.num_layers_per_virtual_stage;
        const Json* pp = parallel.contains("pp") ? &parallel["pp"] : nullptr;
        if (!pp || !pp->is_number_integer() || pp->get<std::int64_t>() < 1)
            throw SpecError("parallel.pp", "needed to convert --num-layers-per-virtual-"
                                           "pipeline-stage into virtual stages");
        const std::int64_t per_rank = job.model.num_layers / pp->get<std::int64_t>();
        if (n < 1 || per_rank % n != 0 || job.model.num_layers % pp->get<std::int64_t>() != 0)
            throw SpecError("parallel.vpp", "--num-layers-per-virtual-pipeline-stage " +
                                                std::to_string(n) + " must divide the " +
                                                std::to_string(per_rank) +
                                                " layers of each pipeline rank");
        parallel["vpp"] = per_rank / n;
    }
    // Virtual stages imply the interleaved schedule unless one is named (as in Megatron).
    if (!parallel.contains("schedule") && parallel.contains("vpp") &&
        parallel["vpp"].is_number_integer() && parallel["vpp"].get<std::int64_t>() > 1)
        parallel["schedule"] = "interleaved-1f1b";

    job.plan = from_source(plan_source, [&] { return plan_from_json(parallel); });
    job.plan.recompute = with_recompute_defaults(
        job.plan.recompute, from_source(plan_source, [&] { return job.max_layers_per_chunk(); }));
    if (job.plan.dp == 0) { // "auto": the data-parallel degree fills the cluster
        const std::int64_t model_parallel = job.plan.tp * job.plan.cp * job.plan.pp;
        if (job.cluster.devices() % model_parallel != 0)
            throw SpecError(
                "parallel.dp",
                "auto: the cluster's " + std::to_string(job.cluster.devices()) +
                    " devices are not divisible by tp·cp·pp = " + std::to_string(model_parallel));
        job.plan.dp = job.cluster.devices() / model_parallel;
    }
    from_source(plan_source, [&] {
        validate(job);
        return 0;
    });
    return job;
}

} // namespace

} // namespace trident::core
