// GPT samples: cut across document boundaries, every token of an epoch used once, shuffled
// deterministically from the seed, splits by document.
#include "trident/core/spec_error.h"
#include "trident/data/gpt_dataset.h"

#include <filesystem>
#include <gtest/gtest.h>
#include <map>
#include <memory>
#include <numeric>
#include <set>

namespace fs = std::filesystem;
using namespace trident;

namespace {

// Documents whose tokens are their global positions in the file order (mod 60000), so a sample
// reveals where it was cut from.
std::shared_ptr<const data::IndexedDataset> make_dataset(const std::string& name,
                                                         const std::vector<int>& lengths) {
    const fs::path dir = fs::temp_directory_path() / ("trident_gpt_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    const std::string p = (dir / name).string();
    data::IndexedDatasetWriter w(p, data::TokenDtype::int32);
    std::int32_t next = 0;
    for (const int len : lengths) {
        std::vector<std::int32_t> doc(static_cast<std::size_t>(len));
        for (auto& t : doc) t = next++;
        w.add_document(doc);
    }
    w.finish();
    return std::make_shared<const data::IndexedDataset>(p);
}

} // namespace

TEST(GptDataset, SplitParsesAndNormalises) {
    const auto w = data::parse_split("98,2,0");
    ASSERT_EQ(w.size(), 3u);
    EXPECT_DOUBLE_EQ(w[0], 0.98);
    EXPECT_DOUBLE_EQ(w[1], 0.02);
    EXPECT_THROW(data::parse_split("98"), core::SpecError);
    EXPECT_THROW(data::parse_split("a,b"), core::SpecError);
    EXPECT_THROW(data::parse_split("0,1"), core::SpecError);
    EXPECT_THROW(data::parse_split("98,-2"), core::SpecError);
}

TEST(GptDataset, SplitsDocumentsContiguously) {
    const auto r = data::split_documents(100, data::parse_split("98,2,0"));
    ASSERT_EQ(r.size(), 3u);
    EXPECT_EQ(r[0].begin, 0);
    EXPECT_EQ(r[0].end, 98);
    EXPECT_EQ(r[1].begin, 98);
    EXPECT_EQ(r[1].end, 100);
    EXPECT_EQ(r[2].size(), 0);
    const auto s = data::split_documents(7, data::parse_split("90,10"));
    EXPECT_EQ(s[0].size() + s[1].size(), 7);
}

TEST(GptDataset, SamplesCrossDocumentsAndCoverTheEpochOnce) {
    const std::vector<int> lengths{5, 1, 17, 3, 9, 2, 30, 4};
    const auto ds = make_dataset("cover", lengths);
    const std::int64_t seq = 6;
    data::GptDataset gpt(ds, {0, 8}, seq, 42, "train");
    const std::int64_t total = std::accumulate(lengths.begin(), lengths.end(), 0);
    EXPECT_EQ(gpt.tokens_per_epoch(), total);
    EXPECT_EQ(gpt.samples_per_epoch(), (total - 1) / seq);
    // Every sample is a run of seq+1 tokens in the epoch's document order; together the samples
    // of one epoch start at distinct multiples of seq, and at least one crosses a document.
    std::vector<std::int32_t> s(std::size_t(seq + 1));
    std::set<std::int32_t> firsts;
    bool crossed = false;
    for (std::int64_t i = 0; i < gpt.samples_per_epoch(); ++i) {
        gpt.sample(i, 1 << 20, s.data());
        firsts.insert(s[0]);
        for (std::size_t t = 1; t < s.size(); ++t)
            if (s[t] != s[t - 1] + 1) crossed = true;
    }
    EXPECT_EQ(std::int64_t(firsts.size()), gpt.samples_per_epoch());
    EXPECT_TRUE(crossed);
}

TEST(GptDataset, DeterministicFromTheSeedAndReshuffledPerEpoch) {
    const auto ds = make_dataset("seeded", std::vector<int>(40, 13));
    data::GptDataset a(ds, {0, 40}, 8, 7, "train"), b(ds, {0, 40}, 8, 7, "train"),
        c(ds, {0, 40}, 8, 8, "train");
    std::vector<std::int32_t> x(9), y(9);
    int differ_seed = 0, differ_epoch = 0;
    const std::int64_t n = a.samples_per_epoch();
    for (std::int64_t i = 0; i < n; ++i) {
        a.sample(i, 1 << 20, x.data());
        b.sample(i, 1 << 20, y.data());
        EXPECT_EQ(x, y);
        c.sample(i, 1 << 20, y.data());
        differ_seed += x != y;
    }
    // Out of order (a resume reads sample k without reading 0 … k−1) gives the same sample.
    b.sample(n + 3, 1 << 20, y.data());
    a.sample(3, 1 << 20, x.data());
    differ_epoch += x != y;
    a.sample(n + 3, 1 << 20, x.data());
    EXPECT_EQ(x, y);
    EXPECT_GT(differ_seed, n / 2);
    EXPECT_EQ(differ_epoch, 1);
}

TEST(GptDataset, RefusesTooLittleDataAndForeignIds) {
    const auto ds = make_dataset("tiny", {3, 2});
    EXPECT_THROW(data::GptDataset(ds, {0, 2}, 8, 1, "train"), core::SpecError);
    data::GptDataset gpt(ds, {0, 2}, 2, 1, "train");
    std::vector<std::int32_t> s(3);
    try {
        gpt.sample(0, 2, s.data()); // ids reach 4: outside a vocabulary of 2
        FAIL() << "foreign ids accepted";
    } catch (const core::SpecError& e) {
        EXPECT_EQ(e.field(), "--data-path");
        EXPECT_NE(e.reason().find("vocabulary"), std::string::npos);
    }
}
