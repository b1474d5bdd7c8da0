// BpeTokenizer's tables, encoding and decoding (files: bpe_tokenizer_files.cpp; training:
// bpe_trainer.cpp).
#include "trident/data/bpe_tokenizer.h"

#include "trident/core/spec_error.h"
#include "trident/data/gpt2_pretokenizer.h"

#include <algorithm>

namespace trident::data {
namespace {

std::uint64_t pair_key(std::int32_t left, std::int32_t right) {
    return std::uint64_t(std::uint32_t(left)) << 32 | std::uint32_t(right);
}

} // namespace

BpeTokenizer::BpeTokenizer(std::vector<std::string> tokens) : tokens_(std::move(tokens)) {
    ids_.reserve(tokens_.size());
    byte_ids_.fill(-1);
    for (std::size_t id = 0; id < tokens_.size(); ++id) {
        ids_.emplace(tokens_[id], std::int32_t(id));
        if (tokens_[id].size() == 1)
            byte_ids_[static_cast<unsigned char>(tokens_[id][0])] = std::int32_t(id);
    }
    if (auto eod = token_id(kEndOfText)) eod_ = *eod;
}

std::optional<std::int32_t> BpeTokenizer::token_id(std::string_view bytes) const {
    const auto found = ids_.find(bytes);
    if (found == ids_.end()) return std::nullopt;
    return found->second;
}

bool BpeTokenizer::add_merge(std::int32_t left, std::int32_t right) {
    const auto merged = token_id(token_bytes(left) + token_bytes(right));
    if (!merged) return false;
    const MergeResult result{std::int32_t(merges_.size()), *merged};
    if (!merge_table_.emplace(pair_key(left, right), result).second) return false;
    merges_.push_back({left, right});
    return true;
}

const BpeTokenizer::MergeResult* BpeTokenizer::find_merge(std::int32_t left,
                                                          std::int32_t right) const {
    const auto found = merge_table_.find(pair_key(left, right));
    return found == merge_table_.end() ? nullptr : &found->second;
}

struct BpeTokenizer::MergeScratch {
    struct Symbol {
        std::int32_t token;
        std::int32_t prev, next; // indices, -1 at the ends; a merged-away symbol has token -1
    };
    struct Candidate {
        std::int32_t rank, left; // left: index of the pair's first symbol
        std::int32_t left_token, right_token;
        // Heap order: the lowest rank on top, then the leftmost.
        bool operator<(const Candidate& o) const {
            return rank != o.rank ? rank > o.rank : left > o.left;
        }
    };
    std::vector<Symbol> symbols;
    std::vector<Candidate> heap;
};

// Applies merges by rank like GPT-2's loop (lowest-ranked pair first, equal pairs left to
// right), in O(n log n) rather than O(n^2): symbols form a linked list and candidate pairs wait
// in a heap ordered by (rank, position); a popped candidate whose symbols changed is stale.
void BpeTokenizer::encode_piece(std::string_view piece, MergeScratch& scratch,
                                std::vector<std::int32_t>& out) const {
    if (piece.size() == 1) {
        out.push_back(byte_ids_[static_cast<unsigned char>(piece[0])]);
        return;
    }
    auto& symbols = scratch.symbols;
    auto& heap = scratch.heap;
    const auto n = std::int32_t(piece.size());
    symbols.resize(piece.size());
    for (std::int32_t i = 0; i < n; ++i)
        symbols[std::size_t(i)] = {byte_ids_[static_cast<unsigned char>(piece[std::size_t(i)])],
                                   i - 1, i + 1 < n ? i + 1 : -1};
    heap.clear();
    auto offer = [&](std::int32_t left) {
        const std::int32_t right = symbols[std::size_t(left)].next;
        if (right < 0) return;
        const std::int32_t a = symbols[std::size_t(left)].token;
        const std::int32_t b = symbols[std::size_t(right)].token;
        if (const MergeResult* m = find_merge(a, b)) {
            heap.push_back({m->rank, left, a, b});
            std::push_heap(heap.begin(), heap.end());
        }
    };
    for (std::int32_t i = 0; i + 1 < n; ++i) offer(i);
    while (!heap.empty()) {
        std::pop_heap(heap.begin(), heap.end());
        const MergeScratch::Candidate c = heap.back();
        heap.pop_back();
        auto& left = symbols[std::size_t(c.left)];
        if (left.token != c.left_token || left.next < 0) continue;
        auto& right = symbols[std::size_t(left.next)];
        if (right.token != c.right_token) continue;
        left.token = find_merge(c.left_token, c.right_token)->token;
        right.token = -1;
        left.next = right.next;
        if (right.next >= 0) symbols[std::size_t(right.next)].prev = c.left;
        if (left.prev >= 0) offer(left.prev);
        offer(c.left);
    }
    for (std::int32_t i = 0; i >= 0; i = symbols[std::size_t(i)].next)
        out.push_back(symbols[std::size_t(i)].token);
}

void BpeTokenizer::encode(std::string_view text, std::vector<std::int32_t>& out) const {
    MergeScratch scratch;
    Gpt2Pretokenizer pieces(text);
    for (std::string_view piece; pieces.next(piece);) encode_piece(piece, scratch, out);
}

std::string BpeTokenizer::decode(std::span<const std::int32_t> ids) const {
    std::string text;
    for (const std::int32_t id : ids) {
        if (id < 0 || id >= vocab_size())
            throw core::SpecError("token id", std::to_string(id) + " is outside the vocabulary (" +
                                                  std::to_string(vocab_size()) + " tokens)");
        text += tokens_[std::size_t(id)];
    }
    return text;
}

} // namespace trident::data
