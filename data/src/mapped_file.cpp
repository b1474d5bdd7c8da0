#include "trident/data/mapped_file.h"

#include "trident/core/spec_error.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>

namespace trident::data {

MappedFile::MappedFile(const std::string& path, const std::string& field) : path_(path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw core::SpecError(field, "cannot open '" + path + "': " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        const int err = errno;
        ::close(fd);
        throw core::SpecError(field, "cannot stat '" + path + "': " + std::strerror(err));
    }
    size_bytes_ = std::size_t(st.st_size);
    if (size_bytes_ > 0) { // mmap refuses length 0; an empty file maps to nothing
        void* p = ::mmap(nullptr, size_bytes_, PROT_READ, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) {
            const int err = errno;
            ::close(fd);
            throw core::SpecError(field, "cannot map '" + path + "': " + std::strerror(err));
        }
        data_ = static_cast<const std::uint8_t*>(p);
    }
    ::close(fd); // the mapping keeps the file alive
}

MappedFile::~MappedFile() {
    if (data_) ::munmap(const_cast<std::uint8_t*>(data_), size_bytes_);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)), data_(std::exchange(other.data_, nullptr)),
      size_bytes_(std::exchange(other.size_bytes_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
    if (this != &other) {
        if (data_) ::munmap(const_cast<std::uint8_t*>(data_), size_bytes_);
        path_ = std::move(other.path_);
        data_ = std::exchange(other.data_, nullptr);
        size_bytes_ = std::exchange(other.size_bytes_, 0);
    }
    return *this;
}

} // namespace trident::data
