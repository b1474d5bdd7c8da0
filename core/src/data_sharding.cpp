// Data-parallel sharding in the plan: Megatron's --data-parallel-sharding-strategy, its FSDP
// switches and hybrid-sharding replicas, read, written, checked and described.
#include "limits.h"
#include "trident/core/parallel_plan.h"
#include "trident/core/spec_error.h"

namespace trident::core {

DataSharding parse_data_sharding(const std::string& text, const std::string& field) {
    // ZeRO stages (DeepSpeed's zero_optimization.stage) and PyTorch FSDP1's strategy names.
    static const std::pair<const char*, DataSharding> aliases[] = {
        {"zero-0", DataSharding::no_shard},
        {"zero0", DataSharding::no_shard},
        {"0", DataSharding::no_shard},
        {"zero-1", DataSharding::optim},
        {"zero1", DataSharding::optim},
        {"1", DataSharding::optim},
        {"zero-2", DataSharding::optim_grads},
        {"zero2", DataSharding::optim_grads},
        {"2", DataSharding::optim_grads},
        {"shard_grad_op", DataSharding::optim_grads},
        {"zero-3", DataSharding::optim_grads_params},
        {"zero3", DataSharding::optim_grads_params},
        {"3", DataSharding::optim_grads_params},
        {"full_shard", DataSharding::optim_grads_params},
        {"fsdp", DataSharding::optim_grads_params}};
    for (const auto& [name, value] : aliases)
        if (text == name) return value;
    return static_cast<DataSharding>(enum_index(text, kDataShardingNames, field));
}

void read_sharding(ObjectReader& r, ParallelPlan& p) {
    const bool megatron_fsdp = r.boolean_or("use_megatron_fsdp", false);
    const bool torch_fsdp2 = r.boolean_or("use_torch_fsdp2", false);
    if (megatron_fsdp && torch_fsdp2)
        throw SpecError(r.field("use_torch_fsdp2"),
                        "give use_megatron_fsdp or use_torch_fsdp2, not both");
    Sharding& s = p.sharding;
    s.implementation = torch_fsdp2 ? FsdpImplementation::torch : FsdpImplementation::megatron;
    const std::string strategy_field = r.field("data_parallel_sharding_strategy");
    const bool given = r.has("data_parallel_sharding_strategy");
    if (given)
        s.strategy =
            parse_data_sharding(r.string("data_parallel_sharding_strategy"), strategy_field);
    else if (torch_fsdp2) // FSDP2's fully_shard shards the parameters
        s.strategy = DataSharding::optim_grads_params;
    if (torch_fsdp2 && s.strategy != DataSharding::optim_grads_params)
        throw SpecError(strategy_field,
                        "use_torch_fsdp2 shards the parameters (optim_grads_params), got \"" +
                            std::string(kDataShardingNames[int(s.strategy)]) + "\"");
    s.instances = r.integer_or("num_distributed_optimizer_instances", 1, 1, limits::kMaxDegree);
    s.prefetch_units = r.integer_or("fsdp_prefetch_units", 1, 0, 8);
    s.keep_fp8_transpose_cache = r.boolean_or("keep_fp8_transpose_cache", false);
    // The strategy includes ZeRO-1: the distributed optimizer is on with it, and a plan that
    // says otherwise contradicts itself.
    if (s.strategy >= DataSharding::optim) {
        if (r.has("distributed_optimizer") && !p.distributed_optimizer)
            throw SpecError(r.field("distributed_optimizer"),
                            "false contradicts data_parallel_sharding_strategy \"" +
                                std::string(kDataShardingNames[int(s.strategy)]) +
                                "\", which shards the optimizer state");
        p.distributed_optimizer = true;
    } else if (p.distributed_optimizer) {
        s.strategy = DataSharding::optim;
    }
    // Megatron-FSDP overlaps its gradient reduce-scatters (and, sharding the parameters, their
    // gathers) always: it turns the flags on for these strategies.
    if (s.strategy >= DataSharding::optim_grads) p.overlap_grad_reduce = true;
    if (s.strategy == DataSharding::optim_grads_params) p.overlap_param_gather = true;
}

void write_sharding(const ParallelPlan& p, Json& j) {
    const Sharding& s = p.sharding;
    if (p.zero_stage() >= 2 || s.instances > 1)
        j["data_parallel_sharding_strategy"] =
            std::string(kDataShardingNames[std::size_t(p.zero_stage())]);
    if (p.zero_stage() >= 2)
        j[s.implementation == FsdpImplementation::torch ? "use_torch_fsdp2" : "use_megatron_fsdp"] =
            true;
    if (s.instances > 1) j["num_distributed_optimizer_instances"] = s.instances;
    if (s.prefetch_units != 1) j["fsdp_prefetch_units"] = s.prefetch_units;
    if (s.keep_fp8_transpose_cache) j["keep_fp8_transpose_cache"] = true;
}

void validate_sharding(const ParallelPlan& p, const std::string& path) {
    const Sharding& s = p.sharding;
    // Only Megatron-FSDP drops the transposes it keeps otherwise (the flag is its own).
    if (s.keep_fp8_transpose_cache &&
        (p.zero_stage() < 3 || s.implementation != FsdpImplementation::megatron ||
         !p.fp8.enabled()))
        throw SpecError(path + ".keep_fp8_transpose_cache",
                        "keeps Megatron-FSDP's FP8 weight transposes: it needs FP8 and "
                        "use_megatron_fsdp with optim_grads_params (the plan has ZeRO-" +
                            std::to_string(p.zero_stage()) + (p.fp8.enabled() ? "" : ", no FP8") +
                            ")");
    if (s.strategy >= DataSharding::optim_grads && !p.distributed_optimizer)
        throw SpecError(path + ".distributed_optimizer",
                        "must be on with data_parallel_sharding_strategy \"" +
                            std::string(kDataShardingNames[int(s.strategy)]) +
                            "\", which shards the optimizer state");
    const std::string f = path + ".num_distributed_optimizer_instances";
    if (s.instances > 1 && p.zero_stage() == 0)
        throw SpecError(f, std::to_string(s.instances) +
                               " replicas need a sharded state (distributed_optimizer or a "
                               "data_parallel_sharding_strategy)");
    if ((p.dp * p.cp) % s.instances != 0 || p.expert_dp() % s.instances != 0)
        throw SpecError(f, std::to_string(s.instances) +
                               " must divide dp·cp = " + std::to_string(p.dp * p.cp) +
                               " and expert-dp = " + std::to_string(p.expert_dp()));
    if (s.implementation == FsdpImplementation::torch &&
        s.strategy != DataSharding::optim_grads_params)
        throw SpecError(path + ".data_parallel_sharding_strategy",
                        "use_torch_fsdp2 shards the parameters (optim_grads_params)");
    // Megatron-Bridge documents FSDP2 as "not currently working with Pipeline Parallel".
    if (s.implementation == FsdpImplementation::torch && p.pp > 1)
        throw SpecError(path + ".use_torch_fsdp2",
                        "PyTorch FSDP2 does not run with pipeline parallelism in Megatron (pp " +
                            std::to_string(p.pp) + "); use_megatron_fsdp does");
}

std::string describe_sharding(const ParallelPlan& p) {
    const int zero = p.zero_stage();
    std::string text = "zero-" + std::to_string(zero);
    if (zero == 0) return text + " (no sharding)";
    if (zero == 1)
        text += " (distributed optimizer";
    else
        text += " (" + std::string(kDataShardingNames[std::size_t(zero)]) + ", " +
                (p.sharding.implementation == FsdpImplementation::torch ? "PyTorch FSDP2"
                                                                        : "Megatron-FSDP");
    if (p.sharding.instances > 1)
        text += ", " + std::to_string(p.sharding.instances) + " replicas of " +
                std::to_string(p.shard_ranks()) + " ranks";
    return text + ")";
}

std::string sharding_cell(const ParallelPlan& p) {
    std::string cell = std::to_string(p.zero_stage());
    if (p.sharding.instances > 1) cell += "h" + std::to_string(p.sharding.instances);
    return cell;
}

} // namespace trident::core
