#include "trident/executor/checkpoint.h"

#include "checkpoint_shard.h"
#include "trident/core/atomic_file.h"
#include "trident/core/json_io.h"
#include "trident/core/spec_error.h"
#include "trident/executor/mpi.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <map>
#include <mpi.h>
#include <sstream>
#include <unistd.h>

namespace trident::executor {
namespace fs = std::filesystem;
namespace {

constexpr const char* kLatest = "latest_checkpointed_iteration.txt";
constexpr const char* kManifest = "manifest.json";

// FNV-1a over 64-bit words (the tail bytes zero-padded): detects torn and flipped bytes at
// memory speed, which byte-wise FNV would not reach on large shards.
std::uint64_t checksum(const std::uint8_t* p, std::size_t n) {
    std::uint64_t h = 1469598103934665603ull;
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        std::uint64_t w;
        std::memcpy(&w, p + i, 8);
        h = (h ^ w) * 1099511628211ull;
    }
    std::uint64_t tail = 0;
    std::memcpy(&tail, p + i, n - i);
    h = (h ^ tail ^ (std::uint64_t(n) << 56)) * 1099511628211ull;
    return h;
}

std::string hex(std::uint64_t v) {
    char text[17];
    std::snprintf(text, sizeof text, "%016llx", (unsigned long long)v);
    return text;
}

std::string shard_name(int rank) {
    char text[32];
    std::snprintf(text, sizeof text, "rank_%05d.bin", rank);
    return text;
}

// Writes and fsyncs: a checkpoint must be on disk, not in the page cache, before the
// manifest says it is whole.
void write_durably(const fs::path& path, const std::vector<std::uint8_t>& bytes) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        throw core::SpecError("--save",
                              "cannot write '" + path.string() + "': " + std::strerror(errno));
    std::size_t done = 0;
    while (done < bytes.size()) {
        const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            const int err = errno;
            ::close(fd);
            throw core::SpecError("--save",
                                  "writing '" + path.string() + "' failed: " + std::strerror(err));
        }
        done += std::size_t(n);
    }
    const bool synced = ::fsync(fd) == 0;
    if (::close(fd) != 0 || !synced)
        throw core::SpecError("--save", "writing '" + path.string() + "' failed");
}

void sync_directory(const fs::path& dir) {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        ::fsync(fd);
        ::close(fd);
    }
}

// Every rank learns whether any rank failed; all of them raise the first failing rank's
// message, so mpirun sees one clean exit code and rank 0 prints one line.
void agree(MPI_Comm world, const std::string& field, const std::string& local_error) {
    int rank = 0, size = 1;
    check_mpi(MPI_Comm_rank(world, &rank), "MPI_Comm_rank");
    check_mpi(MPI_Comm_size(world, &size), "MPI_Comm_size");
    int first = local_error.empty() ? size : rank;
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, world), "MPI_Allreduce");
    if (first == size) return;
    int length = rank == first ? int(local_error.size()) : 0;
    check_mpi(MPI_Bcast(&length, 1, MPI_INT, first, world), "MPI_Bcast");
    std::string text = rank == first ? local_error : std::string(std::size_t(length), ' ');
    check_mpi(MPI_Bcast(text.data(), length, MPI_CHAR, first, world), "MPI_Bcast");
    throw core::SpecError(field, text);
}

// What must match between the run and a checkpoint for the shards to mean the same thing.
constexpr std::string_view kStagePlacementNames[] = {"loop", "v_shape", "two_copies"};

core::Json layout_of(const core::JobSpec& job, int world_size) {
    const core::ParallelPlan& p = job.plan;
    core::Json layout = {
        {"tp", p.tp},
        {"cp", p.cp},
        {"ep", p.ep},
        {"dp", p.dp},
        {"pp", p.pp},
        {"vpp", p.vpp},
        {"distributed_optimizer", p.distributed_optimizer},
        {"world_size", world_size},
        // Where the stages sit (loop, V or two copies) and how many layers each holds:
        // the same degrees with another placement or split are another layout.
        {"stage_placement", kStagePlacementNames[std::size_t(core::placement_of(p.schedule))]},
        {"layers_per_stage", job.pipeline_split().layers}};
    // ZeRO-2/3 slice the optimizer state by FSDP unit and hybrid sharding over one replica's
    // ranks: other moment runs than ZeRO-1's, so another layout (absent: ZeRO-1, one replica,
    // as checkpoints written before these existed).
    if (p.zero_stage() >= 2) layout["zero_stage"] = p.zero_stage();
    if (p.sharding.instances > 1) layout["optimizer_instances"] = p.sharding.instances;
    return layout;
}

