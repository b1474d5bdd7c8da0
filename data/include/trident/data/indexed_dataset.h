#pragma once
// Megatron-LM's indexed dataset: `P.bin` holds the token ids of every document back to back,
// `P.idx` says where each one starts. Byte layout (little-endian), as Megatron's
// megatron/core/datasets/indexed_dataset.py writes it:
//   .idx  9 bytes  magic "MMIDIDX\0\0"
//         u64      version = 1
//         u8       dtype code (1 u8, 2 i8, 3 i16, 4 i32, 5 i64, 8 u16)
//         u64      N, the number of sequences
//         u64      D, the number of documents + 1
//         i32[N]   sequence lengths (tokens)
//         i64[N]   byte offsets of the sequences in .bin
//         i64[D]   document boundaries, as sequence indices (0 … N)
//   .bin  the token ids, no header.
// Trident writes one sequence per document, uint16 ids when the vocabulary fits (< 65,500
// ids, as Megatron) and int32 otherwise.
#include "trident/data/mapped_file.h"

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

namespace trident::data {

enum class TokenDtype : std::uint8_t {
    uint8 = 1,
    int8 = 2,
    int16 = 3,
    int32 = 4,
    int64 = 5,
    uint16 = 8
};

std::size_t dtype_bytes(TokenDtype dtype);
// uint16 below 65,500 ids (Megatron's threshold), int32 above.
TokenDtype token_dtype_for(std::int64_t vocab_size);

// Streams documents into P.bin and P.idx. Both are written under a `.partial` suffix and renamed
// into place by finish(): an interrupted run leaves no half-written dataset behind the names.
class IndexedDatasetWriter {
public:
    IndexedDatasetWriter(std::string prefix, TokenDtype dtype);
    ~IndexedDatasetWriter(); // unfinished: removes the partial files
    IndexedDatasetWriter(const IndexedDatasetWriter&) = delete;
    IndexedDatasetWriter& operator=(const IndexedDatasetWriter&) = delete;

    // Throws SpecError when an id does not fit the dtype.
    void add_document(std::span<const std::int32_t> tokens);
    void finish();

    std::int64_t documents() const { return std::int64_t(lengths_.size()); }
    std::int64_t tokens() const { return tokens_; }

private:
    std::string prefix_;
    TokenDtype dtype_;
    std::FILE* bin_ = nullptr;
    std::vector<std::int32_t> lengths_;
    std::int64_t tokens_ = 0;
    std::vector<std::uint8_t> buffer_;
    bool finished_ = false;
};

// Megatron's --data-path is the prefix of P.bin and P.idx, but people pass P.bin (or P.idx):
// the prefix, taken off when P.bin.bin is not there.
std::string dataset_prefix(const std::string& given);

// A memory-mapped, validated dataset. Every check names the file and what is wrong with it.
class IndexedDataset {
public:
    // `field` names the option the prefix came from, for error messages (e.g. "--data-path").
    explicit IndexedDataset(const std::string& prefix, const std::string& field = "--data-path");

    std::int64_t sequences() const { return std::int64_t(lengths_.size()); }
    std::int64_t documents() const { return std::int64_t(document_starts_.size()) - 1; }
    std::int64_t length(std::int64_t sequence) const { return lengths_[std::size_t(sequence)]; }
    std::int64_t total_tokens() const { return total_tokens_; }
    TokenDtype dtype() const { return dtype_; }
    // First sequence of each document, and N at the end.
    const std::vector<std::int64_t>& document_starts() const { return document_starts_; }

    // Copies `count` ids of `sequence` from `offset` on, widened to int32.
    void read(std::int64_t sequence, std::int64_t offset, std::int64_t count,
              std::int32_t* out) const;

private:
    MappedFile bin_;
    TokenDtype dtype_ = TokenDtype::uint16;
    std::vector<std::int32_t> lengths_;
    std::vector<std::int64_t> offsets_bytes_;
    std::vector<std::int64_t> document_starts_;
    std::int64_t total_tokens_ = 0;
};

} // namespace trident::data
