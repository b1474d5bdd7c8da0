// Reading and writing GPT-2's vocab.json and merges.txt.
#include "trident/core/atomic_file.h"
#include "trident/core/json_io.h"
#include "trident/core/spec_error.h"
#include "trident/data/bpe_tokenizer.h"
#include "trident/data/gpt2_byte_alphabet.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace trident::data {
namespace {

std::ifstream open_for_reading(const std::string& path) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) throw core::SpecError(path, "no such file");
    if (std::filesystem::is_directory(path, ec))
        throw core::SpecError(path, "is a directory, not a file");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw core::SpecError(path, "cannot be read (permission denied?)");
    return in;
}

// A token as people read it in an error message: its vocab.json spelling, quoted.
std::string json_quoted(std::string_view gpt2_text) {
    return nlohmann::json(std::string(gpt2_text))
        .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// vocab.json: id -> token bytes, with every rule of the format checked.
std::vector<std::string> read_vocab(const std::string& path) {
    std::ifstream in = open_for_reading(path);
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad()) throw core::SpecError(path, "read error");
    // The one JSON reader: syntax errors with line and column, numbers out of range (1e400).
    const nlohmann::json vocab = core::parse_json_text(text.str(), path);
    if (!vocab.is_object() || vocab.empty())
        throw core::SpecError(path, "must be a JSON object mapping each token to its id "
                                    "(GPT-2's vocab.json)");
    const std::size_t size = vocab.size();
    std::vector<std::string> tokens(size);
    std::vector<bool> seen(size, false);
    for (const auto& [text, value] : vocab.items()) {
        if (!value.is_number_integer() || value.get<std::int64_t>() < 0 ||
            value.get<std::int64_t>() >= std::int64_t(size))
            throw core::SpecError(path, "token " + json_quoted(text) + " has id " + value.dump() +
                                            "; ids must be the integers 0.." +
                                            std::to_string(size - 1));
        const auto id = std::size_t(value.get<std::int64_t>());
        if (seen[id])
            throw core::SpecError(path, "id " + std::to_string(id) + " is used twice (again by " +
                                            json_quoted(text) + ")");
        auto bytes = gpt2_text_to_bytes(text);
        if (!bytes)
            throw core::SpecError(path, "token " + json_quoted(text) +
                                            " has a character outside GPT-2's byte alphabet "
                                            "(not a byte-level BPE vocabulary)");
        seen[id] = true;
        tokens[id] = std::move(*bytes);
    }
    return tokens;
}

// Splits "LEFT RIGHT" (one space; a trailing '\r' tolerated); false for any other shape.
bool split_merge_line(std::string_view line, std::string_view& left, std::string_view& right) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const std::size_t space = line.find(' ');
    if (space == std::string_view::npos || space == 0 || space + 1 == line.size()) return false;
    left = line.substr(0, space);
    right = line.substr(space + 1);
    return right.find(' ') == std::string_view::npos;
}

} // namespace

BpeTokenizer BpeTokenizer::load(const std::string& vocab_json_path,
                                const std::string& merges_txt_path) {
    BpeTokenizer tokenizer(read_vocab(vocab_json_path));
    for (int byte = 0; byte < 256; ++byte)
        if (tokenizer.byte_ids_[std::size_t(byte)] < 0)
            throw core::SpecError(vocab_json_path,
                                  "has no token for the byte " + std::to_string(byte) + " (" +
                                      json_quoted(bytes_to_gpt2_text(std::string(1, char(byte)))) +
                                      "); a byte-level BPE vocabulary has all 256");
    if (tokenizer.eod_ < 0)
        throw core::SpecError(vocab_json_path, "has no <|endoftext|> token (the document "
                                               "separator every GPT-2 vocabulary has)");

    std::ifstream in = open_for_reading(merges_txt_path);
    std::string line;
    for (std::size_t line_number = 1; std::getline(in, line); ++line_number) {
        if (line_number == 1 && line.starts_with("#version")) continue;
        if (line.empty() || line == "\r") continue;
        const std::string where = merges_txt_path + ":" + std::to_string(line_number);
        std::string_view left_text, right_text;
        if (!split_merge_line(line, left_text, right_text))
            throw core::SpecError(where, "expected two tokens separated by one space, got " +
                                             json_quoted(line));
        std::optional<std::int32_t> sides[2];
        const std::string_view texts[2] = {left_text, right_text};
        for (int side = 0; side < 2; ++side) {
            if (auto bytes = gpt2_text_to_bytes(texts[side]))
                sides[side] = tokenizer.token_id(*bytes);
            if (!sides[side])
                throw core::SpecError(where, "token " + json_quoted(texts[side]) + " is not in " +
                                                 vocab_json_path);
        }
        if (!tokenizer.token_id(tokenizer.token_bytes(*sides[0]) +
                                tokenizer.token_bytes(*sides[1])))
            throw core::SpecError(
                where, "the merged token " +
                           json_quoted(std::string(left_text) + std::string(right_text)) +
                           " is not in " + vocab_json_path);
        if (!tokenizer.add_merge(*sides[0], *sides[1]))
            throw core::SpecError(where, "repeats an earlier merge");
    }
    if (in.bad()) throw core::SpecError(merges_txt_path, "read error");
    return tokenizer;
}

void BpeTokenizer::save(const std::string& directory) const {
    std::error_code ec;
    std::filesystem::create_directories(directory, ec);
    if (ec) throw core::SpecError(directory, "cannot create the directory: " + ec.message());
    // Written by hand rather than through a JSON object so the keys stay in id order, like
    // GPT-2's file; non-ASCII characters are \u-escaped as Python's json.dumps does.
    std::string vocab = "{";
    for (std::size_t id = 0; id < tokens_.size(); ++id) {
        if (id > 0) vocab += ", ";
        vocab += nlohmann::json(bytes_to_gpt2_text(tokens_[id])).dump(-1, ' ', true);
        vocab += ": " + std::to_string(id);
    }
    vocab += "}\n";
    std::string merges = "#version: 0.2\n";
    for (const Merge& m : merges_)
        merges += bytes_to_gpt2_text(tokens_[std::size_t(m.left)]) + " " +
                  bytes_to_gpt2_text(tokens_[std::size_t(m.right)]) + "\n";
    const std::string vocab_path = (std::filesystem::path(directory) / "vocab.json").string();
    const std::string merges_path = (std::filesystem::path(directory) / "merges.txt").string();
    core::write_file_atomically(vocab_path, vocab, vocab_path);
    core::write_file_atomically(merges_path, merges, merges_path);
}

} // namespace trident::data