std::string describe_layout(const core::Json& l) {
    std::ostringstream s;
    s << "tp " << l.value("tp", 0) << " · cp " << l.value("cp", 0) << " · ep " << l.value("ep", 0)
      << " · dp " << l.value("dp", 0) << " · pp " << l.value("pp", 0) << " · vpp "
      << l.value("vpp", 0)
      << (l.value("distributed_optimizer", false) ? " · distributed optimizer" : "");
    if (l.contains("zero_stage")) s << " · zero-" << l["zero_stage"].get<int>();
    if (l.contains("optimizer_instances"))
        s << " · " << l["optimizer_instances"].get<std::int64_t>() << " replicas";
    if (l.contains("stage_placement") && l["stage_placement"] != "loop")
        s << " · " << l["stage_placement"].get<std::string>() << " stages";
    if (l.contains("layers_per_stage")) {
        s << " · layers";
        for (const auto& n : l["layers_per_stage"]) s << " " << n.get<std::int64_t>();
    }
    return s.str();
}

std::optional<std::int64_t> iteration_of(const std::string& name) {
    if (name.size() != 12 || name.rfind("iter_", 0) != 0) return std::nullopt;
    std::int64_t v = 0;
    for (std::size_t i = 5; i < name.size(); ++i) {
        if (name[i] < '0' || name[i] > '9') return std::nullopt;
        v = v * 10 + (name[i] - '0');
    }
    return v;
}

core::Json read_manifest(const fs::path& dir) {
    std::ifstream in(dir / kManifest);
    if (!in) throw core::SpecError("--load", "'" + (dir / kManifest).string() + "' is missing");
    try {
        return core::Json::parse(in);
    } catch (const std::exception&) {
        throw core::SpecError("--load", "'" + (dir / kManifest).string() + "' is not valid JSON");
    }
}

// The problem with shard `rank` of checkpoint `dir`, or "" when its size and checksum match.
std::string check_shard(const fs::path& dir, const core::Json& manifest, int rank,
                        std::vector<std::uint8_t>* bytes_out) {
    const core::Json& shards = manifest.at("shards");
    if (!shards.is_array() || rank >= int(shards.size()))
        return "the manifest lists no shard for rank " + std::to_string(rank);
    const core::Json& entry = shards[std::size_t(rank)];
    const fs::path path = dir / entry.at("file").get<std::string>();
    std::ifstream in(path, std::ios::binary);
    if (!in) return "'" + path.string() + "' is missing";
    std::vector<std::uint8_t> bytes{std::istreambuf_iterator<char>(in), {}};
    const auto expected = entry.at("bytes").get<std::uint64_t>();
    if (bytes.size() != expected)
        return "'" + path.string() + "' has " + std::to_string(bytes.size()) +
               " bytes, the manifest says " + std::to_string(expected) + " (truncated?)";
    if (hex(checksum(bytes.data(), bytes.size())) != entry.at("checksum").get<std::string>())
        return "'" + path.string() + "' does not match its checksum (corrupt)";
    if (bytes_out) *bytes_out = std::move(bytes);
    return {};
}

// The same layout: the shard's buffers are this rank's, element for element.
void load_own(const checkpoint_detail::Shard& shard, const TrainerState& state, int rank) {
    const auto& mine = state.store->tensors;
    bool same =
        shard.tensors.size() == mine.size() && shard.parameters.size() == state.parameters.size() &&
        shard.adam_m.size() == state.adam_m.size() && shard.moment_runs == state.moment_runs;
    for (std::size_t i = 0; same && i < mine.size(); ++i)
        same = shard.tensors[i].name == mine[i].name && shard.tensors[i].offset == mine[i].offset &&
               shard.tensors[i].size == mine[i].size;
    if (!same)
        throw core::SpecError("--load", "rank " + std::to_string(rank) +
                                            "'s shard does not match this run's tensors");
    std::copy(shard.parameters.begin(), shard.parameters.end(), state.parameters.begin());
    std::copy(shard.adam_m.begin(), shard.adam_m.end(), state.adam_m.begin());
    std::copy(shard.adam_v.begin(), shard.adam_v.end(), state.adam_v.begin());
    *state.skipped_steps = shard.skipped_steps;
}

