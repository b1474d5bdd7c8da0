#include "trident/data/gpt_dataset.h"

#include "trident/core/hash.h"
#include "trident/core/spec_error.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>

namespace trident::data {
namespace {

using core::splitmix64;

// Fisher–Yates over splitmix64 rather than std::shuffle, whose algorithm the standard leaves
// to the library: the same order on every platform.
void shuffle(std::vector<std::int64_t>& v, std::uint64_t seed) {
    std::uint64_t state = seed;
    for (std::size_t i = v.size(); i > 1; --i) {
        state = splitmix64(state);
        // Multiply-shift maps 64 random bits to [0, i) without a modulo bias worth the name.
        const std::size_t j = std::size_t((unsigned __int128)state * i >> 64);
        std::swap(v[i - 1], v[j]);
    }
}

} // namespace

std::vector<double> parse_split(const std::string& text) {
    std::vector<double> weights;
    std::stringstream in(text);
    std::string item;
    while (std::getline(in, item, ',')) {
        char* end = nullptr;
        const double w = std::strtod(item.c_str(), &end);
        if (item.empty() || *end != '\0' || !std::isfinite(w) || w < 0)
            throw core::SpecError("--split", "'" + text +
                                                 "' is not a list of non-negative weights "
                                                 "such as 98,2,0");
        weights.push_back(w);
    }
    if (weights.size() < 2 || weights.size() > 3)
        throw core::SpecError("--split", "'" + text +
                                             "' needs two or three weights "
                                             "(train, validation[, test])");
    const double total = std::accumulate(weights.begin(), weights.end(), 0.0);
    if (total <= 0 || weights[0] <= 0)
        throw core::SpecError("--split", "'" + text + "' gives the training split nothing");
    for (double& w : weights) w /= total;
    return weights;
}

std::vector<DocumentRange> split_documents(std::int64_t documents,
                                           const std::vector<double>& weights) {
    std::vector<std::int64_t> bounds{0};
    double cumulative = 0.0;
    for (const double w : weights) {
        cumulative += w;
        bounds.push_back(std::int64_t(std::llround(cumulative * double(documents))));
    }
    const std::int64_t shift = bounds.back() - documents;
    for (std::size_t i = 1; i < bounds.size(); ++i) bounds[i] -= shift;
    std::vector<DocumentRange> ranges;
    for (std::size_t i = 0; i + 1 < bounds.size(); ++i)
        ranges.push_back({std::max<std::int64_t>(0, bounds[i]), bounds[i + 1]});
    return ranges;
}

GptDataset::GptDataset(std::shared_ptr<const IndexedDataset> data, DocumentRange documents,
                       std::int64_t seq_length, std::uint64_t seed, std::string name)
    : data_(std::move(data)), documents_(documents), seq_length_(seq_length), seed_(seed),
      name_(std::move(name)) {
    const auto& starts = data_->document_starts();
    for (std::int64_t d = documents_.begin; d < documents_.end; ++d)
        for (std::int64_t s = starts[std::size_t(d)]; s < starts[std::size_t(d + 1)]; ++s)
            tokens_per_epoch_ += data_->length(s);
    samples_per_epoch_ = tokens_per_epoch_ > 0 ? (tokens_per_epoch_ - 1) / seq_length_ : 0;
    if (samples_per_epoch_ < 1)
        throw core::SpecError("--data-path",
                              "the " + name_ + " split has " + std::to_string(documents_.size()) +
                                  " documents and " + std::to_string(tokens_per_epoch_) +
                                  " tokens, fewer than one sample of seq_length + 1 = " +
                                  std::to_string(seq_length_ + 1) +
                                  " (use more data or change --split)");
}

void GptDataset::build_epoch(std::int64_t epoch) {
    const std::uint64_t salt =
        splitmix64(seed_ ^ core::fnv1a(name_)) ^ splitmix64(std::uint64_t(epoch));
    document_order_.resize(std::size_t(documents_.size()));
    std::iota(document_order_.begin(), document_order_.end(), documents_.begin);
    shuffle(document_order_, salt);
    document_offsets_.assign(1, 0);
    const auto& starts = data_->document_starts();
    for (const std::int64_t d : document_order_) {
        std::int64_t tokens = 0;
        for (std::int64_t s = starts[std::size_t(d)]; s < starts[std::size_t(d + 1)]; ++s)
            tokens += data_->length(s);
        document_offsets_.push_back(document_offsets_.back() + tokens);
    }
    sample_order_.resize(std::size_t(samples_per_epoch_));
    std::iota(sample_order_.begin(), sample_order_.end(), 0);
    shuffle(sample_order_, splitmix64(salt + 1));
    epoch_ = epoch;
}

void GptDataset::sample(std::int64_t index, std::int64_t vocab_size, std::int32_t* out) {
    const std::int64_t epoch = index / samples_per_epoch_;
    if (epoch != epoch_) build_epoch(epoch);
    const std::int64_t first = sample_order_[std::size_t(index % samples_per_epoch_)] * seq_length_;
    // The document holding the sample's first token, then forward across documents.
    std::size_t doc =
        std::size_t(std::upper_bound(document_offsets_.begin(), document_offsets_.end(), first) -
                    document_offsets_.begin() - 1);
    std::int64_t at = first, written = 0;
    const auto& starts = data_->document_starts();
    while (written < seq_length_ + 1) {
        // Within document `doc`: its sequences back to back.
        std::int64_t skip = at - document_offsets_[doc];
        const std::int64_t d = document_order_[doc];
        for (std::int64_t s = starts[std::size_t(d)];
             s < starts[std::size_t(d + 1)] && written < seq_length_ + 1; ++s) {
            const std::int64_t len = data_->length(s);
            if (skip >= len) {
                skip -= len;
                continue;
            }
            const std::int64_t take = std::min(len - skip, seq_length_ + 1 - written);
            data_->read(s, skip, take, out + written);
            written += take;
            at += take;
            skip = 0;
        }
        ++doc;
    }
    for (std::int64_t i = 0; i <= seq_length_; ++i)
        if (out[i] < 0 || out[i] >= vocab_size)
            throw core::SpecError("--data-path", "token id " + std::to_string(out[i]) +
                                                     " is outside the model's vocabulary of " +
                                                     std::to_string(vocab_size) +
                                                     " (was the data made with another "
                                                     "tokenizer?)");
}

} // namespace trident::data
