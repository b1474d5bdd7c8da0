// `trident tokenizer train`: learn a byte-level BPE vocabulary from text files and write it as
// GPT-2's vocab.json + merges.txt, which `trident preprocess --tokenizer DIR` reads.
#include "command.h"
#include "format.h"
#include "trident/core/spec_error.h"
#include "trident/data/bpe_tokenizer.h"

#include <chrono>
#include <cstdio>
#include <memory>
#include <unistd.h>

namespace trident::cli {
namespace {

struct TokenizerTrainOptions {
    std::vector<std::string> inputs;
    std::int32_t vocab_size = 0;
    std::string output_dir;
};

int train_tokenizer(const TokenizerTrainOptions& o) {
    if (o.vocab_size < 257)
        throw core::SpecError("--vocab-size", "must be at least 257 (256 byte tokens and "
                                              "<|endoftext|>), got " +
                                                  std::to_string(o.vocab_size));
    const auto start = std::chrono::steady_clock::now();
    data::TextDocuments documents(o.inputs);
    const bool tty = ::isatty(2) == 1;
    auto show = [tty](std::string_view phase, double fraction) {
        if (!tty) return;
        const int filled = int(30 * fraction);
        std::fprintf(stderr, "\r%-15.*s [%s%s] %3.0f%%", int(phase.size()), phase.data(),
                     std::string(std::size_t(filled), '#').c_str(),
                     std::string(std::size_t(30 - filled), '.').c_str(), 100 * fraction);
        std::fflush(stderr);
    };
    const data::BpeTokenizer tokenizer = data::BpeTokenizer::train(documents, o.vocab_size, show);
    if (tty) std::fprintf(stderr, "\r%60s\r", "");
    tokenizer.save(o.output_dir);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("trained a %d-token byte-level BPE vocabulary: %s documents, %s bytes, %zu merges "
                "learned in %.2f s\nwrote %s/vocab.json and %s/merges.txt (<|endoftext|> = %d)\n",
                tokenizer.vocab_size(),
                with_commas(std::int64_t(documents.documents_read())).c_str(),
                with_commas(std::int64_t(documents.bytes_read())).c_str(), tokenizer.merge_count(),
                seconds, o.output_dir.c_str(), o.output_dir.c_str(), tokenizer.eod());
    return 0;
}

} // namespace

Command add_tokenizer_command(CLI::App& app) {
    auto o = std::make_shared<TokenizerTrainOptions>();
    Command c;
    c.app = app.add_subcommand("tokenizer", "Train a byte-level BPE tokenizer (GPT-2 format)");
    c.app->require_subcommand(1);
    CLI::App* train = c.app->add_subcommand(
        "train", "Learn BPE merges from text files and write vocab.json + merges.txt");
    train
        ->add_option("--input", o->inputs,
                     "Text files: .jsonl/.json (one {\"text\": ...} per line) or plain text "
                     "(paragraphs are documents)")
        ->required()
        ->expected(1, -1);
    train
        ->add_option("--vocab-size", o->vocab_size,
                     "Tokens in the vocabulary, <|endoftext|> included (at least 257)")
        ->required();
    train->add_option("--output-dir", o->output_dir, "Where to write vocab.json and merges.txt")
        ->required();
    c.run = [o] { return train_tokenizer(*o); };
    return c;
}

} // namespace trident::cli
