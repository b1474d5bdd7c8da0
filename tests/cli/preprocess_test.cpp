// `trident preprocess`: text to Megatron-style indexed data, from a vocabulary that
// `trident tokenizer train` learned; and its refusals.
#include "../support/trident_process.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>

namespace fs = std::filesystem;
using trident::test::run_trident;

namespace {

// Per test: CTest runs the tests of this file in parallel processes.
fs::path work_dir() {
    const fs::path d = fs::path(testing::TempDir()) /
                       (std::string("trident-preprocess-") +
                        testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(d);
    return d;
}

// A tokenizer learned from a small JSONL corpus written here.
fs::path corpus_and_tokenizer() {
    const fs::path corpus = [] {
        const fs::path p = work_dir() / "corpus.jsonl";
        std::ofstream out(p);
        for (int i = 0; i < 200; ++i)
            out << "{\"text\": \"Document " << i
                << ": the quick brown fox jumps over the lazy dog \\u00e9\\u4e2d.\", \"id\": " << i
                << "}\n";
        out.close();
        const auto r = run_trident({"tokenizer", "train", "--input", p.string(), "--vocab-size",
                                    "300", "--output-dir", (work_dir() / "tok").string()});
        EXPECT_EQ(r.exit_code, 0) << r.err;
        return p;
    }();
    return corpus;
}

} // namespace

TEST(Preprocess, WritesAnIndexedDataset) {
    const fs::path prefix = work_dir() / "ok";
    const auto r = run_trident({"preprocess", "--input", corpus_and_tokenizer().string(),
                                "--output-prefix", prefix.string(), "--tokenizer",
                                (work_dir() / "tok").string(), "--workers", "2"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("200 documents"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("uint16 ids"), std::string::npos) << r.out;
    std::ifstream idx(prefix.string() + ".idx", std::ios::binary);
    char magic[9];
    idx.read(magic, 9);
    EXPECT_EQ(std::memcmp(magic, "MMIDIDX\0\0", 9), 0);
    // 2 bytes per token: the summary's count matches the .bin.
    const auto at = r.out.find(" documents, ");
    const std::string tokens = r.out.substr(at + 12, r.out.find(" tokens") - at - 12);
    std::string digits;
    for (const char c : tokens)
        if (c != ',') digits += c;
    EXPECT_EQ(fs::file_size(prefix.string() + ".bin"), 2 * std::stoull(digits));
    EXPECT_FALSE(fs::exists(prefix.string() + ".bin.partial"));
}

TEST(Preprocess, RefusesBadInputWithoutLeavingFiles) {
    const std::string tok = (work_dir() / "tok").string();
    corpus_and_tokenizer();
    struct Case {
        std::vector<std::string> args;
        std::string expected;
    };
    const fs::path bad_jsonl = work_dir() / "bad.jsonl";
    std::ofstream(bad_jsonl) << "{\"text\": \"fine\"}\n{\"text\": 3}\n";
    const std::string out = (work_dir() / "refused").string();
    const std::vector<Case> cases = {
        {{"--input", "/nonexistent.txt", "--output-prefix", out, "--tokenizer", tok},
         "/nonexistent.txt"},
        {{"--input", corpus_and_tokenizer().string(), "--output-prefix", out}, "--tokenizer"},
        {{"--input", corpus_and_tokenizer().string(), "--output-prefix", out, "--tokenizer",
          "/nonexistent-dir"},
         "vocab.json"},
        {{"--input", corpus_and_tokenizer().string(), "--output-prefix", "/nonexistent-dir/x",
          "--tokenizer", tok},
         "--output-prefix"},
        {{"--input", bad_jsonl.string(), "--output-prefix", out, "--tokenizer", tok},
         "bad.jsonl:2"},
    };
    for (const Case& c : cases) {
        std::vector<std::string> args{"preprocess"};
        args.insert(args.end(), c.args.begin(), c.args.end());
        const auto r = run_trident(args);
        EXPECT_EQ(r.exit_code, 2) << c.expected;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
        EXPECT_NE(r.err.find(c.expected), std::string::npos) << r.err;
        EXPECT_FALSE(fs::exists(out + ".bin")) << c.expected;
        EXPECT_FALSE(fs::exists(out + ".bin.partial")) << c.expected;
    }
}

// `plan --data-path P --split S --out F` records the dataset (as an absolute prefix) and the
// training length; `run --plan` of a plan file with a data record trains on it (a relative
// prefix there is found beside the plan file).
TEST(Preprocess, PlanFileRecordsTheDatasetAndRunReadsIt) {
    const fs::path prefix = work_dir() / "ds";
    const auto made =
        run_trident({"preprocess", "--input", corpus_and_tokenizer().string(), "--output-prefix",
                     prefix.string(), "--tokenizer", (work_dir() / "tok").string()});
    ASSERT_EQ(made.exit_code, 0) << made.err;
    const fs::path plan = work_dir() / "planned.json";
    const auto planned =
        run_trident({"plan", "--model", "gpt2-124m", "--cluster", "dgx-h100", "--gbs", "8",
                     "--seq-length", "16", "--train-iters", "7", "--data-path",
                     prefix.string() + ".bin", "--split", "90,10", "--out", plan.string()});
    ASSERT_EQ(planned.exit_code, 0) << planned.err;
    EXPECT_EQ(planned.err.find("warning"), std::string::npos) << planned.err;
    std::ifstream in(plan);
    const std::string text{std::istreambuf_iterator<char>(in), {}};
    EXPECT_NE(text.find("\"path\": \"" + fs::absolute(prefix).string() + "\""), std::string::npos)
        << text;
    EXPECT_NE(text.find("\"split\": \"90,10\""), std::string::npos) << text;
    EXPECT_NE(text.find("\"train_iters\": 7"), std::string::npos) << text;

    const fs::path local = work_dir() / "local.json";
    std::ofstream(local) << R"({"format": "trident.plan/1",
      "model": {"preset": "gpt-tiny", "vocab_size": 384},
      "cluster": {"preset": "localhost", "nodes": 1, "devices_per_node": 1},
      "training": {"global_batch_size": 4, "seq_length": 16, "train_iters": 2},
      "parallel": {"tp": 1, "pp": 1, "dp": 1, "micro_batch_size": 2},
      "data": {"path": "ds", "split": "90,10"}})";
    const auto ran = run_trident({"run", "--plan", local.string()});
    ASSERT_EQ(ran.exit_code, 0) << ran.err;
    EXPECT_NE(ran.out.find("data: " + prefix.string() + ": 200 documents"), std::string::npos)
        << ran.out;
    EXPECT_NE(ran.out.find("validation 20 documents"), std::string::npos) << ran.out;

    const auto missing = run_trident({"plan", "--model", "gpt2-124m", "--cluster", "dgx-h100",
                                      "--gbs", "8", "--seq-length", "16", "--data-path",
                                      (work_dir() / "nothing").string(), "--out", plan.string()});
    EXPECT_EQ(missing.exit_code, 2);
    EXPECT_NE(missing.err.find("trident: error: --data-path: "), std::string::npos) << missing.err;
}
