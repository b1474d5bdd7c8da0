#pragma once
// A read-only memory mapping of a whole file (RAII): the loader reads token ids straight from
// the page cache, so a dataset larger than memory costs only the pages a batch touches.
#include <cstddef>
#include <cstdint>
#include <string>

namespace trident::data {

class MappedFile {
public:
    // Throws SpecError(`field`, reason) when the file cannot be opened or mapped.
    MappedFile(const std::string& path, const std::string& field);
    ~MappedFile();
    MappedFile(MappedFile&& other) noexcept;
    MappedFile& operator=(MappedFile&& other) noexcept;
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    const std::uint8_t* data() const { return data_; }
    std::size_t size_bytes() const { return size_bytes_; }
    const std::string& path() const { return path_; }

private:
    std::string path_;
    const std::uint8_t* data_ = nullptr;
    std::size_t size_bytes_ = 0;
};

} // namespace trident::data
