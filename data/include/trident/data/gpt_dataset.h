#pragma once
// GPT training samples from an indexed dataset, as Megatron's GPTDataset builds them: the
// documents of a split, in a shuffled order per epoch, read as one stream of tokens and cut
// into samples of seq_length + 1 tokens (inputs and their next-token targets) that cross
// document boundaries; consecutive samples share one token. The sample order within each
// epoch is shuffled too. Everything follows from (seed, split, sample index), so a run that
// resumes at sample k reads exactly what the uninterrupted run read.
#include "trident/data/indexed_dataset.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace trident::data {

// Megatron's --split: comma-separated weights, "98,2" or "98,2,0" (train, validation, test);
// normalised. Throws SpecError("--split", …).
std::vector<double> parse_split(const std::string& text);

struct DocumentRange {
    std::int64_t begin = 0, end = 0; // [begin, end) document indices
    std::int64_t size() const { return end - begin; }
};

// Contiguous document ranges in the proportions of `weights`, rounded as Megatron does
// (cumulative boundaries, then shifted so the last one ends at `documents`).
std::vector<DocumentRange> split_documents(std::int64_t documents,
                                           const std::vector<double>& weights);

class GptDataset {
public:
    // `name` salts the shuffle ("train", "valid") so the splits draw independent orders.
    // Throws SpecError("--data-path", …) when the split is too small for one sample.
    GptDataset(std::shared_ptr<const IndexedDataset> data, DocumentRange documents,
               std::int64_t seq_length, std::uint64_t seed, std::string name);

    std::int64_t samples_per_epoch() const { return samples_per_epoch_; }
    std::int64_t tokens_per_epoch() const { return tokens_per_epoch_; }
    std::int64_t seq_length() const { return seq_length_; }

    // Sample `index` (any index ≥ 0: later epochs reshuffle) into out[0 … seq_length].
    // Ids at or above `vocab_size` are refused (SpecError naming the dataset).
    void sample(std::int64_t index, std::int64_t vocab_size, std::int32_t* out);

private:
    void build_epoch(std::int64_t epoch);

    std::shared_ptr<const IndexedDataset> data_;
    DocumentRange documents_;
    std::int64_t seq_length_;
    std::uint64_t seed_;
    std::string name_;
    std::int64_t tokens_per_epoch_ = 0, samples_per_epoch_ = 0;
    // The epoch last built: document order, token offset of each document in the stream
    // (plus the total at the end), and the sample order.
    std::int64_t epoch_ = -1;
    std::vector<std::int64_t> document_order_, document_offsets_, sample_order_;
};

} // namespace trident::data