// The name a tensor's values come from: a tied embedding's copy on the last stage is rebuilt
// from the embedding itself.
std::string source_of(const std::string& name) {
    const std::string suffix = ".tied_copy";
    return name.ends_with(suffix) ? name.substr(0, name.size() - suffix.size()) : name;
}

// Another layout: every full tensor this rank needs is rebuilt from all the saved shards (each
// shard's tensor table says where each element of a full tensor sits in its flat buffer, and
// its moment range which elements it holds Adam state for), then this rank's own pieces are
// cut out of them. Replicas agree, so the first copy of an element wins.
void load_resharded(const std::vector<checkpoint_detail::Shard>& shards,
                    const TrainerState& state) {
    struct Full {
        std::vector<float> p, m, v;
        std::vector<std::uint8_t> has_p, has_moments;
    };
    std::map<std::string, Full> full;
    for (const auto& t : state.store->tensors) full[source_of(t.name)];
    for (const auto& shard : shards) {
        const checkpoint_detail::MomentIndex moments(shard.moment_runs);
        for (const auto& t : shard.tensors) {
            const auto it = full.find(t.name);
            if (t.duplicate || it == full.end()) continue;
            Full& f = it->second;
            if (f.p.empty()) {
                f.p.assign(std::size_t(t.full_size), 0.0f);
                f.m = f.v = f.p;
                f.has_p.assign(std::size_t(t.full_size), 0);
                f.has_moments = f.has_p;
            }
            if (std::int64_t(f.p.size()) != t.full_size)
                throw core::SpecError("--load",
                                      "tensor " + t.name + " has two sizes in the checkpoint");
            std::int64_t local = t.offset;
            for (const auto& [offset, length] : t.placement)
                for (std::int64_t i = 0; i < length; ++i, ++local) {
                    const auto at = std::size_t(offset + i);
                    if (!f.has_p[at]) {
                        f.p[at] = shard.parameters[std::size_t(local)];
                        f.has_p[at] = 1;
                    }
                    if (f.has_moments[at]) continue;
                    const std::int64_t moment = moments.of(local);
                    if (moment < 0) continue;
                    f.m[at] = shard.adam_m[std::size_t(moment)];
                    f.v[at] = shard.adam_v[std::size_t(moment)];
                    f.has_moments[at] = 1;
                }
        }
    }
    const checkpoint_detail::MomentIndex moments(state.moment_runs);
    for (const auto& t : state.store->tensors) {
        const Full& f = full.at(source_of(t.name));
        if (std::int64_t(f.p.size()) != t.full_size)
            throw core::SpecError("--load", "the checkpoint has no tensor " + source_of(t.name) +
                                                " of " + std::to_string(t.full_size) + " values");
        std::int64_t local = t.offset;
        for (const auto& [offset, length] : t.placement)
            for (std::int64_t i = 0; i < length; ++i, ++local) {
                const auto at = std::size_t(offset + i);
                if (!f.has_p[at])
                    throw core::SpecError("--load", "the checkpoint lacks part of tensor " +
                                                        source_of(t.name));
                state.parameters[std::size_t(local)] = f.p[at];
                const std::int64_t moment = moments.of(local);
                if (moment < 0) continue;
                if (!f.has_moments[at])
                    throw core::SpecError("--load", "the checkpoint lacks the Adam state of "
                                                    "part of tensor " +
                                                        source_of(t.name));
                state.adam_m[std::size_t(moment)] = f.m[at];
                state.adam_v[std::size_t(moment)] = f.v[at];
            }
    }
    *state.skipped_steps = shards.front().skipped_steps;
}

} // namespace

std::string checkpoint_name(std::int64_t iteration) {
    char text[32];
    std::snprintf(text, sizeof text, "iter_%07lld", (long long)iteration);
    return text;
}

