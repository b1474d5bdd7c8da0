// `trident preprocess`: text (txt paragraphs or JSONL "text") → Megatron-style indexed data
// (P.bin + P.idx), tokenized with a byte-level BPE vocabulary. Streams the input in batches of
// documents — memory bounded by workers × batch, whatever the corpus size — and encodes each
// batch's documents on all workers while the next batch waits.
#include "command.h"
#include "format.h"
#include "progress_bar.h"
#include "trident/core/spec_error.h"
#include "trident/data/bpe_tokenizer.h"
#include "trident/data/indexed_dataset.h"
#include "trident/data/text_documents.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <thread>

namespace trident::cli {
namespace {

struct PreprocessOptions {
    std::vector<std::string> inputs;
    std::string output_prefix;
    std::string tokenizer_dir, vocab_file, merge_file;
    bool append_eod = true;
    int workers = 0;
    std::size_t batch_bytes = 4 << 20;
};

// Encodes documents [begin, end) of `batch` into `out` (one id vector per document).
void encode_range(const data::BpeTokenizer& tokenizer, const std::vector<std::string>& batch,
                  std::size_t begin, std::size_t end, bool append_eod,
                  std::vector<std::vector<std::int32_t>>& out) {
    for (std::size_t i = begin; i < end; ++i) {
        out[i].clear();
        tokenizer.encode(batch[i], out[i]);
        if (append_eod) out[i].push_back(tokenizer.eod());
    }
}

} // namespace

Command add_preprocess_command(CLI::App& app) {
    auto o = std::make_shared<PreprocessOptions>();
    Command c;
    c.app = app.add_subcommand("preprocess",
                               "Tokenize text into Megatron-style indexed data (P.bin + P.idx)");
    c.app->add_option("--input", o->inputs, "Text files: .txt (paragraphs) or .jsonl ({\"text\"})")
        ->required();
    c.app->add_option("--output-prefix", o->output_prefix, "Writes PREFIX.bin and PREFIX.idx")
        ->required();
    c.app->add_option("--tokenizer", o->tokenizer_dir,
                      "Directory with vocab.json and merges.txt (from `trident tokenizer train`)");
    c.app->add_option("--vocab-file", o->vocab_file, "GPT-2 vocab.json (with --merge-file)");
    c.app->add_option("--merge-file", o->merge_file, "GPT-2 merges.txt (with --vocab-file)");
    c.app->add_flag("--append-eod,!--no-append-eod", o->append_eod,
                    "End every document with <|endoftext|> (default on)");
    c.app->add_option("--workers", o->workers, "Encoding threads (default: every core)")
        ->check(CLI::Range(1, 1024));
    c.run = [o] {
        std::string vocab = o->vocab_file, merges = o->merge_file;
        if (!o->tokenizer_dir.empty()) {
            if (!vocab.empty() || !merges.empty())
                throw core::SpecError("--tokenizer", "give --tokenizer DIR or --vocab-file and "
                                                     "--merge-file, not both");
            vocab = (std::filesystem::path(o->tokenizer_dir) / "vocab.json").string();
            merges = (std::filesystem::path(o->tokenizer_dir) / "merges.txt").string();
        }
        if (vocab.empty() || merges.empty())
            throw core::SpecError("--tokenizer",
                                  "required: --tokenizer DIR, or --vocab-file and --merge-file");
        const data::BpeTokenizer tokenizer = data::BpeTokenizer::load(vocab, merges);
        data::TextDocuments documents(o->inputs);
        const auto parent = std::filesystem::absolute(o->output_prefix).parent_path();
        if (!std::filesystem::is_directory(parent))
            throw core::SpecError("--output-prefix",
                                  "'" + parent.string() + "' is not a directory");
        const int workers =
            o->workers > 0 ? o->workers : int(std::max(1u, std::thread::hardware_concurrency()));
        data::IndexedDatasetWriter writer(o->output_prefix,
                                          data::token_dtype_for(tokenizer.vocab_size()));
        const auto start = std::chrono::steady_clock::now();
        const auto seconds = [&] {
            return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        };
        ProgressBar bar(double(documents.total_bytes()) / 1e6, "MB");
        std::vector<std::string> batch;
        std::vector<std::vector<std::int32_t>> encoded;
        std::int64_t empty = 0;
        std::string document;
        bool more = true;
        while (more) {
            // A batch of whole documents, about workers × batch_bytes of text.
            batch.clear();
            std::size_t bytes = 0;
            while (bytes < o->batch_bytes * std::size_t(workers) &&
                   (more = documents.next(document))) {
                if (document.empty()) {
                    ++empty; // as Megatron: an empty document adds nothing, not even an EOD
                    continue;
                }
                bytes += document.size();
                batch.push_back(std::move(document));
                document.clear();
            }
            encoded.resize(batch.size());
            // Contiguous slices per worker, written back in input order.
            std::vector<std::thread> threads;
            const std::size_t per =
                (batch.size() + std::size_t(workers) - 1) / std::size_t(workers);
            for (int w = 1; w < workers && std::size_t(w) * per < batch.size(); ++w)
                threads.emplace_back([&, w] {
                    encode_range(tokenizer, batch, std::size_t(w) * per,
                                 std::min(batch.size(), std::size_t(w + 1) * per), o->append_eod,
                                 encoded);
                });
            encode_range(tokenizer, batch, 0, std::min(batch.size(), per), o->append_eod, encoded);
            for (auto& t : threads) t.join();
            for (const auto& ids : encoded) writer.add_document(ids);
            char detail[64];
            std::snprintf(detail, sizeof detail, "%.0f tokens/s",
                          double(writer.tokens()) / seconds());
            bar.update(double(documents.bytes_read()) / 1e6, detail);
        }
        writer.finish();
        bar.finish();
        const double s = seconds();
        std::printf(
            "wrote %s.bin and %s.idx: %s documents, %s tokens (%s ids), %s bytes of "
            "text in %.2f s: %.0f tokens/s on %d workers%s\n",
            o->output_prefix.c_str(), o->output_prefix.c_str(),
            with_commas(writer.documents()).c_str(), with_commas(writer.tokens()).c_str(),
            data::token_dtype_for(tokenizer.vocab_size()) == data::TokenDtype::uint16 ? "uint16"
                                                                                      : "int32",
            with_commas(std::int64_t(documents.bytes_read())).c_str(), s,
            double(writer.tokens()) / s, workers,
            empty ? (", " + std::to_string(empty) + " empty documents skipped").c_str() : "");
        return 0;
    };
    return c;
}

} // namespace trident::cli
