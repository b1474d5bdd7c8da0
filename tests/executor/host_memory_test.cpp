// What ZeRO-2/3 do with the pages of what they drop when memory is short (host_memory.h): a
// released range reads as zeros at once and takes new values; an offered range takes whatever
// is written over it afterwards; memory outside either range is never touched, whatever the
// alignment of its ends.
#include "../../executor/src/host_memory.h"

#include <gtest/gtest.h>
#include <vector>

namespace trident::executor {
namespace {

TEST(HostMemory, ReleasedPagesReadAsZerosAndTakeNewValues) {
    std::vector<float> buffer(3 << 20, 1.0f); // 12 MiB: whole pages inside, ragged ends
    const std::size_t begin = 12345, end = buffer.size() - 6789;
    release_pages(buffer.data() + begin, end - begin);
    for (std::size_t i = 0; i < buffer.size(); ++i)
        ASSERT_EQ(buffer[i], i >= begin && i < end ? 0.0f : 1.0f) << i;
    for (std::size_t i = begin; i < end; ++i) buffer[i] = float(i % 7);
    for (std::size_t i = begin; i < end; ++i) ASSERT_EQ(buffer[i], float(i % 7)) << i;
}

TEST(HostMemory, OfferedPagesKeepWhatIsWrittenOverThem) {
    std::vector<float> buffer(3 << 20, 1.0f);
    const std::size_t begin = 4097, end = buffer.size() - 3;
    offer_pages(buffer.data() + begin, end - begin);
    for (std::size_t i = 0; i < begin; ++i) ASSERT_EQ(buffer[i], 1.0f) << i;
    for (std::size_t i = end; i < buffer.size(); ++i) ASSERT_EQ(buffer[i], 1.0f) << i;
    for (std::size_t i = begin; i < end; ++i) buffer[i] = float(i % 5); // a gather's overwrite
    for (std::size_t i = begin; i < end; ++i) ASSERT_EQ(buffer[i], float(i % 5)) << i;
}

} // namespace
} // namespace trident::executor
