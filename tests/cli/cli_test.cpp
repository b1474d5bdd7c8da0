// The `trident` binary as a user runs it: presets, validate on every preset, outputs.
#include "../support/trident_process.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <gtest/gtest.h>
#include <sstream>
#include <unistd.h>

using trident::test::file_text;
using trident::test::number_after;
using trident::test::run_trident;
using trident::test::split_words;

TEST(Cli, PresetsListsEveryKind) {
    const auto r = run_trident({"presets"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    for (const char* name : {"gpt2-124m", "gpt3-175b", "llama3-405b", "mixtral-8x7b", "deepseek-v3",
                             "dgx-a100-80gb", "hgx-h200", "localhost", "megatron-sc21-1t"})
        EXPECT_NE(r.out.find(name), std::string::npos) << name;
    EXPECT_NE(r.out.find("174.6B"), std::string::npos); // GPT-3's computed size
    EXPECT_NE(r.out.find("671.0B"), std::string::npos); // DeepSeek-V3
}

TEST(Cli, PresetsShowPrintsACopyableFile) {
    const auto r = run_trident({"presets", "models", "--show", "llama3-8b"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("\"format\": \"trident.model/1\""), std::string::npos);
}

TEST(Cli, ValidateEveryModelPresetOnOneNode) {
    // Every model validates with a trivially legal layout: tp 1, pp 1, dp 8 with the
    // distributed optimizer (DeepSeek-V3's BF16 moments need it; most of these models do not
    // fit one GPU that way, which --allow-oom waives).
    const auto list = run_trident({"presets", "models"});
    std::istringstream lines(list.out);
    std::string line;
    std::getline(lines, line); // "models"
    std::getline(lines, line); // header
    int checked = 0;
    while (std::getline(lines, line)) {
        const auto words = split_words(line);
        if (words.empty()) continue;
        const auto r =
            run_trident({"validate", "--model", words[0], "--cluster", "hgx-h200", "--tp", "1",
                         "--pp", "1", "--dp", "8", "--mbs", "1", "--gbs", "8", "--seq-length", "32",
                         "--distributed-optimizer", "--allow-oom"});
        EXPECT_EQ(r.exit_code, 0) << words[0] << ": " << r.err;
        EXPECT_NE(r.out.find("valid"), std::string::npos);
        ++checked;
    }
    EXPECT_GE(checked, 20);
}

TEST(Cli, ValidateEveryClusterAndPlanPreset) {
    for (const char* cluster : {"dgx-a100-80gb", "dgx-h100", "hgx-h200"}) {
        const auto r =
            run_trident({"validate", "--model", "llama3-70b", "--cluster", cluster, "--nodes", "4",
                         "--tp", "8", "--pp", "4", "--dp", "auto", "--mbs", "1", "--gbs", "32",
                         "--sequence-parallel", "--distributed-optimizer"});
        EXPECT_EQ(r.exit_code, 0) << cluster << ": " << r.err;
    }
    const auto local =
        run_trident({"validate", "--model", "gpt2-124m", "--cluster", "localhost", "--tp", "1",
                     "--pp", "1", "--dp", "auto", "--mbs", "1", "--gbs", "64"});
    EXPECT_EQ(local.exit_code, 0) << local.err;
    for (const char* plan : {"megatron-sc21-1.7b", "megatron-sc21-76b", "megatron-sc21-1t"}) {
        const auto r = run_trident({"validate", "--plan", plan});
        EXPECT_EQ(r.exit_code, 0) << plan << ": " << r.err;
    }
}

TEST(Cli, ValidateReportsDerivedValues) {
    const auto r = run_trident({"validate", "--plan", "megatron-sc21-145b", "--rank", "1535"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("145,6"), std::string::npos) << r.out; // parameters 145,6xx,xxx,xxx
    EXPECT_NE(r.out.find("48 micro-batches per step"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("rank 1535 (node 191): tp 7, cp 0, ep 0, dp 23, pp 7"), std::string::npos)
        << r.out;
}

TEST(Cli, MegatronAliasesMatchShortFlags) {
    const auto a = run_trident(split_words(
        "validate --json --model llama3-8b --cluster dgx-h100 --nodes 2 --tp 4 --pp 2 --dp 2 "
        "--mbs 2 --gbs 64 --recompute full --recompute-num-layers 2 --sequence-parallel"));
    const auto b = run_trident(split_words(
        "validate --json --model llama3-8b --cluster dgx-h100 --nodes 2 "
        "--tensor-model-parallel-size 4 --pipeline-model-parallel-size 2 --data-parallel-size 2 "
        "--micro-batch-size 2 --global-batch-size 64 --recompute-granularity full "
        "--recompute-num-layers 2 --sequence-parallel"));
    ASSERT_EQ(a.exit_code, 0) << a.err;
    EXPECT_EQ(a.out, b.out);
}

TEST(Cli, ResolvedPlanFileRoundTrips) {
    const std::string path = testing::TempDir() + "trident-plan.json";
    const auto first = run_trident(split_words(
        "validate --model mixtral-8x7b --cluster dgx-h100 --nodes 2 --tp 2 --pp 2 --dp auto "
        "--ep 4 --mbs 1 --gbs 32 --seq-length 4096 --distributed-optimizer --out " +
        path));
    ASSERT_EQ(first.exit_code, 0) << first.err;
    const auto again = run_trident({"validate", "--plan", path, "--json"});
    ASSERT_EQ(again.exit_code, 0) << again.err;
    std::ifstream in(path);
    std::stringstream written;
    written << in.rdbuf();
    EXPECT_EQ(again.out, written.str());
    std::remove(path.c_str());
}

TEST(Cli, FailedValidateKeepsAnExistingOutputFile) {
    const std::string path = testing::TempDir() + "trident-keep.json";
    { std::ofstream(path) << "precious\n"; }
    const auto r = run_trident(split_words("validate --model gpt2-124m --cluster dgx-h100 --tp 5 "
                                           "--pp 1 --dp 1 --mbs 1 --gbs 8 --out " +
                                           path));
    EXPECT_EQ(r.exit_code, 2);
    std::ifstream in(path);
    std::string content;
    std::getline(in, content);
    EXPECT_EQ(content, "precious");
    std::remove(path.c_str());
}

TEST(Cli, UnknownSubcommandIsBadInput) {
    const auto r = run_trident({"simulate-everything"});
    EXPECT_EQ(r.exit_code, 2);
}

TEST(Cli, HelpExitsZero) {
    const auto r = run_trident({"--help"});
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_NE(r.out.find("validate"), std::string::npos);
}

TEST(Cli, SimulatePrintsTheReportAndWritesFiles) {
    const std::string dir = testing::TempDir();
    const auto r = run_trident({"simulate", "--plan", "megatron-sc21-145b", "--trace",
                                dir + "trident-trace.json", "--json", dir + "trident-report.json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("step time"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("MFU"), std::string::npos);
    EXPECT_NE(r.out.find("profile a100-sxm4-80gb (derived)"), std::string::npos);
    std::ifstream trace(dir + "trident-trace.json");
    std::stringstream t;
    t << trace.rdbuf();
    EXPECT_NE(t.str().find("\"traceEvents\""), std::string::npos);
    EXPECT_NE(t.str().find("\"format\":\"trident.trace/1\""), std::string::npos);
    EXPECT_NE(t.str().find("\"name\":\"recompute\""), std::string::npos);
    std::ifstream report(dir + "trident-report.json");
    std::stringstream j;
    j << report.rdbuf();
    EXPECT_NE(j.str().find("\"format\": \"trident.report/1\""), std::string::npos);
    EXPECT_NE(j.str().find("\"bubble_fraction\""), std::string::npos);
}

TEST(Cli, SimulateAcceptsEveryShippedClusterDevice) {
    for (const char* cluster : {"dgx-a100-80gb", "dgx-h100", "hgx-h200"}) {
        const auto r = run_trident(
            split_words(std::string("simulate --model llama3-70b --cluster ") + cluster +
                        " --nodes 8 --tp 8 --pp 4 --dp auto --mbs 1 --gbs 64 "
                        "--seq-length 4096 --sequence-parallel --recompute selective"));
        EXPECT_EQ(r.exit_code, 0) << cluster << ": " << r.err;
    }
}

TEST(Cli, PlanWritesAPlanThatSimulatesToItsPrediction) {
    const std::string path = testing::TempDir() + "trident-planned.json";
    const auto r =
        run_trident(split_words("plan --model llama3-8b --cluster dgx-h100 --nodes 2 --gbs 64 "
                                "--seq-length 4096 --top 5 --explain --megatron-args --out " +
                                path));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // With --megatron-args the search and table go to stderr, the arguments alone to stdout.
    EXPECT_NE(r.err.find("searched"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("rejected layouts by reason"), std::string::npos);
    EXPECT_NE(r.err.find("wrote the best layout to"), std::string::npos);
    EXPECT_EQ(r.out.find("searched"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("pretrain_gpt.py"), std::string::npos);
    EXPECT_NE(r.out.find("--tensor-model-parallel-size"), std::string::npos);
    const auto sim = run_trident({"simulate", "--plan", path, "--json", path + ".report"});
    ASSERT_EQ(sim.exit_code, 0) << sim.err;
    // The plan records the predicted step time; simulating the plan gives the same number.
    const double predicted = number_after(file_text(path), "predicted_step_time_s");
    const double simulated = number_after(file_text(path + ".report"), "step_time_s");
    EXPECT_GT(predicted, 0);
    EXPECT_NEAR(predicted, simulated, 1e-9 * simulated);
    std::remove(path.c_str());
    std::remove((path + ".report").c_str());
}

TEST(Cli, PlanCsvAndJson) {
    const auto csv = run_trident(split_words(
        "plan --model gpt2-350m --cluster dgx-a100-80gb --gbs 64 --seq-length 1024 --top 3 --csv"));
    ASSERT_EQ(csv.exit_code, 0) << csv.err;
    EXPECT_EQ(csv.out.rfind("rank,tp,cp,pp,dp,ep,etp,vpp,schedule", 0), 0u) << csv.out;
    EXPECT_EQ(std::count(csv.out.begin(), csv.out.end(), '\n'), 4);
    const auto json = run_trident(split_words("plan --model gpt2-350m --cluster dgx-a100-80gb "
                                              "--gbs 64 --seq-length 1024 --top 3 --json"));
    ASSERT_EQ(json.exit_code, 0) << json.err;
    EXPECT_NE(json.out.find("\"format\": \"trident.plan-search/1\""), std::string::npos);
}

TEST(Cli, TokenizerTrainWritesGpt2Files) {
    const std::string corpus = "/usr/share/common-licenses/GPL-3"; // Debian's base-files
    if (!std::ifstream(corpus)) GTEST_SKIP() << corpus << " is not installed";
    const std::string dir = "/tmp/trident-cli-tokenizer-" + std::to_string(::getpid());
    const auto r = run_trident(
        {"tokenizer", "train", "--input", corpus, "--vocab-size", "512", "--output-dir", dir});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("512-token"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("255 merges"), std::string::npos) << r.out;
    std::ifstream vocab_in(dir + "/vocab.json"), merges_in(dir + "/merges.txt");
    std::stringstream vocab_text, merges_text;
    vocab_text << vocab_in.rdbuf();
    merges_text << merges_in.rdbuf();
    const std::string vocab = vocab_text.str(), merges = merges_text.str();
    EXPECT_EQ(vocab.rfind("{\"!\": 0, ", 0), 0u);
    EXPECT_NE(vocab.find("\"<|endoftext|>\": 511}"), std::string::npos);
    EXPECT_EQ(merges.rfind("#version: 0.2\n", 0), 0u);
    EXPECT_EQ(std::count(merges.begin(), merges.end(), '\n'), 256); // header + 255 merges
    std::remove((dir + "/vocab.json").c_str());
    std::remove((dir + "/merges.txt").c_str());
    std::remove(dir.c_str());
}

TEST(Cli, MegatronsVocabularyPaddingFlag) {
    // gpt2-124m's 50257 words at tp 4: a multiple of 128·4 = 512 by default, of 64·4 with the flag.
    const std::vector<std::string> job = {
        "validate", "--model", "gpt2-124m", "--cluster", "dgx-a100-80gb", "--nodes", "1",
        "--tp",     "4",       "--pp",      "1",         "--dp",          "2",       "--mbs",
        "1",        "--gbs",   "8"};
    const auto plain = trident::test::run_trident(job);
    ASSERT_EQ(plain.exit_code, 0) << plain.err;
    EXPECT_NE(plain.out.find("padded 50688 at tp 4"), std::string::npos) << plain.out;
    auto flagged = job;
    flagged.insert(flagged.end(), {"--make-vocab-size-divisible-by", "64"});
    const auto r = trident::test::run_trident(flagged);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("padded 50432 at tp 4"), std::string::npos) << r.out;
}

TEST(Cli, PlanPinsShardingAndTheSimulateReportShowsIt) {
    const std::string path = testing::TempDir() + "trident-sharded.json";
    const auto r = run_trident(split_words(
        "plan --model llama3-70b --cluster dgx-h100 --nodes 8 --gbs 64 --seq-length 4096 --tp 8 "
        "--pp 1 --zero-stage 3 --num-distributed-optimizer-instances 2 --top 3 --explain "
        "--megatron-args --out " +
        path));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("data-parallel sharding for #1: zero-3 (optim_grads_params, "
                         "Megatron-FSDP, 2 replicas of 4 ranks)"),
              std::string::npos)
        << r.err;
    EXPECT_NE(r.out.find("--data-parallel-sharding-strategy optim_grads_params"),
              std::string::npos);
    const auto sim = run_trident({"simulate", "--plan", path});
    ASSERT_EQ(sim.exit_code, 0) << sim.err;
    EXPECT_NE(sim.out.find("gather/scatter s  hidden s  exposed s"), std::string::npos) << sim.out;
}

TEST(Cli, NoOverlapP2pCommunicationRoundTripsAndBlocksTheSends) {
    // Megatron's --no-overlap-p2p-communication: the interleaved schedule's sends then hold
    // each rank's stream, the step gets longer, and the plan and the export keep the flag.
    const auto step_s = [](const std::string& out) {
        const std::size_t at = out.find("step time ");
        return at == std::string::npos ? -1.0 : std::stod(out.substr(at + 10));
    };
    const std::string layout =
        "simulate --model gpt3-1.3b --cluster dgx-h100 --nodes 2 --tp 2 --pp 4 --vpp 2 "
        "--dp auto --mbs 1 --gbs 64";
    const auto overlapped = run_trident(split_words(layout));
    const auto blocking = run_trident(split_words(layout + " --no-overlap-p2p-communication"));
    ASSERT_EQ(overlapped.exit_code, 0) << overlapped.err;
    ASSERT_EQ(blocking.exit_code, 0) << blocking.err;
    EXPECT_GT(step_s(blocking.out), step_s(overlapped.out)) << blocking.out << overlapped.out;
    const auto validate = run_trident(split_words(
        "validate --model gpt3-1.3b --cluster dgx-h100 --nodes 2 --tp 2 --pp 4 --dp auto --mbs 1 "
        "--gbs 64"));
    EXPECT_NE(validate.out.find("pipeline sends blocking"), std::string::npos) << validate.out;
    const std::string path = testing::TempDir() + "trident-no-p2p-overlap.json";
    const auto plan = run_trident(split_words(
        "plan --model gpt3-1.3b --cluster dgx-h100 --nodes 2 --tp 2 --pp 4 --vpp 2 --mbs 1 "
        "--gbs 64 --no-overlap-p2p-communication --megatron-args --top 1 --out " +
        path));
    ASSERT_EQ(plan.exit_code, 0) << plan.err;
    EXPECT_NE(plan.out.find("--no-overlap-p2p-communication"), std::string::npos) << plan.out;
    std::ifstream saved(path);
    const std::string text((std::istreambuf_iterator<char>(saved)), {});
    EXPECT_NE(text.find("\"overlap_p2p_comm\": false"), std::string::npos) << text;
}
