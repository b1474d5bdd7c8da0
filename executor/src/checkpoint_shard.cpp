#include "checkpoint_shard.h"

#include "trident/core/spec_error.h"

#include <algorithm>
#include <cstring>

namespace trident::executor::checkpoint_detail {
namespace {

constexpr char kMagic[8] = {'T', 'R', 'I', 'D', 'C', 'K', 'P', 'T'};
constexpr std::uint32_t kVersion = 2;

// resize + memcpy rather than insert: GCC 12 reports false overflows for byte inserts.
void append(std::vector<std::uint8_t>& out, const void* data, std::size_t n) {
    const std::size_t at = out.size();
    out.resize(at + n);
    if (n) std::memcpy(out.data() + at, data, n);
}

template <typename T>
void put(std::vector<std::uint8_t>& out, const T& v) {
    append(out, &v, sizeof(T));
}

void put_floats(std::vector<std::uint8_t>& out, std::span<const float> v) {
    put(out, std::uint64_t(v.size()));
    append(out, v.data(), v.size_bytes());
}

class Reader {
public:
    Reader(const std::vector<std::uint8_t>& bytes, const std::string& what)
        : bytes_(bytes), what_(what) {}
    void read(void* dst, std::size_t n) {
        if (n > bytes_.size() - at_) fail("ends early");
        std::memcpy(dst, bytes_.data() + at_, n);
        at_ += n;
    }
    template <typename T>
    T get() {
        T v;
        read(&v, sizeof v);
        return v;
    }
    std::uint64_t count(std::size_t element_bytes) {
        const auto n = get<std::uint64_t>();
        if (n > (bytes_.size() - at_) / element_bytes) fail("holds an impossible count");
        return n;
    }
    std::vector<float> floats() {
        std::vector<float> v(count(sizeof(float)));
        read(v.data(), v.size() * sizeof(float));
        return v;
    }
    bool done() const { return at_ == bytes_.size(); }
    [[noreturn]] void fail(const std::string& why) const {
        throw core::SpecError("--load", "'" + what_ + "' " + why + " (not a Trident shard?)");
    }

private:
    const std::vector<std::uint8_t>& bytes_;
    const std::string& what_;
    std::size_t at_ = 0;
};

} // namespace

std::vector<std::uint8_t> serialize_shard(int rank, std::int64_t iteration,
                                          const TrainerState& state) {
    std::vector<std::uint8_t> out;
    out.reserve(4096 + (state.parameters.size() + state.adam_m.size() + state.adam_v.size()) * 4);
    append(out, kMagic, 8);
    put(out, kVersion);
    put(out, std::uint32_t(rank));
    put(out, iteration);
    put(out, *state.skipped_steps);
    put(out, std::uint64_t(state.store->tensors.size()));
    for (const auto& t : state.store->tensors) {
        put(out, std::uint64_t(t.name.size()));
        append(out, t.name.data(), t.name.size());
        put(out, t.offset);
        put(out, t.size);
        put(out, t.full_size);
        put(out, std::uint8_t(t.duplicate));
        put(out, std::uint64_t(t.placement.size()));
        for (const auto& [offset, length] : t.placement) {
            put(out, offset);
            put(out, length);
        }
    }
    put(out, std::uint64_t(state.moment_runs.size()));
    for (const FlatRun& r : state.moment_runs) {
        put(out, r.begin);
        put(out, r.length);
    }
    put_floats(out, state.parameters);
    put_floats(out, state.adam_m);
    put_floats(out, state.adam_v);
    return out;
}

Shard parse_shard(const std::vector<std::uint8_t>& bytes, const std::string& what) {
    Reader in(bytes, what);
    char magic[8];
    in.read(magic, 8);
    if (std::memcmp(magic, kMagic, 8) != 0) in.fail("has the wrong magic");
    const auto version = in.get<std::uint32_t>();
    if (version != kVersion && version != 1) in.fail("has an unknown version");
    Shard s;
    s.rank = in.get<std::uint32_t>();
    s.iteration = in.get<std::int64_t>();
    s.skipped_steps = in.get<std::int64_t>();
    s.tensors.resize(in.count(1));
    for (ShardTensor& t : s.tensors) {
        t.name.resize(in.count(1));
        in.read(t.name.data(), t.name.size());
        t.offset = in.get<std::int64_t>();
        t.size = in.get<std::int64_t>();
        t.full_size = in.get<std::int64_t>();
        t.duplicate = in.get<std::uint8_t>() != 0;
        t.placement.resize(in.count(16));
        for (auto& [offset, length] : t.placement) {
            offset = in.get<std::int64_t>();
            length = in.get<std::int64_t>();
        }
    }
    std::int64_t version1_begin = 0;
    if (version == 1) {
        version1_begin = in.get<std::int64_t>();
    } else {
        s.moment_runs.resize(in.count(16));
        for (FlatRun& r : s.moment_runs) {
            r.begin = in.get<std::int64_t>();
            r.length = in.get<std::int64_t>();
        }
    }
    s.parameters = in.floats();
    s.adam_m = in.floats();
    s.adam_v = in.floats();
    if (!in.done()) in.fail("has trailing bytes");
    if (version == 1) s.moment_runs = {{version1_begin, std::int64_t(s.adam_m.size())}};
    // Every run must lie inside the buffers, so a loader can index without checks.
    for (const ShardTensor& t : s.tensors) {
        std::int64_t length = 0;
        for (const auto& [offset, n] : t.placement) {
            if (offset < 0 || n < 0 || offset + n > t.full_size) in.fail("has a bad tensor table");
            length += n;
        }
        if (t.offset < 0 || length != t.size ||
            t.offset + t.size > std::int64_t(s.parameters.size()))
            in.fail("has a bad tensor table");
    }
    std::int64_t moments = 0;
    for (const FlatRun& r : s.moment_runs) {
        if (r.begin < 0 || r.length < 0 || r.begin + r.length > std::int64_t(s.parameters.size()))
            in.fail("has moments outside its parameters");
        moments += r.length;
    }
    if (s.adam_m.size() != s.adam_v.size() || moments != std::int64_t(s.adam_m.size()))
        in.fail("has moments outside its parameters");
    return s;
}

MomentIndex::MomentIndex(const std::vector<FlatRun>& runs) {
    std::int64_t moment = 0;
    for (const FlatRun& r : runs) {
        sorted_.push_back({r.begin, r.length, moment});
        moment += r.length;
    }
    std::sort(sorted_.begin(), sorted_.end(),
              [](const Entry& a, const Entry& b) { return a.begin < b.begin; });
}

std::int64_t MomentIndex::of(std::int64_t flat) const {
    auto it = std::upper_bound(sorted_.begin(), sorted_.end(), flat,
                               [](std::int64_t f, const Entry& e) { return f < e.begin; });
    if (it == sorted_.begin()) return -1;
    --it;
    return flat < it->begin + it->length ? it->moment + (flat - it->begin) : -1;
}

} // namespace trident::executor::checkpoint_detail
