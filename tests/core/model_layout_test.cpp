// The model layout table: across every rank of a layout, each full tensor is covered exactly
// once by the ranks that split it (and whole by each rank that replicates it), the full tensors
// add up to the model's published parameter count, the vocabulary is padded by Megatron's rule,
// and the counting form agrees with the full table.
#include "trident/core/job_loader.h"
#include "trident/core/model_layout.h"
#include "trident/core/parameter_count.h"

#include <gtest/gtest.h>
#include <map>
#include <set>

namespace trident::core {
namespace {

JobSpec job_for(const std::string& model, std::int64_t tp, std::int64_t pp, std::int64_t ep,
                std::int64_t vpp = 1, bool sp = false) {
    JobInputs in;
    in.model = model;
    in.cluster = "dgx-h100";
    in.nodes = 8;
    in.tp = tp;
    in.pp = pp;
    in.ep = ep;
    in.vpp = vpp;
    in.dp = "auto";
    in.micro_batch_size = 1;
    in.global_batch_size = 64 * 16;
    in.seq_length = 32;
    in.sequence_parallel = sp;
    in.distributed_optimizer = true; // DeepSeek-V3's BF16 moments need it, as in Megatron
    return load_job(in);
}

// Every (pipeline rank, chunk, tensor rank, expert rank) table of `job`; checks coverage and
// returns the summed size of the distinct full tensors.
std::int64_t check_coverage(const JobSpec& job) {
    const ParallelPlan& p = job.plan;
    std::map<std::string, std::vector<int>> covered; // per full tensor: hits per element
    std::map<std::string, std::int64_t> full_size;
    for (std::int32_t r = 0; r < p.pp; ++r)
        for (std::int32_t c = 0; c < p.vpp; ++c)
            for (std::int64_t t = 0; t < p.tp; ++t)
                for (std::int64_t e = 0; e < p.ep; ++e) {
                    const ChunkLayout layout(job, r, c, t, e);
                    const ChunkLayout counts(job, r, c, t, e, 1, LayoutDetail::counts);
                    EXPECT_EQ(counts.parameters(), layout.parameters());
                    EXPECT_EQ(counts.expert_parameters(), layout.expert_parameters());
                    for (const TensorLayout& tl : layout.tensors()) {
                        std::int64_t placed = 0;
                        for (auto [begin, length] : tl.placement) placed += length;
                        EXPECT_LE(placed, tl.size) << tl.name();
                        // Replicas: tensor rank 0 stands for the others; the tied copy for
                        // the embedding; experts on expert ranks other than their own never
                        // appear, and tensor-replicated tensors count on every expert rank 0.
                        if (tl.flags.duplicate || (tl.flags.tp_replicated && t > 0) ||
                            (!tl.flags.expert && e > 0))
                            continue;
                        auto& hits = covered[tl.init_name()];
                        hits.resize(std::size_t(tl.full_size()), 0);
                        full_size[tl.init_name()] = tl.full_size();
                        for (auto [begin, length] : tl.placement)
                            for (std::int64_t i = begin; i < begin + length; ++i)
                                ++hits[std::size_t(i)];
                    }
                }
    std::int64_t total = 0;
    for (const auto& [name, hits] : covered) {
        for (std::size_t i = 0; i < hits.size(); ++i)
            if (hits[i] != 1) {
                ADD_FAILURE() << name << " element " << i << " held " << hits[i] << " times";
                break;
            }
        total += full_size.at(name);
    }
    return total;
}

TEST(ModelLayout, EveryTensorCoveredOnceAndCountsMatchThePublishedModel) {
    struct Case {
        std::string model;
        std::int64_t tp, pp, ep, vpp;
    };
    for (const Case& k : std::vector<Case>{{"gpt-tiny", 1, 1, 1, 1},
                                           {"gpt-tiny", 2, 2, 1, 1},
                                           {"gpt-tiny", 4, 2, 1, 2},
                                           {"llama-tiny", 2, 2, 1, 1},
                                           {"moe-tiny", 2, 2, 2, 1},
                                           {"moe-tiny", 1, 1, 4, 1},
                                           {"gpt2-124m", 4, 2, 1, 1}}) {
        SCOPED_TRACE(k.model + " tp " + std::to_string(k.tp) + " pp " + std::to_string(k.pp) +
                     " ep " + std::to_string(k.ep) + " vpp " + std::to_string(k.vpp));
        const JobSpec job = job_for(k.model, k.tp, k.pp, k.ep, k.vpp);
        EXPECT_EQ(check_coverage(job), count_parameters(job.model).total());
    }
}

TEST(ModelLayout, VocabularyPaddedToMegatronsMultiple) {
    JobSpec job = job_for("gpt2-124m", 4, 1, 1); // 50257 words
    const ChunkLayout layout(job, 0, 0, 3, 0);
    EXPECT_EQ(layout.shape().padded_vocab, 50688); // 99 · 512
    EXPECT_EQ(layout.shape().local_vocab, 50688 / 4);
    EXPECT_EQ(layout.shape().vocab_start, 3 * 50688 / 4);
    const TensorLayout& wte =
        layout.tensors()[std::size_t(layout.find(TensorRole::word_embedding))];
    EXPECT_EQ(wte.size, 50688 / 4 * 768);
    // The last tensor rank holds the padding rows, which belong to no full tensor.
    EXPECT_EQ(wte.placement.size(), 1u);
    EXPECT_EQ(wte.placement[0].second, (50257 - 3 * 50688 / 4) * 768);
    job.model.make_vocab_size_divisible_by = 1;
    EXPECT_EQ(ChunkLayout(job, 0, 0, 0, 0).shape().padded_vocab, 50260); // a multiple of 4
}

TEST(ModelLayout, NamesFlagsAndTheTiedCopy) {
    const JobSpec job = job_for("gpt-tiny", 2, 2, 1, 1, true);
    const ChunkLayout first(job, 0, 0, 1, 0), last(job, 1, 0, 1, 0);
    EXPECT_TRUE(first.shape().first);
    EXPECT_TRUE(last.shape().last);
    EXPECT_EQ(first.tensors().front().name(), "embedding.word");
    const TensorLayout& copy = last.tensors()[std::size_t(last.find(TensorRole::output_weight))];
    EXPECT_EQ(copy.name(), "embedding.word.tied_copy");
    EXPECT_EQ(copy.init_name(), "embedding.word");
    EXPECT_TRUE(copy.flags.duplicate && copy.flags.tied_embedding);
    const TensorLayout& norm =
        first.tensors()[std::size_t(first.find(TensorRole::norm1_weight, 0))];
    EXPECT_EQ(norm.name(), "layer.0.norm1.weight");
    EXPECT_TRUE(norm.flags.tp_replicated && norm.flags.sequence_partial);
    EXPECT_EQ(norm.init, TensorInit::ones);
    const TensorLayout& qkv = first.tensors()[std::size_t(first.find(TensorRole::qkv_weight, 1))];
    EXPECT_TRUE(qkv.flags.decay);
    EXPECT_FALSE(qkv.flags.tp_replicated);
    EXPECT_EQ(first.find(TensorRole::qkv_weight, 2), -1); // layer 2 is the next stage's
    // Rows outside the tensor-parallel regions: 1/tp of the tokens under sequence parallelism.
    EXPECT_EQ(first.shape().rows, first.shape().tokens / 2);
    EXPECT_EQ(first.shape().first_row, first.shape().rows);
}

} // namespace
} // namespace trident::core

namespace trident::core {
namespace {

TEST(ModelLayout, CountsOfAWholeMlaMoeModelOnOneRank) {
    // DeepSeek-V3 (MLA, a shared expert, 256 routed experts, 3 dense layers, untied head, one
    // multi-token-prediction module sharing the embedding): one rank's counting table holds
    // every published parameter and the MTP module's, whose routed experts are experts too.
    const JobSpec job = job_for("deepseek-v3", 1, 1, 1);
    ASSERT_EQ(job.model.mtp_num_layers, 1);
    const ChunkLayout counts(job, 0, 0, 0, 0, 1, LayoutDetail::counts);
    const ParameterCounts published = count_parameters(job.model);
    EXPECT_EQ(counts.parameters(), published.total() + published.mtp);
    EXPECT_EQ(counts.expert_parameters(),
              published.routed_experts + layer_parameters(job.model, 61).routed_experts);
}

} // namespace
} // namespace trident::core
