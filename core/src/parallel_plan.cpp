#include "trident/core/parallel_plan.h"

#include "limits.h"
#include "trident/core/pipeline_split.h"
#include "trident/core/schedule.h"
#include "trident/core/spec_error.h"

namespace trident::core {

std::string to_string(ScheduleKind s) {
    return std::string(kScheduleNames[int(s)]);
}
std::string to_string(RecomputeGranularity g) {
    return std::string(kRecomputeGranularityNames[int(g)]);
}
std::string to_string(RecomputeMethod m) {
    return std::string(kRecomputeMethodNames[int(m)]);
}

std::string short_text(const Recompute& r) {
    if (r.granularity == RecomputeGranularity::selective &&
        r.modules != module_bit(RecomputeModule::core_attn))
        return "sel+modules"; // the modules: in describe(), --explain and the CSV
    if (r.granularity != RecomputeGranularity::full) return to_string(r.granularity);
    return "full " + std::to_string(r.num_layers);
}

std::string recompute_modules_text(std::uint32_t modules) {
    std::string text;
    for (std::size_t i = 0; i < kRecomputeModuleNames.size(); ++i)
        if (modules & (1u << i))
            text += (text.empty() ? "" : ",") + std::string(kRecomputeModuleNames[i]);
    return text;
}

// "modules": ["core_attn", "moe_act"] — Megatron's --recompute-modules names.
std::uint32_t recompute_modules_from_json(const Json& j, const std::string& path) {
    if (!j.is_array() || j.empty())
        throw SpecError(path, "must be a non-empty list of module names (" +
                                  recompute_modules_text(~0u) + ")");
    std::uint32_t modules = 0;
    for (std::size_t i = 0; i < j.size(); ++i) {
        const std::string field = path + "[" + std::to_string(i) + "]";
        if (!j[i].is_string()) throw SpecError(field, "must be a module name");
        const auto m =
            std::size_t(enum_index(j[i].get<std::string>(), kRecomputeModuleNames, field));
        if (modules & (1u << m))
            throw SpecError(field, "\"" + j[i].get<std::string>() + "\" is listed twice");
        modules |= 1u << m;
    }
    return modules;
}

std::uint32_t light_recompute_modules(bool moe, bool mla) {
    if (!moe && !mla) return 0;
    std::uint32_t modules =
        module_bit(RecomputeModule::core_attn) | module_bit(RecomputeModule::layernorm);
    if (mla) modules |= module_bit(RecomputeModule::mla_up_proj);
    if (moe) modules |= module_bit(RecomputeModule::moe_act);
    return modules;
}

std::string describe(const Recompute& r, std::int64_t layers_per_chunk) {
    if (r.granularity == RecomputeGranularity::selective &&
        r.modules != module_bit(RecomputeModule::core_attn))
        return "selective (" + recompute_modules_text(r.modules) + ")";
    if (r.granularity != RecomputeGranularity::full) return to_string(r.granularity);
    if (r.method == RecomputeMethod::uniform)
        return "full (uniform: every layer, in groups of " + std::to_string(r.num_layers) + ")";
    return "full (block: " + std::to_string(r.num_layers) + " of " +
           std::to_string(layers_per_chunk) + " layers per chunk)";
}

std::string describe_features(const ParallelPlan& p, std::int64_t layers_per_chunk) {
    const auto on = [](bool b) { return b ? "on" : "off"; };
    return "precision " + precision_name(p.fp8.recipe) +
           (p.fp8.param_gather ? " (" + param_gather_name(p.fp8.recipe) + ")" : "") +
           " · recompute " + describe(p.recompute, layers_per_chunk) + " · sequence parallel " +
           on(p.sequence_parallel) + " · " +
           (p.zero_stage() >= 2 || p.sharding.instances > 1
                ? describe_sharding(p)
                : std::string("distributed optimizer ") + on(p.distributed_optimizer)) +
           " · flash attention " + on(p.flash_attention) + " · overlap grad-reduce " +
           on(p.overlap_grad_reduce) + ", param-gather " + on(p.overlap_param_gather) +
           (p.tp_comm_overlap ? ", tp-comm on" : "") +
           (p.pp > 1 ? std::string(" · pipeline sends ") +
                           (p.p2p_overlapped() ? "overlapped" : "blocking")
                     : std::string());
}

std::string param_gather_name(Fp8Recipe r) {
    return r == Fp8Recipe::nvfp4 ? "NVFP4 parameter gather" : "FP8 parameter gather";
}

std::string precision_name(Fp8Recipe r) {
    if (r == Fp8Recipe::none) return "bf16";
    if (r == Fp8Recipe::mxfp8 || r == Fp8Recipe::nvfp4) return std::string(kFp8RecipeNames[int(r)]);
    return "fp8-" + std::string(kFp8RecipeNames[int(r)]);
}

// "fp8": "tensorwise" (the recipe alone) or {recipe, format, param_gather,
// num_layers_at_start_in_bf16, num_layers_at_end_in_bf16, amax_history_len}.
Fp8 fp8_from_json(const Json& j, const std::string& path) {
    Fp8 f;
    if (j.is_string()) {
        f.recipe = static_cast<Fp8Recipe>(enum_index(j.get<std::string>(), kFp8RecipeNames, path));
        return f;
    }
    ObjectReader r(j, path);
    f.recipe = static_cast<Fp8Recipe>(
        enum_index(r.string_or("recipe", "delayed"), kFp8RecipeNames, r.field("recipe")));
    f.format = static_cast<Fp8Format>(
        enum_index(r.string_or("format", "hybrid"), kFp8FormatNames, r.field("format")));
    f.param_gather = r.boolean_or("param_gather", false);
    f.bf16_layers_at_start = r.integer_or("num_layers_at_start_in_bf16", 0, 0, limits::kMaxLayers);
    f.bf16_layers_at_end = r.integer_or("num_layers_at_end_in_bf16", 0, 0, limits::kMaxLayers);
    f.amax_history = r.integer_or("amax_history_len", 1024, 1, 1 << 20);
    r.finish();
    if (f.recipe == Fp8Recipe::nvfp4)
        throw SpecError(path + ".recipe", "NVFP4 is a 4-bit recipe: give it as parallel.fp4 "
                                          "{\"format\": \"e2m1\", \"recipe\": \"nvfp4\"} "
                                          "(Megatron's --fp4-format e2m1 --fp4-recipe nvfp4)");
    return f;
}

// "fp4": {format (e2m1), recipe (nvfp4), param_gather, num_layers_at_start_in_bf16,
// num_layers_at_end_in_bf16}: Megatron-Core's --fp4-format, --fp4-recipe, --fp4-param-gather
// and --first-last-layers-bf16 (the names checked in megatron/training/arguments.py).
Fp8 fp4_from_json(const Json& j, const std::string& path) {
    ObjectReader r(j, path);
    Fp8 f;
    f.recipe = Fp8Recipe::nvfp4;
    if (r.string_or("format", "e2m1") != "e2m1")
        throw SpecError(r.field("format"), "Megatron's only FP4 format is e2m1");
    if (r.string_or("recipe", "nvfp4") != "nvfp4")
        throw SpecError(r.field("recipe"), "Trident runs the nvfp4 recipe (Megatron's default; "
                                           "its 'custom' quantizer factory is not modelled)");
    f.param_gather = r.boolean_or("param_gather", false);
    f.bf16_layers_at_start = r.integer_or("num_layers_at_start_in_bf16", 0, 0, limits::kMaxLayers);
    f.bf16_layers_at_end = r.integer_or("num_layers_at_end_in_bf16", 0, 0, limits::kMaxLayers);
    r.finish();
    return f;
}

namespace {

Json to_json(const Fp8& f) {
    if (f.recipe == Fp8Recipe::nvfp4)
        return {{"format", "e2m1"},
                {"recipe", "nvfp4"},
                {"param_gather", f.param_gather},
                {"num_layers_at_start_in_bf16", f.bf16_layers_at_start},
                {"num_layers_at_end_in_bf16", f.bf16_layers_at_end}};
    return {{"recipe", std::string(kFp8RecipeNames[int(f.recipe)])},
            {"format", std::string(kFp8FormatNames[int(f.format)])},
            {"param_gather", f.param_gather},
            {"num_layers_at_start_in_bf16", f.bf16_layers_at_start},
            {"num_layers_at_end_in_bf16", f.bf16_layers_at_end},
            {"amax_history_len", f.amax_history}};
}

Recompute recompute_from_json(const Json& j, const std::string& path) {
    Recompute rc;
    if (j.is_string()) { // shorthand: "recompute": "selective" (or "full": every layer)
        rc.granularity = static_cast<RecomputeGranularity>(
            enum_index(j.get<std::string>(), kRecomputeGranularityNames, path));
        return rc;
    }
    ObjectReader r(j, path);
    rc.granularity = static_cast<RecomputeGranularity>(
        enum_index(r.string("granularity"), kRecomputeGranularityNames, r.field("granularity")));
    if (r.has("method"))
        rc.method = static_cast<RecomputeMethod>(
            enum_index(r.string("method"), kRecomputeMethodNames, r.field("method")));
    rc.num_layers = r.integer_or("num_layers", 0, 0, limits::kMaxLayers);
    if (const Json* modules = r.get("modules"))
        rc.modules = recompute_modules_from_json(*modules, r.field("modules"));
    r.finish();
    return rc;
}

} // namespace

ParallelPlan plan_from_json(const Json& j, const std::string& path) {
    using namespace limits;
    ObjectReader r(j, path);
    ParallelPlan p;
    // Megatron's defaults: tp and pp 1, the data-parallel degree whatever the devices leave.
    p.tp = r.integer_or("tp", 1, 1, kMaxDegree);
    p.pp = r.integer_or("pp", 1, 1, kMaxDegree);
    const Json* given_dp = r.get("dp");
    const Json dp = given_dp ? *given_dp : Json("auto");
    if (dp.is_string()) {
        if (dp.get<std::string>() != "auto")
            throw SpecError(r.field("dp"), "must be a positive integer or \"auto\", got \"" +
                                               dp.get<std::string>() + "\"");
        p.dp = 0; // resolved against the cluster in load_job
    } else {
        p.dp = as_integer(dp, r.field("dp"), 1, kMaxDegree);
    }
    p.cp = r.integer_or("cp", 1, 1, kMaxDegree);
    p.ep = r.integer_or("ep", 1, 1, kMaxDegree);
    if (r.has("etp") && r.has("expert_tensor_parallel_size"))
        throw SpecError(r.field("expert_tensor_parallel_size"),
                        "give etp or its Megatron name expert_tensor_parallel_size, not both");
    for (const char* key : {"etp", "expert_tensor_parallel_size"})
        if (r.has(key)) p.etp = r.integer(key, 1, kMaxDegree);
    p.vpp = r.integer_or("vpp", 1, 1, kMaxLayers);
    if (const Json* layout = r.get("pipeline_layout")) {
        const std::string field = r.field("pipeline_layout");
        if (layout->is_string()) {
            p.pipeline_layout = parse_megatron_layout(layout->get<std::string>(), field);
        } else if (layout->is_array()) {
            for (std::size_t i = 0; i < layout->size(); ++i)
                p.pipeline_layout.push_back(
                    as_integer((*layout)[i], field + "[" + std::to_string(i) + "]", 0, kMaxLayers));
        } else {
            throw SpecError(field, "must be a list of layers per virtual stage, like [7, 8, 8, "
                                   "7], or Megatron's layout string \"Et*7|t*8|t*8|t*7L\"");
        }
    }
    if (r.has("decoder_first_pipeline_num_layers"))
        p.first_stage_layers = r.integer("decoder_first_pipeline_num_layers", 0, kMaxLayers);
    if (r.has("decoder_last_pipeline_num_layers"))
        p.last_stage_layers = r.integer("decoder_last_pipeline_num_layers", 0, kMaxLayers);
    p.account_for_embedding = r.boolean_or("account_for_embedding_in_pipeline_split", false);
    p.account_for_loss = r.boolean_or("account_for_loss_in_pipeline_split", false);
    p.sequence_parallel = r.boolean_or("sequence_parallel", false);
    p.micro_batch_size = r.integer("micro_batch_size", 1, kMaxBatch);
    p.schedule = static_cast<ScheduleKind>(
        enum_index(r.string_or("schedule", "1f1b"), kScheduleNames, r.field("schedule")));
    // ZB-V, DualPipe and DualPipeV hold two chunks per rank by definition.
    if (holds_two_chunks(p.schedule) && !r.has("vpp")) p.vpp = 2;
    if (const Json* rc = r.get("recompute"))
        p.recompute = recompute_from_json(*rc, r.field("recompute"));
    if (const Json* fp8 = r.get("fp8")) p.fp8 = fp8_from_json(*fp8, r.field("fp8"));
    if (const Json* fp4 = r.get("fp4")) {
        if (p.fp8.enabled())
            throw SpecError(r.field("fp4"), "FP4 and FP8 exclude each other (Megatron: "
                                            "--fp4-format with --fp8-format is refused)");
        p.fp8 = fp4_from_json(*fp4, r.field("fp4"));
    }
    p.token_dispatcher = static_cast<TokenDispatcher>(
        enum_index(r.string_or("moe_token_dispatcher_type", "alltoall"), kTokenDispatcherNames,
                   r.field("moe_token_dispatcher_type")));
    p.distributed_optimizer = r.boolean_or("distributed_optimizer", false);
    p.overlap_grad_reduce = r.boolean_or("overlap_grad_reduce", false);
    p.overlap_param_gather = r.boolean_or("overlap_param_gather", false);
    read_sharding(r, p); // after the overlap flags, which ZeRO-2/3 turn on
    p.tp_comm_overlap = r.boolean_or("tp_comm_overlap", false);
    p.overlap_p2p_comm = r.boolean_or("overlap_p2p_comm", true);
    p.async_tp_backward = r.boolean_or("async_tensor_model_parallel_allreduce", true);
    p.overlap_moe_expert_parallel_comm = r.boolean_or("overlap_moe_expert_parallel_comm", false);
    p.moe_shared_expert_overlap = r.boolean_or("moe_shared_expert_overlap", false);
    p.flash_attention = r.boolean_or("flash_attention", true);
    p.allow_cross_node_tp = r.boolean_or("allow_cross_node_tp", false);
    p.rank_order = r.string_or("rank_order", std::string(kDefaultRankOrder));
    r.finish();
    if (p.dp != 0) validate(p, path);
    return p;
}

void validate(const ParallelPlan& p, const std::string& path) {
    const auto f = [&](std::string_view key) { return path + "." + std::string(key); };
    if (p.rank_order != kDefaultRankOrder)
        throw SpecError(f("rank_order"), "only \"" + std::string(kDefaultRankOrder) +
                                             "\" (Megatron's default) is supported, got \"" +
                                             p.rank_order + "\"");
    if (double(p.tp) * double(p.cp) * double(p.dp) * double(p.pp) > double(limits::kMaxDegree))
        throw SpecError(path,
                        "tp·cp·dp·pp exceeds " + std::to_string(limits::kMaxDegree) + " devices");
    if (p.sequence_parallel && p.tp == 1)
        throw SpecError(f("sequence_parallel"), "needs tp > 1 (it splits the sequence over the "
                                                "tensor-parallel group)");
    if (p.vpp > 1 && p.schedule != ScheduleKind::interleaved_1f1b && !holds_two_chunks(p.schedule))
        throw SpecError(f("vpp"), std::to_string(p.vpp) +
                                      " virtual stages need schedule "
                                      "\"interleaved-1f1b\", got \"" +
                                      to_string(p.schedule) + "\"");
    validate_schedule_shape(p.schedule, p.pp, p.vpp); // the two-chunk and DualPipe rules
    if (p.schedule == ScheduleKind::interleaved_1f1b) {
        if (p.vpp < 2) throw SpecError(f("vpp"), "schedule \"interleaved-1f1b\" needs vpp >= 2");
        if (p.pp < 2) throw SpecError(f("pp"), "schedule \"interleaved-1f1b\" needs pp >= 2");
    }
    if (!p.fp8.enabled() &&
        (p.fp8.param_gather || p.fp8.bf16_layers_at_start > 0 || p.fp8.bf16_layers_at_end > 0))
        throw SpecError(f("fp8"), "param_gather and the BF16 first/last layers need an FP8 "
                                  "recipe (delayed, tensorwise, blockwise or mxfp8) or NVFP4");
    validate_sharding(p, path);
    // Megatron gathers quantized weights only where it gathers parameters (arguments.py:
    // "--fp8-param-gather only supported with distributed optimizer, torch fsdp2, megatron fsdp").
    if (p.fp8.param_gather && !p.distributed_optimizer)
        throw SpecError(
            f(p.fp8.recipe == Fp8Recipe::nvfp4 ? "fp4.param_gather" : "fp8.param_gather"),
            "needs distributed_optimizer or FSDP (only they gather parameters); dp " +
                std::to_string(p.dp) + " replicates them (add --distributed-optimizer)");
    if (p.tp_comm_overlap && !p.sequence_parallel)
        throw SpecError(f("tp_comm_overlap"), "needs sequence_parallel (and tp > 1): it overlaps "
                                              "the sequence-parallel all-gathers and "
                                              "reduce-scatters, as in Megatron");
    if (p.overlap_param_gather && !p.distributed_optimizer)
        throw SpecError(f("overlap_param_gather"), "needs distributed_optimizer (only it gathers "
                                                   "parameters after the step)");
    const Recompute& rc = p.recompute;
    if (rc.granularity != RecomputeGranularity::full && rc.num_layers != 0)
        throw SpecError(f("recompute.num_layers"),
                        "applies only to granularity \"full\" (selective covers every layer)");
    if (rc.granularity != RecomputeGranularity::selective &&
        rc.modules != module_bit(RecomputeModule::core_attn))
        throw SpecError(f("recompute.modules"), "apply only to granularity \"selective\" (got " +
                                                    to_string(rc.granularity) + " with " +
                                                    recompute_modules_text(rc.modules) + ")");
    validate_expert_grid(p, path);
}

void validate_expert_grid(const ParallelPlan& p, const std::string& path) {
    const auto s = [](std::int64_t v) { return std::to_string(v); };
    if (!p.etp) {
        if (!p.expert_grid_tiles())
            throw SpecError(path + ".ep",
                            s(p.ep) + " must divide dp·cp = " + s(p.dp * p.cp) +
                                " (experts are spread over the data-parallel ranks; with "
                                "expert_tensor_parallel_size they may use the tp ranks too)");
        return;
    }
    const std::int64_t stage = p.tp * p.cp * p.dp, etp = *p.etp;
    if (!p.expert_grid_tiles())
        throw SpecError(path + ".etp", "etp·ep = " + s(etp) + "·" + s(p.ep) + " = " +
                                           s(etp * p.ep) + " must divide a stage's tp·cp·dp = " +
                                           s(stage) + " ranks (MoE parallel folding)");
    // Folded experts take distinct tokens from every rank: under tensor parallelism that needs
    // the sequence split over the tp ranks (Megatron-Core's MoE layer refuses tp without it).
    if (etp != p.tp && p.tp > 1 && !p.sequence_parallel)
        throw SpecError(path + ".etp", "etp " + s(etp) + " differs from tp " + s(p.tp) +
                                           ": needs sequence_parallel, so each tp rank routes "
                                           "its own tokens");
}

Json to_json(const ParallelPlan& p) {
    Json j;
    j["tp"] = p.tp;
    j["pp"] = p.pp;
    j["dp"] = p.dp;
    j["cp"] = p.cp;
    j["ep"] = p.ep;
    if (p.etp) j["etp"] = *p.etp;
    j["vpp"] = p.vpp;
    if (!p.pipeline_layout.empty()) j["pipeline_layout"] = p.pipeline_layout;
    if (p.first_stage_layers) j["decoder_first_pipeline_num_layers"] = *p.first_stage_layers;
    if (p.last_stage_layers) j["decoder_last_pipeline_num_layers"] = *p.last_stage_layers;
    if (p.account_for_embedding) j["account_for_embedding_in_pipeline_split"] = true;
    if (p.account_for_loss) j["account_for_loss_in_pipeline_split"] = true;
    j["sequence_parallel"] = p.sequence_parallel;
    j["micro_batch_size"] = p.micro_batch_size;
    j["schedule"] = to_string(p.schedule);
    j["recompute"] = {{"granularity", to_string(p.recompute.granularity)},
                      {"method", to_string(p.recompute.method)},
                      {"num_layers", p.recompute.num_layers}};
    if (p.recompute.granularity == RecomputeGranularity::selective) {
        Json modules = Json::array();
        for (std::size_t i = 0; i < kRecomputeModuleNames.size(); ++i)
            if (p.recompute.modules & (1u << i))
                modules.push_back(std::string(kRecomputeModuleNames[i]));
        j["recompute"]["modules"] = modules;
    }
    if (p.fp8.enabled()) j[p.fp8.recipe == Fp8Recipe::nvfp4 ? "fp4" : "fp8"] = to_json(p.fp8);
    if (p.token_dispatcher != TokenDispatcher::alltoall)
        j["moe_token_dispatcher_type"] =
            std::string(kTokenDispatcherNames[int(p.token_dispatcher)]);
    j["distributed_optimizer"] = p.distributed_optimizer;
    write_sharding(p, j);
    j["overlap_grad_reduce"] = p.overlap_grad_reduce;
    j["overlap_param_gather"] = p.overlap_param_gather;
    if (p.tp_comm_overlap) j["tp_comm_overlap"] = true;
    if (!p.overlap_p2p_comm) j["overlap_p2p_comm"] = false;
    if (!p.async_tp_backward) j["async_tensor_model_parallel_allreduce"] = false;
    if (p.overlap_moe_expert_parallel_comm) j["overlap_moe_expert_parallel_comm"] = true;
    if (p.moe_shared_expert_overlap) j["moe_shared_expert_overlap"] = true;
    j["flash_attention"] = p.flash_attention;
    j["allow_cross_node_tp"] = p.allow_cross_node_tp;
    j["rank_order"] = p.rank_order;
    return j;
}

} // namespace trident::core
