#include "training_data.h"

#include "format.h"
#include "trident/data/gpt_dataset.h"

#include <memory>

namespace trident::cli {

TrainingData open_training_data(const std::string& data_path, const std::string& split,
                                const core::JobSpec& job, std::uint64_t seed) {
    TrainingData d;
    const std::int64_t vocab = job.model.vocab_size;
    if (data_path.empty()) { // `train` stays empty: the trainer's own synthetic sequence
        d.description = "synthetic sequences (no --data-path; no validation)";
        return d;
    }
    const auto weights = data::parse_split(split);
    const auto dataset = std::make_shared<const data::IndexedDataset>(data_path);
    const auto ranges = data::split_documents(dataset->documents(), weights);
    const std::int64_t T = job.training.seq_length;
    auto train = std::make_shared<data::GptDataset>(dataset, ranges[0], T, seed, "train");
    d.train = [train, vocab](std::int64_t index, std::int32_t* tokens) {
        train->sample(index, vocab, tokens);
    };
    d.description = data_path + ": " + with_commas(dataset->documents()) + " documents, " +
                    with_commas(dataset->total_tokens()) + " tokens; train " +
                    with_commas(ranges[0].size()) + " documents (" +
                    with_commas(train->samples_per_epoch()) + " samples per epoch)";
    if (ranges[1].size() > 0) {
        auto valid = std::make_shared<data::GptDataset>(dataset, ranges[1], T, seed, "valid");
        d.validation = [valid, vocab](std::int64_t index, std::int32_t* tokens) {
            valid->sample(index, vocab, tokens);
        };
        d.description += ", validation " + with_commas(ranges[1].size()) + " documents (" +
                         with_commas(valid->samples_per_epoch()) + " samples)";
    } else {
        d.description += ", no validation split";
    }
    return d;
}

} // namespace trident::cli
