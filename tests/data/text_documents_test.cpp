// TextDocuments: paragraphs of plain text, JSONL "text" fields, errors naming file and line.
#include "trident/core/spec_error.h"
#include "trident/data/text_documents.h"

#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <unistd.h>

namespace fs = std::filesystem;
using namespace trident;

namespace {

std::string write_temp(const std::string& name, const std::string& content) {
    const fs::path dir = fs::temp_directory_path() / ("trident_docs_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    const std::string path = (dir / name).string();
    std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
    return path;
}

std::vector<std::string> read_all(data::TextDocuments& documents) {
    std::vector<std::string> all;
    for (std::string d; documents.next(d);) all.push_back(d);
    return all;
}

core::SpecError refusal(const std::vector<std::string>& paths) {
    try {
        data::TextDocuments documents(paths);
        read_all(documents);
    } catch (const core::SpecError& e) {
        return e;
    }
    ADD_FAILURE() << "accepted";
    return core::SpecError("", "");
}

} // namespace

TEST(TextDocuments, ParagraphsSplitOnBlankLinesAndKeepTheirBytes) {
    const std::string text = "\n\nFirst line\n  indented second line\t\n\n\n \t\nSecond\r\n"
                             "still second\r\n\r\nThird, no final newline";
    const std::string path = write_temp("paragraphs.txt", text);
    data::TextDocuments documents({path});
    EXPECT_EQ(documents.total_bytes(), text.size());
    EXPECT_EQ(read_all(documents),
              (std::vector<std::string>{"First line\n  indented second line\t",
                                        "Second\r\nstill second", "Third, no final newline"}));
    EXPECT_EQ(documents.bytes_read(), text.size());
    EXPECT_EQ(documents.documents_read(), 3u);
}

TEST(TextDocuments, ReadsFilesInOrderAndNeverJoinsAcrossThem) {
    const std::string a = write_temp("a.txt", "one\ntwo"), b = write_temp("b.txt", "three\n");
    const std::string c = write_temp("c.jsonl", "{\"text\": \"four\"}\n");
    data::TextDocuments documents({a, b, c});
    EXPECT_EQ(read_all(documents), (std::vector<std::string>{"one\ntwo", "three", "four"}));
    EXPECT_EQ(documents.bytes_read(), documents.total_bytes());
}

TEST(TextDocuments, AnEmptyFileHasNoDocuments) {
    data::TextDocuments documents({write_temp("empty.txt", ""), write_temp("blank.txt", "\n \n")});
    EXPECT_TRUE(read_all(documents).empty());
}

TEST(TextDocuments, LongLinesAreWhole) {
    const std::string line(3'000'000, 'x');
    data::TextDocuments documents({write_temp("long.txt", line + "\n\n" + line)});
    const auto all = read_all(documents);
    ASSERT_EQ(all.size(), 2u);
    EXPECT_EQ(all[0], line);
    EXPECT_EQ(all[1], line);
}

TEST(TextDocuments, JsonLinesTakeTheTextFieldAndSkipBlankLines) {
    const std::string path = write_temp(
        "docs.jsonl", "{\"text\": \"a\\nb\", \"id\": 1, \"meta\": {\"x\": [1]}}\n\n   \n"
                      "{\"id\": 2, \"text\": \"\\u00fc \\ud83d\\ude00\"}\r\n{\"text\": \"\"}");
    data::TextDocuments documents({path});
    EXPECT_EQ(read_all(documents), (std::vector<std::string>{"a\nb", "ü 😀", ""}));
}

TEST(TextDocuments, DotJsonIsReadAsJsonLines) {
    data::TextDocuments documents(
        {write_temp("docs.json", "{\"text\": \"x\"}\n{\"text\": \"y\"}\n")});
    EXPECT_EQ(read_all(documents), (std::vector<std::string>{"x", "y"}));
}

TEST(TextDocuments, MalformedJsonLineIsNamedByFileAndLine) {
    const std::string path =
        write_temp("bad.jsonl", "{\"text\": \"ok\"}\n\n{\"text\": \"unterminated\n");
    const auto e = refusal({path});
    EXPECT_EQ(e.field(), path + ":3");
    EXPECT_NE(e.reason().find("not valid JSON"), std::string::npos) << e.reason();
}

TEST(TextDocuments, NumberTooLargeForADoubleIsRefusedNotThrownThrough) {
    const std::string path = write_temp("huge.jsonl", "{\"text\": \"ok\", \"n\": 1e999}\n");
    const auto e = refusal({path});
    EXPECT_EQ(e.field(), path + ":1");
    EXPECT_NE(e.reason().find("number out of range"), std::string::npos) << e.reason();
}

TEST(TextDocuments, MissingOrNonStringTextIsRefused) {
    const std::string missing =
        write_temp("missing.jsonl", "{\"text\": \"ok\"}\n{\"body\": \"x\"}\n");
    auto e = refusal({missing});
    EXPECT_EQ(e.field(), missing + ":2");
    EXPECT_NE(e.reason().find("no \"text\""), std::string::npos) << e.reason();

    const std::string number = write_temp("number.jsonl", "{\"text\": 5}\n");
    e = refusal({number});
    EXPECT_EQ(e.field(), number + ":1");
    EXPECT_NE(e.reason().find("must be a string"), std::string::npos) << e.reason();

    const std::string array = write_temp("array.jsonl", "[\"text\"]\n");
    e = refusal({array});
    EXPECT_EQ(e.field(), array + ":1");
    EXPECT_NE(e.reason().find("JSON object"), std::string::npos) << e.reason();
}

TEST(TextDocuments, MissingFilesAreRefusedBeforeReading) {
    const std::string good = write_temp("good.txt", "text");
    const std::string missing = good + ".does-not-exist";
    try {
        data::TextDocuments documents({good, missing});
        FAIL() << "accepted a missing file";
    } catch (const core::SpecError& e) {
        EXPECT_EQ(e.field(), missing);
        EXPECT_EQ(e.reason(), "no such file");
    }
    const auto e = refusal({fs::path(good).parent_path().string()});
    EXPECT_NE(e.reason().find("directory"), std::string::npos) << e.reason();
}
