// Indexed dataset: the exact Megatron byte layout, a round trip, and refusal of damaged files.
#include "trident/core/spec_error.h"
#include "trident/data/indexed_dataset.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using namespace trident;

namespace {

std::string temp_prefix(const std::string& name) {
    const fs::path dir = fs::temp_directory_path() / ("trident_idx_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    return (dir / name).string();
}

std::vector<char> bytes_of(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
}

void write_bytes(const std::string& path, const std::vector<char>& bytes) {
    std::ofstream(path, std::ios::binary | std::ios::trunc)
        .write(bytes.data(), std::streamsize(bytes.size()));
}

std::string expect_refused(const std::string& prefix) {
    try {
        data::IndexedDataset d(prefix);
    } catch (const core::SpecError& e) {
        EXPECT_EQ(e.field(), "--data-path");
        return e.reason();
    }
    ADD_FAILURE() << "damaged dataset was accepted";
    return {};
}

} // namespace

TEST(IndexedDataset, WritesMegatronsByteLayout) {
    const std::string p = temp_prefix("layout");
    data::IndexedDatasetWriter w(p, data::TokenDtype::uint16);
    const std::vector<std::int32_t> a{1, 2, 3}, b{65535, 7};
    w.add_document(a);
    w.add_document(b);
    w.finish();
    const std::vector<char> idx = bytes_of(p + ".idx");
    ASSERT_EQ(idx.size(), 34u + 2 * 4 + 2 * 8 + 3 * 8);
    EXPECT_EQ(std::memcmp(idx.data(), "MMIDIDX\0\0", 9), 0);
    std::uint64_t version, n, d;
    std::memcpy(&version, idx.data() + 9, 8);
    std::memcpy(&n, idx.data() + 18, 8);
    std::memcpy(&d, idx.data() + 26, 8);
    EXPECT_EQ(version, 1u);
    EXPECT_EQ(idx[17], 8); // uint16
    EXPECT_EQ(n, 2u);
    EXPECT_EQ(d, 3u);
    std::int32_t len1;
    std::int64_t off1, doc2;
    std::memcpy(&len1, idx.data() + 34 + 4, 4);
    std::memcpy(&off1, idx.data() + 34 + 8 + 8, 8);
    std::memcpy(&doc2, idx.data() + 34 + 8 + 16 + 16, 8);
    EXPECT_EQ(len1, 2);
    EXPECT_EQ(off1, 6); // three uint16 ids before it
    EXPECT_EQ(doc2, 2);
    EXPECT_EQ(bytes_of(p + ".bin").size(), 10u);
    EXPECT_FALSE(fs::exists(p + ".bin.partial"));
}

TEST(IndexedDataset, RoundTripsBothDtypes) {
    for (const auto dtype : {data::TokenDtype::uint16, data::TokenDtype::int32}) {
        const std::string p = temp_prefix("roundtrip" + std::to_string(int(dtype)));
        std::vector<std::vector<std::int32_t>> docs;
        {
            data::IndexedDatasetWriter w(p, dtype);
            for (int d = 0; d < 50; ++d) {
                std::vector<std::int32_t> doc(std::size_t(d % 7 + (d == 3 ? 0 : 1)));
                for (std::size_t i = 0; i < doc.size(); ++i)
                    doc[i] = std::int32_t((d * 131 + i * 17) % 60000);
                w.add_document(doc);
                docs.push_back(doc);
            }
            w.finish();
        }
        const data::IndexedDataset ds(p);
        ASSERT_EQ(ds.sequences(), 50);
        ASSERT_EQ(ds.documents(), 50);
        EXPECT_EQ(ds.dtype(), dtype);
        for (std::size_t d = 0; d < docs.size(); ++d) {
            ASSERT_EQ(ds.length(std::int64_t(d)), std::int64_t(docs[d].size()));
            std::vector<std::int32_t> got(docs[d].size());
            ds.read(std::int64_t(d), 0, std::int64_t(got.size()), got.data());
            EXPECT_EQ(got, docs[d]);
        }
    }
}

// Megatron's --data-path is a prefix, but P.bin or P.idx given in its place opens P too.
TEST(IndexedDataset, AFileNameInPlaceOfThePrefixOpensTheDataset) {
    const std::string p = temp_prefix("suffix");
    {
        data::IndexedDatasetWriter w(p, data::TokenDtype::uint16);
        w.add_document(std::vector<std::int32_t>{1, 2, 3});
        w.add_document(std::vector<std::int32_t>{4, 5});
        w.finish();
    }
    for (const std::string& given : {p + ".bin", p + ".idx"}) {
        const data::IndexedDataset ds(given);
        EXPECT_EQ(ds.documents(), 2) << given;
        EXPECT_EQ(ds.length(1), 2) << given;
    }
    const std::string missing = expect_refused(p + "-missing.bin");
    EXPECT_NE(missing.find(p + "-missing.bin"), std::string::npos) << missing;
    EXPECT_EQ(missing.find(".bin.bin"), std::string::npos) << missing;
}

TEST(IndexedDataset, DtypeFollowsTheVocabulary) {
    EXPECT_EQ(data::token_dtype_for(50257), data::TokenDtype::uint16);
    EXPECT_EQ(data::token_dtype_for(128256), data::TokenDtype::int32);
}

TEST(IndexedDataset, RefusesIdsThatDoNotFit) {
    data::IndexedDatasetWriter w(temp_prefix("toolarge"), data::TokenDtype::uint16);
    const std::vector<std::int32_t> doc{70000};
    EXPECT_THROW(w.add_document(doc), core::SpecError);
}

TEST(IndexedDataset, UnfinishedWriterLeavesNothing) {
    const std::string p = temp_prefix("unfinished");
    {
        data::IndexedDatasetWriter w(p, data::TokenDtype::uint16);
        const std::vector<std::int32_t> doc{1, 2};
        w.add_document(doc);
    }
    EXPECT_FALSE(fs::exists(p + ".bin"));
    EXPECT_FALSE(fs::exists(p + ".bin.partial"));
    EXPECT_FALSE(fs::exists(p + ".idx"));
}

TEST(IndexedDataset, RefusesDamagedFiles) {
    const std::string p = temp_prefix("damaged");
    {
        data::IndexedDatasetWriter w(p, data::TokenDtype::uint16);
        const std::vector<std::int32_t> a{1, 2, 3, 4}, b{5, 6};
        w.add_document(a);
        w.add_document(b);
        w.finish();
    }
    const std::vector<char> idx = bytes_of(p + ".idx"), bin = bytes_of(p + ".bin");
    EXPECT_NE(expect_refused(temp_prefix("missing")).find("cannot open"), std::string::npos);

    std::vector<char> bad = idx;
    bad[0] = 'X';
    write_bytes(p + ".idx", bad);
    EXPECT_NE(expect_refused(p).find("magic"), std::string::npos);

    bad = idx;
    bad.resize(bad.size() - 5);
    write_bytes(p + ".idx", bad);
    EXPECT_NE(expect_refused(p).find("truncated"), std::string::npos);

    bad = idx;
    bad[17] = 7; // float32
    write_bytes(p + ".idx", bad);
    EXPECT_NE(expect_refused(p).find("dtype"), std::string::npos);

    bad = idx;
    bad[18] = 100; // sequence count no longer matches the file length
    write_bytes(p + ".idx", bad);
    EXPECT_NE(expect_refused(p).find("does not match"), std::string::npos);

    write_bytes(p + ".idx", idx);
    std::vector<char> short_bin = bin;
    short_bin.pop_back();
    write_bytes(p + ".bin", short_bin);
    EXPECT_NE(expect_refused(p).find(".bin"), std::string::npos);

    write_bytes(p + ".bin", bin);
    EXPECT_NO_THROW(data::IndexedDataset ok(p));
}
