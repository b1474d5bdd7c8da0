#include "trident/data/indexed_dataset.h"

#include "trident/core/spec_error.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <unistd.h>

namespace trident::data {
namespace {

constexpr char kMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
constexpr std::uint64_t kVersion = 1;
constexpr std::size_t kHeaderBytes = 9 + 8 + 1 + 8 + 8;

template <typename T>
void append(std::vector<std::uint8_t>& out, const T& value) {
    const auto* p = reinterpret_cast<const std::uint8_t*>(&value);
    out.insert(out.end(), p, p + sizeof(T));
}

template <typename T>
T load(const std::uint8_t* p) {
    T value;
    std::memcpy(&value, p, sizeof(T)); // the .idx arrays are not aligned to their types
    return value;
}

void write_all(std::FILE* f, const void* data, std::size_t bytes, const std::string& path) {
    if (bytes && std::fwrite(data, 1, bytes, f) != bytes)
        throw core::SpecError("--output-prefix",
                              "writing '" + path + "' failed: " + std::strerror(errno));
}

} // namespace

std::size_t dtype_bytes(TokenDtype dtype) {
    switch (dtype) {
    case TokenDtype::uint8:
    case TokenDtype::int8:
        return 1;
    case TokenDtype::int16:
    case TokenDtype::uint16:
        return 2;
    case TokenDtype::int32:
        return 4;
    case TokenDtype::int64:
        return 8;
    }
    return 0;
}

TokenDtype token_dtype_for(std::int64_t vocab_size) {
    return vocab_size < 65500 ? TokenDtype::uint16 : TokenDtype::int32;
}

IndexedDatasetWriter::IndexedDatasetWriter(std::string prefix, TokenDtype dtype)
    : prefix_(std::move(prefix)), dtype_(dtype) {
    if (dtype != TokenDtype::uint16 && dtype != TokenDtype::int32)
        throw core::SpecError("--output-prefix", "Trident writes uint16 or int32 token ids only");
    const std::string path = prefix_ + ".bin.partial";
    bin_ = std::fopen(path.c_str(), "wb");
    if (!bin_)
        throw core::SpecError("--output-prefix",
                              "cannot write '" + path + "': " + std::strerror(errno));
}

IndexedDatasetWriter::~IndexedDatasetWriter() {
    if (bin_) std::fclose(bin_);
    if (!finished_) {
        std::remove((prefix_ + ".bin.partial").c_str());
        std::remove((prefix_ + ".idx.partial").c_str());
    }
}

void IndexedDatasetWriter::add_document(std::span<const std::int32_t> tokens) {
    const std::int64_t limit = dtype_ == TokenDtype::uint16 ? 65535 : 2147483647;
    buffer_.clear();
    buffer_.reserve(tokens.size() * dtype_bytes(dtype_));
    for (const std::int32_t id : tokens) {
        if (id < 0 || id > limit)
            throw core::SpecError("--output-prefix", "token id " + std::to_string(id) +
                                                         " does not fit the dataset's dtype");
        if (dtype_ == TokenDtype::uint16)
            append(buffer_, std::uint16_t(id));
        else
            append(buffer_, std::int32_t(id));
    }
    write_all(bin_, buffer_.data(), buffer_.size(), prefix_ + ".bin.partial");
    lengths_.push_back(std::int32_t(tokens.size()));
    tokens_ += std::int64_t(tokens.size());
}

void IndexedDatasetWriter::finish() {
    const std::string bin_path = prefix_ + ".bin", idx_path = prefix_ + ".idx";
    if (std::fflush(bin_) != 0 || ::fsync(::fileno(bin_)) != 0 || std::fclose(bin_) != 0) {
        bin_ = nullptr;
        throw core::SpecError("--output-prefix", "writing '" + bin_path + ".partial' failed");
    }
    bin_ = nullptr;
    const std::uint64_t n = lengths_.size();
    std::vector<std::uint8_t> idx;
    idx.reserve(kHeaderBytes + n * 12 + (n + 1) * 8);
    idx.insert(idx.end(), kMagic, kMagic + 9);
    append(idx, kVersion);
    append(idx, std::uint8_t(dtype_));
    append(idx, n);
    append(idx, std::uint64_t(n + 1)); // one sequence per document
    for (const std::int32_t len : lengths_) append(idx, len);
    std::int64_t offset = 0;
    for (const std::int32_t len : lengths_) {
        append(idx, offset);
        offset += std::int64_t(len) * std::int64_t(dtype_bytes(dtype_));
    }
    for (std::uint64_t d = 0; d <= n; ++d) append(idx, std::int64_t(d));
    std::FILE* f = std::fopen((idx_path + ".partial").c_str(), "wb");
    if (!f)
        throw core::SpecError("--output-prefix",
                              "cannot write '" + idx_path + ".partial': " + std::strerror(errno));
    write_all(f, idx.data(), idx.size(), idx_path + ".partial");
    const bool ok = std::fflush(f) == 0 && ::fsync(::fileno(f)) == 0;
    if (std::fclose(f) != 0 || !ok)
        throw core::SpecError("--output-prefix", "writing '" + idx_path + ".partial' failed");
    // .bin first: an .idx in place always describes the .bin beside it.
    std::error_code ec;
    std::filesystem::rename(bin_path + ".partial", bin_path, ec);
    if (!ec) std::filesystem::rename(idx_path + ".partial", idx_path, ec);
    if (ec)
        throw core::SpecError("--output-prefix",
                              "cannot rename into '" + prefix_ + ".{bin,idx}': " + ec.message());
    finished_ = true;
}

std::string dataset_prefix(const std::string& given) {
    for (const char* suffix : {".bin", ".idx"}) {
        const std::string s(suffix);
        if (given.size() > s.size() && given.compare(given.size() - s.size(), s.size(), s) == 0 &&
            !std::filesystem::exists(given + ".bin"))
            return given.substr(0, given.size() - s.size());
    }
    return given;
}

IndexedDataset::IndexedDataset(const std::string& prefix, const std::string& field)
    : bin_(dataset_prefix(prefix) + ".bin", field) {
    const MappedFile idx(dataset_prefix(prefix) + ".idx", field);
    const std::string where = "'" + idx.path() + "'";
    const auto bad = [&](const std::string& what) {
        throw core::SpecError(field, where + " is not a valid index: " + what);
    };
    const std::uint8_t* p = idx.data();
    if (idx.size_bytes() < kHeaderBytes) bad("shorter than its header");
    if (std::memcmp(p, kMagic, 9) != 0) bad("wrong magic (expected MMIDIDX)");
    if (load<std::uint64_t>(p + 9) != kVersion)
        bad("version " + std::to_string(load<std::uint64_t>(p + 9)) + ", expected 1");
    const std::uint8_t code = p[17];
    if (code < 1 || (code > 5 && code != 8))
        bad("dtype code " + std::to_string(code) + " is not an integer token type");
    dtype_ = TokenDtype(code);
    const std::uint64_t n = load<std::uint64_t>(p + 18), d = load<std::uint64_t>(p + 26);
    // Sizes first, so a corrupt count cannot make us read past the mapping.
    const std::uint64_t body = (std::uint64_t(idx.size_bytes()) - kHeaderBytes);
    if (n > body / 12 || d == 0 || d > body / 8 ||
        kHeaderBytes + n * 12 + d * 8 != idx.size_bytes())
        bad("its length does not match " + std::to_string(n) + " sequences and " +
            std::to_string(d) + " document boundaries (truncated or corrupt)");
    const std::size_t item = dtype_bytes(dtype_);
    lengths_.resize(n);
    offsets_bytes_.resize(n);
    document_starts_.resize(d);
    const std::uint8_t* lengths = p + kHeaderBytes;
    const std::uint8_t* offsets = lengths + 4 * n;
    const std::uint8_t* docs = offsets + 8 * n;
    std::int64_t expected = 0;
    for (std::uint64_t i = 0; i < n; ++i) {
        lengths_[i] = load<std::int32_t>(lengths + 4 * i);
        offsets_bytes_[i] = load<std::int64_t>(offsets + 8 * i);
        if (lengths_[i] < 0) bad("sequence " + std::to_string(i) + " has a negative length");
        if (offsets_bytes_[i] != expected)
            bad("sequence " + std::to_string(i) + " starts at byte " +
                std::to_string(offsets_bytes_[i]) + ", expected " + std::to_string(expected));
        expected += std::int64_t(lengths_[i]) * std::int64_t(item);
        total_tokens_ += lengths_[i];
    }
    if (std::uint64_t(expected) != bin_.size_bytes())
        throw core::SpecError(field, "'" + bin_.path() + "' holds " +
                                         std::to_string(bin_.size_bytes()) +
                                         " bytes but its index describes " +
                                         std::to_string(expected) + " (truncated or mismatched)");
    for (std::uint64_t i = 0; i < d; ++i) {
        document_starts_[i] = load<std::int64_t>(docs + 8 * i);
        if ((i == 0 && document_starts_[i] != 0) ||
            (i > 0 && document_starts_[i] < document_starts_[i - 1]) ||
            document_starts_[i] > std::int64_t(n))
            bad("document boundary " + std::to_string(i) + " is out of order");
    }
    if (document_starts_.back() != std::int64_t(n))
        bad("the last document boundary is not the sequence count");
}

void IndexedDataset::read(std::int64_t sequence, std::int64_t offset, std::int64_t count,
                          std::int32_t* out) const {
    const std::size_t item = dtype_bytes(dtype_);
    const std::uint8_t* p =
        bin_.data() + offsets_bytes_[std::size_t(sequence)] + std::size_t(offset) * item;
    for (std::int64_t i = 0; i < count; ++i, p += item) {
        switch (dtype_) {
        case TokenDtype::uint8:
            out[i] = *p;
            break;
        case TokenDtype::int8:
            out[i] = std::int8_t(*p);
            break;
        case TokenDtype::int16:
            out[i] = load<std::int16_t>(p);
            break;
        case TokenDtype::uint16:
            out[i] = load<std::uint16_t>(p);
            break;
        case TokenDtype::int32:
            out[i] = load<std::int32_t>(p);
            break;
        case TokenDtype::int64:
            out[i] = std::int32_t(load<std::int64_t>(p));
            break;
        }
    }
}

} // namespace trident::data
