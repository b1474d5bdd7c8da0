// BpeTokenizer::train: count the pre-tokenized words, then merge the most frequent adjacent
// pair again and again, updating pair counts only around the merged occurrences.
#include "trident/core/spec_error.h"
#include "trident/data/bpe_tokenizer.h"
#include "trident/data/gpt2_byte_alphabet.h"
#include "trident/data/gpt2_pretokenizer.h"

#include <algorithm>
#include <queue>

namespace trident::data {
namespace {

struct StringHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using WordCounts = std::unordered_map<std::string, std::int64_t, StringHash, std::equal_to<>>;

struct Word {
    std::vector<std::int32_t> symbols; // token ids
    std::int64_t count = 0;            // occurrences in the text
};

using PairKey = std::uint64_t; // left << 32 | right

PairKey pair_key(std::int32_t left, std::int32_t right) {
    return PairKey(std::uint32_t(left)) << 32 | std::uint32_t(right);
}
std::int32_t left_of(PairKey p) {
    return std::int32_t(p >> 32);
}
std::int32_t right_of(PairKey p) {
    return std::int32_t(p & 0xFFFFFFFFu);
}

// Heap order: the higher count first; among equal counts the smaller (left, right) ids.
struct Candidate {
    std::int64_t count;
    PairKey pair;
    bool operator<(const Candidate& o) const {
        return count != o.count ? count < o.count : pair > o.pair;
    }
};

WordCounts count_words(TextDocuments& documents, const BpeTokenizer::Progress& progress) {
    WordCounts counts;
    std::string document;
    std::uint64_t reported_bytes = 0;
    while (documents.next(document)) {
        Gpt2Pretokenizer pieces(document);
        for (std::string_view piece; pieces.next(piece);) {
            auto found = counts.find(piece);
            if (found == counts.end())
                counts.emplace(std::string(piece), 1);
            else
                ++found->second;
        }
        if (progress && documents.bytes_read() - reported_bytes >= (1u << 20)) {
            reported_bytes = documents.bytes_read();
            progress("counting words", double(reported_bytes) / double(std::max<std::uint64_t>(
                                                                    1, documents.total_bytes())));
        }
    }
    if (progress) progress("counting words", 1.0);
    return counts;
}

class MergeLearner {
public:
    explicit MergeLearner(const WordCounts& counts) {
        for (int rank = 0; rank < 256; ++rank) {
            tokens_.emplace_back(1, char(gpt2_byte_at_rank(rank)));
            byte_ids_[gpt2_byte_at_rank(rank)] = rank;
        }
        for (const std::string& token : tokens_) ids_.emplace(token, std::int32_t(ids_.size()));
        words_.reserve(counts.size());
        for (const auto& [text, count] : counts) {
            Word word;
            word.count = count;
            for (unsigned char byte : text) word.symbols.push_back(byte_ids_[byte]);
            words_.push_back(std::move(word));
        }
        // Hash-map iteration order is not portable; sort so ties never depend on it.
        std::sort(words_.begin(), words_.end(),
                  [](const Word& a, const Word& b) { return a.symbols < b.symbols; });
        for (std::uint32_t w = 0; w < words_.size(); ++w) {
            const Word& word = words_[w];
            for (std::size_t i = 0; i + 1 < word.symbols.size(); ++i) {
                const PairKey p = pair_key(word.symbols[i], word.symbols[i + 1]);
                pair_counts_[p] += word.count;
                words_with_[p].push_back(w);
            }
        }
        for (const auto& [p, count] : pair_counts_) heap_.push({count, p});
    }

    std::size_t distinct_tokens() const { return ids_.size(); }
    std::vector<std::string> take_tokens() { return std::move(tokens_); }
    const std::vector<BpeTokenizer::Merge>& merges() const { return merges_; }

