// The MoE token dispatchers on one rank, every process group a recorder: the allgather
// dispatcher gathers the tokens over the etp·ep group and reduce-scatters the outputs and the
// gradients back over it, the all-to-all one exchanges them over the expert group; on one rank
// both train the same numbers bit for bit (the same rows in the same order).
#include "../support/tiny_job.h"
#include "trident/executor/gpt_chunk.h"
#include "trident/executor/trainer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <gtest/gtest.h>
#include <map>
#include <string>

using namespace trident;

namespace {

// A group of one rank that counts the collectives called on it.
class Recorder final : public executor::Communicator {
public:
    std::map<std::string, int> calls;
    int rank() const override { return 0; }
    int size() const override { return 1; }
    void all_reduce_sum(float*, std::size_t) override { ++calls["all_reduce_sum"]; }
    void all_reduce_max(float*, std::size_t) override { ++calls["all_reduce_max"]; }
    void all_gather(const float* in, float* out, std::size_t n) override {
        ++calls["all_gather"];
        std::memmove(out, in, n * sizeof(float));
    }
    void reduce_scatter_sum(const float* in, float* out, std::size_t n) override {
        ++calls["reduce_scatter_sum"];
        std::memmove(out, in, n * sizeof(float));
    }
    void all_to_all(const float* in, float* out, std::size_t n) override {
        ++calls["all_to_all"];
        std::memmove(out, in, n * sizeof(float));
    }
    std::vector<std::size_t> all_to_allv_sizes; // floats each call sent
    void all_to_allv(const float* in, const std::vector<std::size_t>& send, float* out,
                     const std::vector<std::size_t>&) override {
        ++calls["all_to_allv"];
        all_to_allv_sizes.push_back(send[0]);
        std::memmove(out, in, send[0] * sizeof(float));
    }
    void broadcast(float*, std::size_t, int) override { ++calls["broadcast"]; }
    void send(const float*, std::size_t, int, int) override { ADD_FAILURE() << "send"; }
    void recv(float*, std::size_t, int, int) override { ADD_FAILURE() << "recv"; }
    void wait_sends() override {}
    void barrier() override {}
};

struct Trained {
    double loss = 0.0;
    std::vector<float> grads;
    Recorder tensor, expert, context, expert_tensor, tensor_expert;
};

core::JobSpec moe_tiny() {
    test::TinyJob tiny;
    tiny.model = "moe-tiny";
    return tiny.load();
}

void train_one_step(core::TokenDispatcher dispatcher, Trained& out) {
    core::JobSpec job = moe_tiny();
    job.plan.token_dispatcher = dispatcher;
    executor::ParameterStore store;
    const executor::GptChunk chunk(job, 0, 0, 0, 0, 0, store, 11);
    std::vector<std::int32_t> tokens, targets, seq(9);
    for (int b = 0; b < 2; ++b) {
        executor::synthetic_sequence(5, b, 9, job.model.vocab_size, seq.data());
        tokens.insert(tokens.end(), seq.begin(), seq.end() - 1);
        targets.insert(targets.end(), seq.begin() + 1, seq.end());
    }
    const executor::ChunkComms comms{out.tensor, out.expert, out.context, out.expert_tensor,
                                     out.tensor_expert};
    std::fill(store.grads.begin(), store.grads.end(), 0.0f);
    executor::GptChunk::Activations a;
    a.tokens = tokens.data();
    a.targets = targets.data();
    chunk.forward(a, comms);
    chunk.backward_input(a, nullptr, 1.0f, comms);
    chunk.backward_weight(a);
    out.loss = a.loss + a.router_loss;
    out.grads.assign(store.grads.begin(), store.grads.end());
}

TEST(MoeDispatchers, AllgatherGathersOverTheExpertTensorAndExpertGroupAndTrainsTheSame) {
    Trained all_to_all, all_gather;
    train_one_step(core::TokenDispatcher::alltoall, all_to_all);
    train_one_step(core::TokenDispatcher::allgather, all_gather);
    // moe-tiny's MoE layers: each forward and backward moves tokens once each way.
    EXPECT_GT(all_to_all.expert.calls["all_to_allv"], 0);
    EXPECT_EQ(all_to_all.tensor_expert.calls.size(), 0u);
    EXPECT_EQ(all_gather.expert.calls.count("all_to_allv"), 0u);
    EXPECT_EQ(all_gather.expert.calls.count("all_to_all"), 0u);
    const int gathers = all_gather.tensor_expert.calls["all_gather"];
    EXPECT_GT(gathers, 0);
    // Per MoE layer: the tokens and their output gradients gathered (after the row counts), the
    // outputs and the input gradients reduce-scattered.
    EXPECT_EQ(all_gather.tensor_expert.calls["reduce_scatter_sum"] * 2, gathers);
    EXPECT_EQ(all_gather.loss, all_to_all.loss);
    EXPECT_EQ(all_gather.grads, all_to_all.grads);
}

// Flex (DeepEP's dispatcher) sends a token once to each rank holding any of its experts, with
// its (expert, weight) pairs: on one rank, rows · (h + 2k) floats where all-to-all sends
// rows · k · (h + 2); the combine sums a token's outputs on the expert side, and the numbers
// are all-to-all's.
TEST(MoeDispatchers, FlexSendsATokenOncePerRankAndTrainsTheSame) {
    Trained all_to_all, flex;
    train_one_step(core::TokenDispatcher::alltoall, all_to_all);
    train_one_step(core::TokenDispatcher::flex, flex);
    const core::JobSpec job = moe_tiny();
    const auto h = std::size_t(job.model.hidden_size), k = std::size_t(job.model.moe->top_k);
    ASSERT_GT(k, 1u);
    const std::size_t rows = 2 * 8; // train_one_step's two sequences of 8
    ASSERT_FALSE(flex.expert.all_to_allv_sizes.empty());
    EXPECT_EQ(all_to_all.expert.all_to_allv_sizes.front(), rows * k * (h + 2));
    EXPECT_EQ(flex.expert.all_to_allv_sizes.front(), rows * (h + 2 * k));
    // Combine, output gradients and returned gradients: a row per token, not per copy.
    EXPECT_EQ(flex.expert.all_to_allv_sizes.size(), all_to_all.expert.all_to_allv_sizes.size());
    EXPECT_EQ(flex.expert.all_to_allv_sizes.at(1), rows * h);
    EXPECT_NEAR(flex.loss, all_to_all.loss, 1e-6 * std::fabs(all_to_all.loss));
    ASSERT_EQ(flex.grads.size(), all_to_all.grads.size());
    for (std::size_t i = 0; i < flex.grads.size(); ++i)
        ASSERT_NEAR(flex.grads[i], all_to_all.grads[i],
                    1e-5f * (1e-3f + std::fabs(all_to_all.grads[i])))
            << i;
}

} // namespace
