#include "trident/executor/parameter_gather.h"

#include "trident/executor/mpi.h"

#include <cstring>
#include <mpi.h>

namespace trident::executor {
namespace {

template <typename T>
void put(std::string& out, const T& value) {
    out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

template <typename T>
T take(const char*& at) {
    T value;
    std::memcpy(&value, at, sizeof value);
    at += sizeof value;
    return value;
}

} // namespace

std::map<std::string, Vec> gather_parameters(const ParameterStore& store) {
    // Each rank: for every tensor it owns (not a tied copy), its name, full size, placement and
    // values. Replicas on other data ranks repeat what the first copy already says.
    std::string mine;
    for (const auto& t : store.tensors) {
        if (t.duplicate) continue;
        put(mine, std::int64_t(t.name.size()));
        mine += t.name;
        put(mine, t.full_size);
        put(mine, std::int64_t(t.placement.size()));
        for (auto [offset, length] : t.placement) {
            put(mine, offset);
            put(mine, length);
        }
        put(mine, t.size);
        mine.append(reinterpret_cast<const char*>(store.values.data() + t.offset),
                    std::size_t(t.size) * sizeof(float));
    }
    int rank = 0, size = 1;
    check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank");
    check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &size), "MPI_Comm_size");
    int count = int(mine.size());
    std::vector<int> counts(static_cast<std::size_t>(size)),
        displacements(static_cast<std::size_t>(size));
    check_mpi(MPI_Gather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, MPI_COMM_WORLD),
              "MPI_Gather");
    std::string all;
    if (rank == 0) {
        int total = 0;
        for (int r = 0; r < size; ++r) {
            displacements[std::size_t(r)] = total;
            total += counts[std::size_t(r)];
        }
        all.resize(std::size_t(total));
    }
    check_mpi(MPI_Gatherv(mine.data(), count, MPI_BYTE, all.data(), counts.data(),
                          displacements.data(), MPI_BYTE, 0, MPI_COMM_WORLD),
              "MPI_Gatherv");
    std::map<std::string, Vec> full;
    if (rank != 0) return full;
    std::map<std::string, std::vector<bool>> filled;
    const char* at = all.data();
    const char* end = all.data() + all.size();
    while (at < end) {
        const auto name_length = take<std::int64_t>(at);
        const std::string name(at, std::size_t(name_length));
        at += name_length;
        const auto full_size = take<std::int64_t>(at);
        const auto runs = take<std::int64_t>(at);
        std::vector<std::pair<std::int64_t, std::int64_t>> placement;
        for (std::int64_t i = 0; i < runs; ++i) {
            const auto offset = take<std::int64_t>(at);
            const auto length = take<std::int64_t>(at);
            placement.push_back({offset, length});
        }
        const auto n = take<std::int64_t>(at);
        const char* values = at; // not aligned to float: the names before it have any length
        at += n * std::int64_t(sizeof(float));
        Vec& tensor = full[name];
        std::vector<bool>& done = filled[name];
        if (tensor.empty()) {
            tensor.assign(std::size_t(full_size), 0.0f);
            done.assign(std::size_t(full_size), false);
        }
        std::int64_t from = 0;
        for (auto [offset, length] : placement) {
            for (std::int64_t i = 0; i < length; ++i)
                if (!done[std::size_t(offset + i)]) { // the first copy of a replicated part wins
                    std::memcpy(&tensor[std::size_t(offset + i)],
                                values + (from + i) * std::int64_t(sizeof(float)), sizeof(float));
                    done[std::size_t(offset + i)] = true;
                }
            from += length;
        }
    }
    return full;
}

std::string serialize_parameters(const std::map<std::string, Vec>& parameters) {
    std::string out = "TRIDENT-PARAMS 1\n";
    put(out, std::int64_t(parameters.size()));
    for (const auto& [name, values] : parameters) {
        put(out, std::int64_t(name.size()));
        out += name;
        put(out, std::int64_t(values.size()));
        out.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
    }
    return out;
}

} // namespace trident::executor