    // Learns the next merge; false when no pair is left to merge.
    bool step() {
        for (;;) {
            if (heap_.empty()) return false;
            const Candidate top = heap_.top();
            heap_.pop();
            const auto current = pair_counts_.find(top.pair);
            const std::int64_t count = current == pair_counts_.end() ? 0 : current->second;
            if (count <= 0) continue;
            if (count != top.count) { // stale: its count fell since it was pushed
                heap_.push({count, top.pair});
                continue;
            }
            merge(left_of(top.pair), right_of(top.pair));
            return true;
        }
    }

private:
    void merge(std::int32_t a, std::int32_t b) {
        std::string bytes = tokens_[std::size_t(a)] + tokens_[std::size_t(b)];
        // Two merges can spell the same bytes (ab+c, a+bc); they share one token.
        std::int32_t z;
        if (auto found = ids_.find(bytes); found != ids_.end()) {
            z = found->second;
        } else {
            z = std::int32_t(tokens_.size());
            ids_.emplace(bytes, z);
            tokens_.push_back(std::move(bytes));
        }
        merges_.push_back({a, b});

        const PairKey merged = pair_key(a, b);
        std::vector<std::uint32_t> affected = std::move(words_with_[merged]);
        words_with_.erase(merged);
        std::sort(affected.begin(), affected.end());
        affected.erase(std::unique(affected.begin(), affected.end()), affected.end());
        std::vector<PairKey> created;
        auto change = [&](std::int32_t left, std::int32_t right, std::int64_t delta,
                          std::uint32_t w) {
            const PairKey p = pair_key(left, right);
            pair_counts_[p] += delta;
            if (delta > 0) {
                words_with_[p].push_back(w);
                created.push_back(p);
            }
        };
        for (const std::uint32_t w : affected) {
            Word& word = words_[w];
            std::vector<std::int32_t>& s = word.symbols;
            const std::int64_t c = word.count;
            // Left to right, compacting in place (i reads, j writes): the neighbour on the left
            // is already merged, so overlaps (a a a) count exactly, and a long word costs one
            // pass, not one erase per occurrence.
            std::size_t j = 0;
            for (std::size_t i = 0; i < s.size();) {
                if (i + 1 < s.size() && s[i] == a && s[i + 1] == b) {
                    if (j > 0) {
                        change(s[j - 1], a, -c, w);
                        change(s[j - 1], z, c, w);
                    }
                    change(a, b, -c, w);
                    if (i + 2 < s.size()) {
                        change(b, s[i + 2], -c, w);
                        change(z, s[i + 2], c, w);
                    }
                    s[j++] = z;
                    i += 2;
                } else {
                    s[j++] = s[i++];
                }
            }
            s.resize(j);
        }
        pair_counts_.erase(merged);
        std::sort(created.begin(), created.end());
        created.erase(std::unique(created.begin(), created.end()), created.end());
        for (const PairKey p : created)
            if (const std::int64_t count = pair_counts_[p]; count > 0) heap_.push({count, p});
    }

    std::vector<std::string> tokens_;
    std::unordered_map<std::string, std::int32_t, StringHash, std::equal_to<>> ids_;
    std::int32_t byte_ids_[256] = {};
    std::vector<BpeTokenizer::Merge> merges_;
    std::vector<Word> words_;
    std::unordered_map<PairKey, std::int64_t> pair_counts_;
    std::unordered_map<PairKey, std::vector<std::uint32_t>> words_with_; // may hold stale words
    std::priority_queue<Candidate> heap_;
};

} // namespace

BpeTokenizer BpeTokenizer::train(TextDocuments& documents, std::int32_t vocab_size,
                                 const Progress& progress) {
    if (vocab_size < 257)
        throw core::SpecError("--vocab-size", "must be at least 257 (256 byte tokens and "
                                              "<|endoftext|>), got " +
                                                  std::to_string(vocab_size));
    MergeLearner learner(count_words(documents, progress));
    const auto target = std::size_t(vocab_size - 1); // <|endoftext|> comes last
    std::size_t reported = 0;
    while (learner.distinct_tokens() < target) {
        if (!learner.step())
            throw core::SpecError("--vocab-size",
                                  std::to_string(vocab_size) +
                                      " is more than this text supports: "
                                      "it has no more pairs to merge after " +
                                      std::to_string(learner.distinct_tokens()) +
                                      " tokens; give more text or a vocabulary of at most " +
                                      std::to_string(learner.distinct_tokens() + 1));
        if (progress && learner.distinct_tokens() - reported >= 64) {
            reported = learner.distinct_tokens();
            progress("merging", double(reported - 256) / double(target - 256));
        }
    }
    if (progress) progress("merging", 1.0);
    std::vector<Merge> merges = learner.merges();
    std::vector<std::string> tokens = learner.take_tokens();
    tokens.emplace_back(kEndOfText); // cannot collide: pre-tokens never span "<|" and letters
    BpeTokenizer tokenizer(std::move(tokens));
    for (const Merge& m : merges) tokenizer.add_merge(m.left, m.right);
    return tokenizer;
}

} // namespace trident::data