void save_checkpoint(const std::string& dir, const CheckpointPosition& position, Trainer& trainer,
                     const core::JobSpec& job, ProcessGroups& groups) {
    const MPI_Comm world = groups.world->handle();
    const int rank = groups.world_rank, size = groups.world->size();
    const fs::path root(dir), final_dir = root / checkpoint_name(position.iteration);
    const fs::path partial = root / (checkpoint_name(position.iteration) + ".partial");
    std::string error;
    if (rank == 0) {
        try {
            fs::create_directories(root);
            // Leftovers of a run that died mid-save: never whole, never loaded.
            for (const auto& entry : fs::directory_iterator(root))
                if (entry.path().extension() == ".partial") fs::remove_all(entry.path());
            fs::create_directory(partial);
        } catch (const std::exception& e) {
            error = "cannot prepare '" + partial.string() + "': " + e.what();
        }
    }
    agree(world, "--save", error);

    // This rank's shard.
    const std::vector<std::uint8_t> bytes =
        checkpoint_detail::serialize_shard(rank, position.iteration, trainer.state());
    try {
        write_durably(partial / shard_name(rank), bytes);
    } catch (const core::SpecError& e) {
        error = e.reason();
    }
    agree(world, "--save", error);

    // Sizes and checksums to rank 0, which writes the manifest last and renames the whole.
    const std::uint64_t mine[2] = {bytes.size(), checksum(bytes.data(), bytes.size())};
    std::vector<std::uint64_t> all(rank == 0 ? 2 * std::size_t(size) : 0);
    check_mpi(MPI_Gather(mine, 2, MPI_UINT64_T, all.data(), 2, MPI_UINT64_T, 0, world),
              "MPI_Gather");
    if (rank == 0) {
        try {
            core::Json shards = core::Json::array();
            for (int r = 0; r < size; ++r)
                shards.push_back({{"rank", r},
                                  {"file", shard_name(r)},
                                  {"bytes", all[2 * std::size_t(r)]},
                                  {"checksum", hex(all[2 * std::size_t(r) + 1])}});
            const core::Json manifest = {{"format", "trident.checkpoint/1"},
                                         {"iteration", position.iteration},
                                         {"consumed_samples", position.consumed_samples},
                                         {"seed", position.seed},
                                         {"model", core::to_json(job.model)},
                                         {"layout", layout_of(job, size)},
                                         {"global_batch_size", job.training.global_batch_size},
                                         {"seq_length", job.training.seq_length},
                                         {"checksum", "fnv1a64 over little-endian 64-bit words"},
                                         {"shards", shards}};
            const std::string text = manifest.dump(1);
            write_durably(partial / kManifest, std::vector<std::uint8_t>(text.begin(), text.end()));
            sync_directory(partial);
            // An older save of the same iteration (a run that resumed before it) is replaced
            // only once the new one is whole.
            const fs::path replaced = root / (checkpoint_name(position.iteration) + ".replaced");
            if (fs::exists(final_dir)) fs::rename(final_dir, replaced);
            fs::rename(partial, final_dir);
            sync_directory(root);
            fs::remove_all(replaced);
            core::write_file_atomically((root / kLatest).string(),
                                        std::to_string(position.iteration) + "\n", "--save");
            sync_directory(root);
        } catch (const core::SpecError& e) {
            error = e.reason();
        } catch (const std::exception& e) {
            error = std::string("cannot finish '") + final_dir.string() + "': " + e.what();
        }
    }
    agree(world, "--save", error);
}

