#pragma once
// BpeTokenizer: GPT-2's byte-level BPE. Text is split into pieces (gpt2_pretokenizer.h), each
// piece starts as its bytes' tokens, and merges apply in rank order within a piece. Every byte
// has a token, so any byte string encodes and decode(encode(x)) == x.
//
// Files are GPT-2's: vocab.json maps each token, written in GPT-2's byte alphabet
// (gpt2_byte_alphabet.h), to its id; merges.txt lists one merge "LEFT RIGHT" per line in rank
// order after an optional "#version" line. `load` reads GPT-2's own files; `train` learns a
// vocabulary from text and `save` writes it in the same format.
#include "trident/data/text_documents.h"

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace trident::data {

class BpeTokenizer {
public:
    // The document separator: the last id of a trained vocabulary; GPT-2's is 50256.
    static constexpr std::string_view kEndOfText = "<|endoftext|>";

    // Reads GPT-2-format files. SpecError{path, reason} (or {"merges.txt path:LINE", reason})
    // for a missing or malformed file, a vocabulary without all 256 byte tokens or without
    // <|endoftext|>, or a merge of tokens the vocabulary lacks.
    static BpeTokenizer load(const std::string& vocab_json_path,
                             const std::string& merges_txt_path);

    // Called now and then while training: the phase ("counting words", "merging") and how far
    // through it, 0..1.
    using Progress = std::function<void(std::string_view phase, double fraction)>;

    // Learns a vocabulary of exactly `vocab_size` tokens from the documents: ids 0..255 are the
    // bytes in GPT-2's order, then one token per learned merge, then <|endoftext|> last. Each
    // step merges the most frequent adjacent pair (ties: the smaller left id, then the smaller
    // right id), so the result depends on the text alone. SpecError{"--vocab-size", ...} when
    // vocab_size < 257 or the text has too few distinct pairs to reach it.
    static BpeTokenizer train(TextDocuments& documents, std::int32_t vocab_size,
                              const Progress& progress = {});

    // Writes DIRECTORY/vocab.json and DIRECTORY/merges.txt (atomically), creating DIRECTORY.
    void save(const std::string& directory) const;

    // Appends the ids of `text`. Reads only immutable state: safe from several threads at once.
    void encode(std::string_view text, std::vector<std::int32_t>& out) const;

    // The bytes the ids stand for; SpecError{"token id", ...} for an id outside the vocabulary.
    std::string decode(std::span<const std::int32_t> ids) const;

    std::int32_t vocab_size() const { return std::int32_t(tokens_.size()); }
    std::int32_t eod() const { return eod_; } // the id of <|endoftext|>
    std::size_t merge_count() const { return merges_.size(); }

    // A token's bytes, and the id of a byte string when it is a token.
    const std::string& token_bytes(std::int32_t id) const { return tokens_.at(std::size_t(id)); }
    std::optional<std::int32_t> token_id(std::string_view bytes) const;

    struct Merge {
        std::int32_t left = 0, right = 0;
    };
    // The merges in rank order (rank 0 first).
    const std::vector<Merge>& merges() const { return merges_; }

private:
    struct StringHash {
        using is_transparent = void;
        std::size_t operator()(std::string_view s) const {
            return std::hash<std::string_view>{}(s);
        }
    };
    struct MergeResult {
        std::int32_t rank = 0;
        std::int32_t token = 0;
    };

    // Indexes `tokens` (id -> bytes); every byte must be a token. Merges are added after.
    explicit BpeTokenizer(std::vector<std::string> tokens);
    // Appends the next-ranked merge; false when LEFT+RIGHT is not a token or the pair repeats.
    bool add_merge(std::int32_t left, std::int32_t right);
    struct MergeScratch; // per-call working memory of encode_piece
    void encode_piece(std::string_view piece, MergeScratch& scratch,
                      std::vector<std::int32_t>& out) const;
    const MergeResult* find_merge(std::int32_t left, std::int32_t right) const;

    std::vector<std::string> tokens_; // id -> bytes
    std::unordered_map<std::string, std::int32_t, StringHash, std::equal_to<>> ids_;
    std::array<std::int32_t, 256> byte_ids_{};
    std::vector<Merge> merges_;
    std::unordered_map<std::uint64_t, MergeResult> merge_table_; // (left << 32 | right)
    std::int32_t eod_ = -1;
};

} // namespace trident::data
