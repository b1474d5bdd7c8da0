#include "checkpoint_fp8.h"

#include "fp8_numerics.h"
#include "trident/core/json_io.h"
#include "trident/core/spec_error.h"

#include <array>
#include <cmath>
#include <mpi.h>
#include <set>

namespace trident::executor::checkpoint_fp8 {
namespace {

constexpr const char* kOperandNames[] = {"input", "weight", "gradient"};
constexpr auto kLinears = std::int64_t(kFp8DenseLinears);

// Entries as floats for one MPI gather: layer, linear, expert, operand, count, amaxes… (the
// keys are small integers, exact in a float).
std::vector<float> flatten(const std::vector<Fp8AmaxHistory>& histories) {
    std::vector<float> out;
    for (const Fp8AmaxHistory& h : histories) {
        out.insert(out.end(), {float(h.layer), float(h.linear), float(h.expert), float(h.operand),
                               float(h.amaxes.size())});
        out.insert(out.end(), h.amaxes.begin(), h.amaxes.end());
    }
    return out;
}

} // namespace

std::string gather_text(const std::vector<Fp8AmaxHistory>& mine, MpiCommunicator& world, int rank) {
    const std::vector<float> flat = flatten(mine);
    const int count = int(flat.size()), size = world.size();
    // Sized on every rank (only rank 0's are filled): a few ints a rank.
    std::vector<int> counts(static_cast<std::size_t>(size), 0), at(counts.size(), 0);
    {
        const auto watched = world.watch_collective("gather");
        check_mpi(MPI_Gather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, world.handle()),
                  "MPI_Gather");
    }
    int total = 0;
    for (std::size_t r = 0; rank == 0 && r < counts.size(); ++r) {
        at[r] = total;
        total += counts[r];
    }
    std::vector<float> all(static_cast<std::size_t>(total));
    {
        const auto watched = world.watch_collective("gather");
        check_mpi(MPI_Gatherv(flat.data(), count, MPI_FLOAT, all.data(), counts.data(), at.data(),
                              MPI_FLOAT, 0, world.handle()),
                  "MPI_Gatherv");
    }
    if (rank != 0) return "";
    core::Json entries = core::Json::array();
    std::set<std::array<std::int64_t, 4>> seen;
    for (std::size_t i = 0; i + 5 <= all.size();) {
        const auto n = std::size_t(all[i + 4]);
        const std::array<std::int64_t, 4> key = {std::int64_t(all[i]), std::int64_t(all[i + 1]),
                                                 std::int64_t(all[i + 2]),
                                                 std::int64_t(all[i + 3])};
        // Under DualPipe a stage's two copies keep histories of their own; the first rank's
        // (its own chunk's) is kept.
        if (seen.insert(key).second)
            entries.push_back(
                {{"layer", key[0]},
                 {"linear", key[1]},
                 {"expert", key[2]},
                 {"operand", kOperandNames[std::size_t(key[3])]},
                 {"amaxes", std::vector<float>(all.begin() + std::ptrdiff_t(i + 5),
                                               all.begin() + std::ptrdiff_t(i + 5 + n))}});
        i += 5 + n;
    }
    return core::Json{{"format", "trident.fp8-amax-history/1"}, {"entries", entries}}.dump(1) +
           "\n";
}

std::vector<Fp8AmaxHistory> parse(const std::string& text, const std::string& source,
                                  const core::JobSpec& job) {
    const core::Json j = core::parse_json_text(text, source);
    core::ObjectReader top(j, source);
    if (top.string("format") != "trident.fp8-amax-history/1")
        throw core::SpecError(source, "format must be \"trident.fp8-amax-history/1\"");
    const core::Json& entries = top.require("entries");
    if (!entries.is_array()) throw core::SpecError(source, "entries must be an array");
    top.finish();
    const std::int64_t experts = job.model.moe ? job.model.moe->num_experts : 0;
    std::vector<Fp8AmaxHistory> out;
    for (std::size_t i = 0; i < entries.size(); ++i) {
        const std::string at = source + ": entries[" + std::to_string(i) + "]";
        core::ObjectReader r(entries[i], at);
        Fp8AmaxHistory h;
        h.layer = r.integer("layer", 0, job.model.num_layers - 1);
        h.linear = r.integer("linear", 0, kLinears - 1);
        h.expert = r.integer("expert", -1, experts - 1);
        const std::string operand = r.string("operand");
        h.operand = -1;
        for (std::int64_t o = 0; o < 3; ++o)
            if (operand == kOperandNames[o]) h.operand = o;
        if (h.operand < 0)
            throw core::SpecError(at + ".operand",
                                  "'" + operand + "' is not one of input, weight, gradient");
        if (h.expert >= 0 && h.linear != 2 && h.linear != 3)
            throw core::SpecError(at + ".linear", "an expert's FP8 GEMMs are fc1 (2) and fc2 (3), "
                                                  "got " +
                                                      std::to_string(h.linear));
        const core::Json& amaxes = r.require("amaxes");
        if (!amaxes.is_array()) throw core::SpecError(at + ".amaxes", "must be an array");
        for (const core::Json& a : amaxes) {
            if (!a.is_number() || !std::isfinite(a.get<double>()) || a.get<double>() < 0)
                throw core::SpecError(at + ".amaxes", "must hold finite non-negative numbers");
            h.amaxes.push_back(a.get<float>());
        }
        r.finish();
        out.push_back(std::move(h));
    }
    return out;
}

} // namespace trident::executor::checkpoint_fp8