std::optional<CheckpointPosition> load_checkpoint(const std::string& dir, Trainer& trainer,
                                                  const core::JobSpec& job, ProcessGroups& groups) {
    const MPI_Comm world = groups.world->handle();
    const int rank = groups.world_rank, size = groups.world->size();
    const fs::path root(dir);
    // Rank 0 picks the checkpoint: the one latest_checkpointed_iteration.txt names, else the
    // newest whole directory (a run killed between renaming and updating the pointer).
    std::int64_t iteration = -1;
    std::string error;
    if (rank == 0) {
        try {
            if (fs::exists(root) && !fs::is_directory(root))
                throw core::SpecError("--load", "'" + dir + "' is not a directory");
            std::ifstream latest(root / kLatest);
            std::int64_t named = -1;
            if (latest && !(latest >> named))
                throw core::SpecError("--load", "'" + (root / kLatest).string() +
                                                    "' does not hold an iteration number");
            std::int64_t newest = -1;
            if (fs::is_directory(root))
                for (const auto& entry : fs::directory_iterator(root))
                    if (const auto it = iteration_of(entry.path().filename().string());
                        it && fs::exists(entry.path() / kManifest))
                        newest = std::max(newest, *it);
            iteration = std::max(named, newest);
            if (named >= 0 && !fs::is_directory(root / checkpoint_name(named)) && newest < named)
                throw core::SpecError("--load", "'" + (root / kLatest).string() + "' names " +
                                                    checkpoint_name(named) +
                                                    ", which does not exist");
        } catch (const core::SpecError& e) {
            error = e.reason();
        }
    }
    agree(world, "--load", error);
    check_mpi(MPI_Bcast(&iteration, 1, MPI_INT64_T, 0, world), "MPI_Bcast");
    if (iteration < 0) return std::nullopt;

    const fs::path ckpt = root / checkpoint_name(iteration);
    CheckpointPosition position;
    bool reshard = false;
    std::string saved_layout;
    int saved_shards = 0;
    std::vector<checkpoint_detail::Shard> shards;
    try {
        const core::Json manifest = read_manifest(ckpt);
        const std::string where = "'" + ckpt.string() + "'";
        if (manifest.value("format", "") != "trident.checkpoint/1")
            throw core::SpecError("--load", where + " is not a trident.checkpoint/1 checkpoint");
        if (manifest.at("model") != core::to_json(job.model))
            throw core::SpecError("--load", where + " holds another model (" +
                                                manifest.at("model").value("name", "?") +
                                                ") than this run's (" + job.model.name + ")");
        const core::Json layout = layout_of(job, size);
        reshard = manifest.at("layout") != layout;
        saved_layout = describe_layout(manifest.at("layout"));
        saved_shards = int(manifest.at("shards").size());
        if (manifest.at("global_batch_size") != job.training.global_batch_size ||
            manifest.at("seq_length") != job.training.seq_length)
            throw core::SpecError(
                "--load", where + " was trained with global batch " +
                              manifest.at("global_batch_size").dump() + " and sequence length " +
                              manifest.at("seq_length").dump() + "; this run asks for " +
                              std::to_string(job.training.global_batch_size) + " and " +
                              std::to_string(job.training.seq_length));
        position.iteration = manifest.at("iteration").get<std::int64_t>();
        position.consumed_samples = manifest.at("consumed_samples").get<std::int64_t>();
        position.seed = manifest.at("seed").get<std::uint64_t>();
        // Same layout: this rank's own shard. Another layout: every shard, resharded below.
        for (int r = reshard ? 0 : rank; r < (reshard ? saved_shards : rank + 1); ++r) {
            std::vector<std::uint8_t> bytes;
            const std::string problem = check_shard(ckpt, manifest, r, &bytes);
            if (!problem.empty()) throw core::SpecError("--load", problem);
            shards.push_back(
                checkpoint_detail::parse_shard(bytes, (ckpt / shard_name(r)).string()));
        }
    } catch (const core::SpecError& e) {
        error = e.reason();
    } catch (const std::exception& e) { // a manifest field of the wrong type
        error = "'" + (ckpt / kManifest).string() + "' is malformed: " + e.what();
    }
    agree(world, "--load", error);

    try {
        if (reshard)
            load_resharded(shards, trainer.state());
        else
            load_own(shards.front(), trainer.state(), rank);
        trainer.state_loaded();
        position.resharded_from = reshard ? saved_layout : "";
    } catch (const core::SpecError& e) {
        error = e.reason();
    }
    agree(world, "--load", error);
    return position;
}

std::vector<CheckpointCheck> verify_checkpoints(const std::string& dir) {
    using State = CheckpointCheck::State;
    if (!fs::is_directory(dir)) throw core::SpecError("--dir", "'" + dir + "' is not a directory");
    std::vector<fs::path> dirs;
    for (const auto& entry : fs::directory_iterator(dir))
        if (entry.is_directory()) dirs.push_back(entry.path());
    std::sort(dirs.begin(), dirs.end());
    std::vector<CheckpointCheck> checks;
    for (const fs::path& d : dirs) {
        CheckpointCheck c{d.filename().string(), State::whole, {}};
        if (!iteration_of(c.name)) {
            c.state = State::interrupted;
            c.detail = "an interrupted save: ignored by --load, removed by the next --save";
        } else {
            try {
                const core::Json manifest = read_manifest(d);
                const int shards = int(manifest.at("shards").size());
                for (int r = 0; r < shards && c.detail.empty(); ++r)
                    c.detail = check_shard(d, manifest, r, nullptr);
                if (c.detail.empty())
                    c.detail = std::to_string(shards) + " shards, sizes and checksums match";
                else
                    c.state = State::damaged;
            } catch (const core::SpecError& e) {
                c.state = State::damaged;
                c.detail = e.reason();
            } catch (const std::exception& e) {
                c.state = State::damaged;
                c.detail = std::string("malformed manifest: ") + e.what();
            }
        }
        checks.push_back(std::move(c));
    }
    return checks;
}

} // namespace trident::executor
