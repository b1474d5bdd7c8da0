#include "trident/executor/checkpoint.h"

#include "checkpoint_files.h"
#include "checkpoint_fp8.h"
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
#include <stdexcept>
#include <unistd.h>

namespace trident::executor {
namespace fs = std::filesystem;
using namespace checkpoint_files;
namespace {

// A shard that is missing, truncated or fails its checksum.
struct DamagedCheckpoint : std::runtime_error {
    using std::runtime_error::runtime_error;
};

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

// `text` of rank `root`, on every rank.
std::string broadcast_text(MpiCommunicator& world, std::string text, int root) {
    const auto watched = world.watch_collective("broadcast");
    int length = int(text.size());
    check_mpi(MPI_Bcast(&length, 1, MPI_INT, root, world.handle()), "MPI_Bcast");
    text.resize(std::size_t(length));
    check_mpi(MPI_Bcast(text.data(), length, MPI_CHAR, root, world.handle()), "MPI_Bcast");
    return text;
}

// Every rank learns whether any rank failed; all of them raise the first failing rank's
// message, so mpirun sees one clean exit code and rank 0 prints one line.
void agree(MpiCommunicator& world, const std::string& field, const std::string& local_error) {
    const int rank = world.rank(), size = world.size();
    int first = local_error.empty() ? size : rank;
    {
        const auto watched = world.watch_collective("all-reduce (min)");
        check_mpi(MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, world.handle()),
                  "MPI_Allreduce");
    }
    if (first == size) return;
    throw core::SpecError(field, broadcast_text(world, rank == first ? local_error : "", first));
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

// The name a tensor's values come from: the last stage's copies of the word embedding (tied
// to the head, or read by multi-token prediction) are rebuilt from the embedding itself.
std::string source_of(const std::string& name) {
    for (const std::string suffix : {".tied_copy", ".mtp_copy"})
        if (name.ends_with(suffix)) return name.substr(0, name.size() - suffix.size());
    return name;
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
    MpiCommunicator& world = *groups.world;
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

    // Delayed FP8 scaling's amax histories, one file from rank 0 (a collective).
    const bool delayed = job.plan.fp8.recipe == core::Fp8Recipe::delayed;
    const std::string fp8_text =
        delayed ? checkpoint_fp8::gather_text(trainer.fp8_amax_histories(), world, rank) : "";
    core::Json fp8_entry;
    if (rank == 0 && delayed) {
        try {
            const std::vector<std::uint8_t> fp8_bytes(fp8_text.begin(), fp8_text.end());
            write_durably(partial / checkpoint_fp8::kFile, fp8_bytes);
            fp8_entry = {{"file", checkpoint_fp8::kFile},
                         {"bytes", fp8_bytes.size()},
                         {"checksum", hex(checksum(fp8_bytes.data(), fp8_bytes.size()))}};
        } catch (const core::SpecError& e) {
            error = e.reason();
        }
    }
    agree(world, "--save", error);

    // Sizes and checksums to rank 0, which writes the manifest last and renames the whole.
    const std::uint64_t mine[2] = {bytes.size(), checksum(bytes.data(), bytes.size())};
    std::vector<std::uint64_t> all(rank == 0 ? 2 * std::size_t(size) : 0);
    {
        const auto watched = world.watch_collective("gather");
        check_mpi(MPI_Gather(mine, 2, MPI_UINT64_T, all.data(), 2, MPI_UINT64_T, 0, world.handle()),
                  "MPI_Gather");
    }
    if (rank == 0) {
        try {
            core::Json shards = core::Json::array();
            for (int r = 0; r < size; ++r)
                shards.push_back({{"rank", r},
                                  {"file", shard_name(r)},
                                  {"bytes", all[2 * std::size_t(r)]},
                                  {"checksum", hex(all[2 * std::size_t(r) + 1])}});
            core::Json manifest = {{"format", "trident.checkpoint/1"},
                                   {"iteration", position.iteration},
                                   {"consumed_samples", position.consumed_samples},
                                   {"seed", position.seed},
                                   {"model", core::to_json(job.model)},
                                   {"layout", layout_of(job, size)},
                                   {"global_batch_size", job.training.global_batch_size},
                                   {"seq_length", job.training.seq_length},
                                   {"checksum", "fnv1a64 over little-endian 64-bit words"},
                                   {"shards", shards}};
            if (!fp8_entry.is_null()) manifest["fp8_amax_history"] = fp8_entry;
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

namespace {

// The saved state of checkpoint `ckpt` that this rank needs: its own shard, or every shard
// when the layout differs. Fills `position`, `reshard` and `saved_layout`.
std::vector<checkpoint_detail::Shard> read_shards(const fs::path& ckpt, const core::JobSpec& job,
                                                  int rank, int size, CheckpointPosition& position,
                                                  bool& reshard, std::string& saved_layout) {
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
    const int saved_shards = int(manifest.at("shards").size());
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
    std::vector<checkpoint_detail::Shard> shards;
    for (int r = reshard ? 0 : rank; r < (reshard ? saved_shards : rank + 1); ++r) {
        std::vector<std::uint8_t> bytes;
        const std::string problem = check_shard(ckpt, manifest, r, &bytes);
        if (!problem.empty()) throw DamagedCheckpoint(problem);
        shards.push_back(checkpoint_detail::parse_shard(bytes, (ckpt / shard_name(r)).string()));
    }
    return shards;
}

// The saved amax histories into `trainer`, when the checkpoint has them (rank 0 reads and
// checks the file, every rank parses it); whether it had them. Collective over `world`.
bool load_fp8_histories(const fs::path& ckpt, Trainer& trainer, const core::JobSpec& job,
                        MpiCommunicator& world, int rank) {
    std::string text, error;
    if (rank == 0) {
        try {
            const core::Json manifest = read_manifest(ckpt);
            if (const auto it = manifest.find("fp8_amax_history"); it != manifest.end()) {
                std::vector<std::uint8_t> bytes;
                error = check_listed_file(ckpt, *it, &bytes);
                text.assign(bytes.begin(), bytes.end());
            }
        } catch (const core::SpecError& e) {
            error = e.reason();
        } catch (const std::exception& e) {
            error =
                "'" + (ckpt / kManifest).string() + "' fp8_amax_history is malformed: " + e.what();
        }
    }
    agree(world, "--load", error);
    text = broadcast_text(world, text, 0);
    if (text.empty()) return false;
    try {
        trainer.restore_fp8_amax_histories(
            checkpoint_fp8::parse(text, (ckpt / checkpoint_fp8::kFile).string(), job));
    } catch (const core::SpecError& e) {
        error = e.field() + ": " + e.reason();
    }
    agree(world, "--load", error);
    return true;
}

} // namespace

std::optional<CheckpointPosition> load_checkpoint(const LoadRequest& request, Trainer& trainer,
                                                  const core::JobSpec& job, ProcessGroups& groups) {
    MpiCommunicator& world = *groups.world;
    const int rank = groups.world_rank, size = groups.world->size();
    const fs::path root(request.dir);
    std::int64_t iteration = -1;
    std::string error;
    if (rank == 0) {
        try {
            iteration = choose_iteration(request);
        } catch (const core::SpecError& e) {
            error = e.reason();
        }
    }
    agree(world, "--load", error);
    {
        const auto watched = world.watch_collective("broadcast");
        check_mpi(MPI_Bcast(&iteration, 1, MPI_INT64_T, 0, world.handle()), "MPI_Bcast");
    }
    if (iteration < 0) return std::nullopt;

    const fs::path ckpt = root / checkpoint_name(iteration);
    CheckpointPosition position;
    bool reshard = false;
    std::string saved_layout;
    std::vector<checkpoint_detail::Shard> shards;
    int damaged = 0;
    try {
        shards = read_shards(ckpt, job, rank, size, position, reshard, saved_layout);
    } catch (const DamagedCheckpoint& e) {
        error = e.what();
        damaged = 1;
    } catch (const core::SpecError& e) {
        error = e.reason();
        damaged = e.reason().find(kManifest) != std::string::npos; // missing or not JSON
    } catch (const std::exception& e) { // a manifest field of the wrong type
        error = "'" + (ckpt / kManifest).string() + "' is malformed: " + e.what();
        damaged = 1;
    }
    // A damaged checkpoint: every rank's refusal ends with how to load the newest whole one.
    {
        const auto watched = world.watch_collective("all-reduce (max)");
        check_mpi(MPI_Allreduce(MPI_IN_PLACE, &damaged, 1, MPI_INT, MPI_MAX, world.handle()),
                  "MPI_Allreduce");
    }
    if (damaged) {
        const std::string hint =
            broadcast_text(world, rank == 0 ? newest_whole_hint(root, iteration) : "", 0);
        if (!error.empty()) error += hint;
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
    if (job.plan.fp8.recipe == core::Fp8Recipe::delayed)
        position.fp8_histories_restored = load_fp8_histories(ckpt, trainer, job, world, rank);
    return position;
}

} // namespace trident::executor
