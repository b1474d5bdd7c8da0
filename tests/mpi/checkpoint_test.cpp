// Checkpoints under mpirun: an exact resume, refusal of damaged or mismatched checkpoints, and
// the fault test — a rank killed with SIGKILL at random points, the run relaunched with
// --load each time, and the final losses equal to the uninterrupted run's bit for bit.
#include "../support/trident_process.h"

#include <csignal>
#include <cstdio>
#include <dirent.h>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace fs = std::filesystem;
using trident::test::run_shell;

namespace {

const std::string kJob = std::string(" ") + TRIDENT_BINARY +
                         " run --model gpt-tiny --cluster localhost --devices-per-node 2 --tp 1 "
                         "--dp 1 --pp 2 --mbs 2 --gbs 8 --seq-length 16 --train-iters 16 "
                         "--seed 11 --lr 1e-3 --lr-warmup-iters 2";
const std::string kMpirun = "mpirun --allow-run-as-root --oversubscribe -np 2";

// step number → the loss text as printed (%.9g of a float: exact).
std::map<int, std::string> losses_of(const std::string& output) {
    std::map<int, std::string> losses;
    std::istringstream in(output);
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("step ", 0) != 0) continue;
        const int step = std::stoi(line.substr(5));
        const auto at = line.find("| loss ");
        losses[step] = line.substr(at + 7, line.find(' ', at + 7) - at - 7);
    }
    return losses;
}

std::string fresh_dir(const std::string& name) {
    const fs::path d = fs::path(testing::TempDir()) / ("trident-ckpt-" + name);
    fs::remove_all(d);
    return d.string();
}

// `job --load dir` on `ranks` ranks with `target` (its layout flags): exit 0, `steps` losses,
// each the uninterrupted run's (`reference`) within 1e-5; returns the run's output.
std::string expect_resumes(const std::string& job, const std::string& dir, int ranks,
                           const std::string& target, const std::map<int, std::string>& reference,
                           std::size_t steps) {
    const auto r = run_shell("mpirun --allow-run-as-root --oversubscribe -np " +
                             std::to_string(ranks) + job + target + " --load " + dir);
    EXPECT_EQ(r.exit_code, 0) << target << "\n" << r.err;
    const auto losses = losses_of(r.out);
    EXPECT_EQ(losses.size(), steps) << r.out;
    for (const auto& [step, loss] : losses)
        EXPECT_NEAR(std::stod(loss), std::stod(reference.at(step)),
                    1e-5 * std::stod(reference.at(step)))
            << target << " step " << step;
    return r.out;
}

const std::map<int, std::string>& reference_losses() {
    static const std::map<int, std::string> reference = [] {
        const auto r = run_shell(kMpirun + kJob);
        EXPECT_EQ(r.exit_code, 0) << r.err;
        return losses_of(r.out);
    }();
    return reference;
}

struct Resume {
    int ranks;
    std::string layout;
};

// `job` (` run …` with --train-iters `steps`) on one process, the reference; then on 4 ranks
// in `save_layout`, saved at half-way and stopped; then resumed from that save in each target
// layout, whose losses must continue as the reference's (expect_resumes). The resumed outputs.
std::vector<std::string> save_then_resume(const std::string& job, std::size_t steps,
                                          const std::string& name, const std::string& save_layout,
                                          const std::vector<Resume>& targets) {
    const auto one = run_shell(job + " --devices-per-node 1");
    EXPECT_EQ(one.exit_code, 0) << one.err;
    const auto reference = losses_of(one.out);
    EXPECT_EQ(reference.size(), steps) << one.out;
    const std::string dir = fresh_dir(name);
    const auto saved = run_shell("mpirun --allow-run-as-root --oversubscribe -np 4" + job +
                                 " --devices-per-node 4 " + save_layout + " --save " + dir +
                                 " --exit-interval " + std::to_string(steps / 2));
    EXPECT_EQ(saved.exit_code, 0) << saved.err;
    std::vector<std::string> outputs;
    if (reference.size() != steps || saved.exit_code != 0) return outputs;
    for (const Resume& t : targets)
        outputs.push_back(expect_resumes(
            job, dir, t.ranks, " --devices-per-node " + std::to_string(t.ranks) + " " + t.layout,
            reference, steps - steps / 2));
    return outputs;
}

// The pids of mpirun's direct children (the ranks).
std::vector<pid_t> children_of(pid_t parent) {
    std::vector<pid_t> pids;
    DIR* proc = ::opendir("/proc");
    while (dirent* e = ::readdir(proc)) {
        const pid_t pid = std::atoi(e->d_name);
        if (pid <= 0) continue;
        std::ifstream stat("/proc/" + std::string(e->d_name) + "/stat");
        std::string text;
        std::getline(stat, text);
        const auto close = text.rfind(')');
        if (close == std::string::npos) continue;
        std::istringstream rest(text.substr(close + 2));
        char state;
        pid_t ppid = 0;
        rest >> state >> ppid;
        if (ppid == parent) pids.push_back(pid);
    }
    ::closedir(proc);
    return pids;
}

struct Attempt {
    std::string out;
    int status = 0;
    bool killed = false;
};

// Runs `command` under sh; once stdout shows "step <kill_after>/", waits `delay_us` and
// SIGKILLs one rank (chosen by `victim`) — often inside a checkpoint save, since every step
// saves. kill_after < 0: no kill.
// Runs `command` and, `delay_us` after rank 0 logs step `kill_after`, sends `signal` to one
// rank (`victim`).
Attempt run_and_kill(const std::string& command, int kill_after, int delay_us, int victim,
                     int signal = SIGKILL) {
    int pipe_fds[2];
    EXPECT_EQ(::pipe(pipe_fds), 0);
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::dup2(pipe_fds[1], 1);
        ::close(pipe_fds[0]);
        ::execl("/bin/sh", "sh", "-c", ("exec " + command + " 2>/dev/null").c_str(), nullptr);
        ::_exit(127);
    }
    ::close(pipe_fds[1]);
    Attempt a;
    FILE* out = ::fdopen(pipe_fds[0], "r");
    char line[4096];
    const std::string trigger = "step " + std::to_string(kill_after) + "/";
    while (std::fgets(line, sizeof line, out)) {
        a.out += line;
        if (!a.killed && kill_after >= 0 && std::string(line).rfind(trigger, 0) == 0) {
            std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
            const auto ranks = children_of(pid);
            if (!ranks.empty()) {
                ::kill(ranks[std::size_t(victim) % ranks.size()], signal);
                a.killed = true;
            }
        }
    }
    std::fclose(out);
    ::waitpid(pid, &a.status, 0);
    return a;
}

} // namespace

TEST(Checkpoint, ResumeIsExact) {
    const auto& reference = reference_losses();
    ASSERT_EQ(reference.size(), 16u);
    const std::string dir = fresh_dir("resume");
    // Stop after 5 of the 16 steps (Megatron's --exit-interval: the learning-rate schedule
    // stays that of 16 steps), saving iter_0000005; then resume to the end.
    const auto first = run_shell(kMpirun + kJob + " --save " + dir + " --exit-interval 5");
    ASSERT_EQ(first.exit_code, 0) << first.err;
    EXPECT_EQ(losses_of(first.out).size(), 5u);
    ASSERT_TRUE(fs::exists(fs::path(dir) / "iter_0000005" / "manifest.json"));
    const auto second = run_shell(kMpirun + kJob + " --load " + dir + " --save " + dir);
    ASSERT_EQ(second.exit_code, 0) << second.err;
    EXPECT_NE(second.out.find("resuming from"), std::string::npos);
    const auto resumed = losses_of(second.out);
    ASSERT_EQ(resumed.size(), 11u);
    for (const auto& [step, loss] : resumed) EXPECT_EQ(loss, reference.at(step)) << "step " << step;
}

// Saved on a 2-rank pipeline, resumed in other layouts (the shards resharded by tensor name and
// placement, Adam state included): the losses continue as the uninterrupted run's, within the
// 1e-5 by which layouts differ anyway — also where only the stages differ (DualPipe's two
// copies; an uneven split). Also the way back, from a ZeRO-1 data-parallel save.
TEST(Checkpoint, LoadsIntoAnotherLayout) {
    const auto& reference = reference_losses();
    const std::string dir = fresh_dir("reshard");
    const auto saved = run_shell(kMpirun + kJob + " --save " + dir + " --exit-interval 5");
    ASSERT_EQ(saved.exit_code, 0) << saved.err;
    const std::string rest = std::string(" ") + TRIDENT_BINARY +
                             " run --model gpt-tiny --cluster localhost --mbs 2 --gbs 8 "
                             "--seq-length 16 --train-iters 16 --seed 11 --lr 1e-3 "
                             "--lr-warmup-iters 2 --load ";
    struct Target {
        int ranks;
        std::string layout;
    };
    for (const Target& t : {Target{2, "--tp 2 --pp 1 --dp 1"},
                            Target{2, "--tp 1 --pp 1 --dp 2 --distributed-optimizer"},
                            Target{1, "--tp 1 --pp 1 --dp 1"},
                            // The same degrees, other stages: another placement, another split.
                            Target{2, "--tp 1 --pp 2 --dp 1 --schedule dualpipe"},
                            Target{2, "--tp 1 --pp 2 --dp 1 --pipeline-layout 1,3"}}) {
        const std::string zero_dir = fresh_dir("reshard-zero");
        const auto r = run_shell("mpirun --allow-run-as-root --oversubscribe -np " +
                                 std::to_string(t.ranks) + rest + dir + " --devices-per-node " +
                                 std::to_string(t.ranks) + " " + t.layout +
                                 (t.layout.find("distributed") != std::string::npos
                                      ? " --save " + zero_dir + " --exit-interval 8"
                                      : ""));
        ASSERT_EQ(r.exit_code, 0) << t.layout << "\n" << r.err;
        EXPECT_NE(r.out.find("resharded from tp 1 · cp 1 · ep 1 · dp 1 · pp 2"), std::string::npos)
            << r.out;
        const auto losses = losses_of(r.out);
        ASSERT_FALSE(losses.empty()) << r.out;
        for (const auto& [step, loss] : losses)
            EXPECT_NEAR(std::stod(loss), std::stod(reference.at(step)),
                        1e-5 * std::stod(reference.at(step)))
                << t.layout << " step " << step;
        if (t.layout.find("distributed") == std::string::npos) continue;
        // From the ZeRO-1 save at step 8 (moments sharded over dp) back to the pipeline.
        const auto back = run_shell(kMpirun + kJob + " --load " + zero_dir);
        ASSERT_EQ(back.exit_code, 0) << back.err;
        EXPECT_NE(back.out.find("resuming from " + zero_dir + "/iter_0000008"), std::string::npos);
        for (const auto& [step, loss] : losses_of(back.out))
            EXPECT_NEAR(std::stod(loss), std::stod(reference.at(step)),
                        1e-5 * std::stod(reference.at(step)))
                << "back to pp2, step " << step;
    }
}

// The distributed optimizer with experts keeps Adam state for a slice of the dense tensors
// (over the data group) and a slice of the experts' (over the expert-data group): several
// moment runs per rank. Saved at dp4·ep2 (expert-data group of 2), resumed on one rank and at
// dp2·ep2, the losses continue as the uninterrupted one-process run's.
TEST(Checkpoint, ExpertAndDenseSlicesReshard) {
    const std::string job = std::string(" ") + TRIDENT_BINARY +
                            " run --model moe-tiny --cluster localhost --mbs 2 --gbs 8 "
                            "--seq-length 16 --train-iters 10 --seed 11 --lr 1e-3 "
                            "--lr-warmup-iters 2";
    for (const std::string& out :
         save_then_resume(job, 10, "moe-zero1", "--dp 4 --ep 2 --distributed-optimizer",
                          {{1, ""}, {2, "--dp 2 --ep 2 --distributed-optimizer"}}))
        EXPECT_NE(out.find("resharded from tp 1 · cp 1 · ep 2 · dp 4"), std::string::npos) << out;
}

// deepseek-tiny (MLA, shared and routed experts) saved under DualPipe (two copies, an uneven
// 3 + 2 split) with ZeRO-1 at pp2·dp2·ep2, resumed at tp2·dp2·ep2 with sequence parallelism:
// the duplicated chunk is no source, the expert and dense slices reshard, and the losses
// continue as one process's.
TEST(Checkpoint, DualPipeExpertCheckpointResumesUnderTensorParallelism) {
    const std::string job = std::string(" ") + TRIDENT_BINARY +
                            " run --model deepseek-tiny --cluster localhost --mbs 2 --gbs 16 "
                            "--seq-length 32 --train-iters 10 --seed 7";
    for (const std::string& out : save_then_resume(
             job, 10, "dualpipe-moe",
             "--pp 2 --dp 2 --ep 2 --schedule dualpipe --distributed-optimizer "
             "--pipeline-model-parallel-layout 'Ettt|ttL'",
             {{4, "--tp 2 --dp 2 --ep 2 --sequence-parallel --distributed-optimizer"}}))
        EXPECT_NE(out.find("two_copies stages · layers 3 2"), std::string::npos) << out;
}

// deepseek-tiny saved under ZeRO-3 at dp4·ep2 (each rank holding its slices of every FSDP
// unit, dense and expert), resumed on one process, under ZeRO-3 at dp2·ep2 and under ZeRO-2
// with two hybrid-sharding replicas at dp4·ep2 (the same degrees, other slices): the losses
// continue as the uninterrupted one-process run's.
TEST(Checkpoint, ZeroThreeSlicesReshard) {
    const std::string job = std::string(" ") + TRIDENT_BINARY +
                            " run --model deepseek-tiny --cluster localhost --mbs 2 --gbs 8 "
                            "--seq-length 32 --train-iters 8 --seed 5";
    const auto outputs = save_then_resume(
        job, 8, "zero3", "--dp 4 --ep 2 --zero-stage 3",
        {{1, ""},
         {2, "--dp 2 --ep 2 --use-megatron-fsdp --data-parallel-sharding-strategy "
             "optim_grads_params"},
         {4, "--dp 4 --ep 2 --zero-stage 2 --num-distributed-optimizer-instances 2"}});
    EXPECT_EQ(outputs.size(), 3u);
}

// deepseek-tiny with an MTP module saved at pp2·dp2·ep2 (3 + 2 layers; the last stage holds
// the word embedding's copy MTP reads, a duplicate saved by no shard), resumed on one process
// and at tp2·dp2·ep2 with sequence parallelism: the copy is rebuilt from the embedding and the
// losses continue as one process's.
TEST(Checkpoint, MultiTokenPredictionCopyIsRebuiltFromTheEmbedding) {
    const std::string job = std::string(" ") + TRIDENT_BINARY + " run --model " + TRIDENT_FIXTURES +
                            "/models/deepseek-tiny-mtp.json --cluster localhost --mbs 2 "
                            "--gbs 8 --seq-length 32 --train-iters 8 --seed 5";
    const auto outputs = save_then_resume(
        job, 8, "mtp", "--pp 2 --dp 2 --ep 2 --decoder-first-pipeline-num-layers 3",
        {{1, ""}, {4, "--tp 2 --dp 2 --ep 2 --sequence-parallel"}});
    EXPECT_EQ(outputs.size(), 2u);
}

TEST(Checkpoint, RefusesDamagedOrMismatchedCheckpoints) {
    const std::string dir = fresh_dir("refuse");
    const auto saved = run_shell(kMpirun + kJob + " --steps 2 --save " + dir);
    ASSERT_EQ(saved.exit_code, 0) << saved.err;
    const fs::path shard = fs::path(dir) / "iter_0000002" / "rank_00001.bin";
    const auto load = [&](const std::string& extra) {
        return run_shell(kMpirun + kJob + " --load " + dir + extra);
    };
    const auto expect_refused = [&](const trident::test::CommandResult& r,
                                    const std::string& what) {
        EXPECT_EQ(r.exit_code, 2) << r.out;
        EXPECT_NE(r.err.find("trident: error: --load: "), std::string::npos) << r.err;
        // Exactly once, though both ranks refused: rank 0 speaks before anyone leaves.
        EXPECT_EQ(r.err.find("trident: error:"), r.err.rfind("trident: error:")) << r.err;
        EXPECT_NE(r.err.find(what), std::string::npos) << r.err;
    };
    // Another model.
    expect_refused(run_shell(kMpirun + std::string(" ") + TRIDENT_BINARY +
                             " run --model llama-tiny --cluster localhost --devices-per-node 2 "
                             "--tp 1 --dp 1 --pp 2 --mbs 2 --gbs 8 --seq-length 16 --steps 4 "
                             "--seed 11 --load " +
                             dir),
                   "another model");
    // A flipped byte, then a truncated shard.
    const auto original = fs::file_size(shard);
    {
        std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
        f.seekg(std::streamoff(original / 2));
        const char byte = char(f.get() ^ 0x5a); // always a different byte
        f.seekp(std::streamoff(original / 2));
        f.put(byte);
    }
    expect_refused(load(""), "corrupt");
    fs::resize_file(shard, original - 3);
    expect_refused(load(""), "truncated");
    const auto verify = trident::test::run_trident({"checkpoint", "verify", "--dir", dir});
    EXPECT_EQ(verify.exit_code, 2);
    EXPECT_NE(verify.out.find("iter_0000002: DAMAGED"), std::string::npos) << verify.out;
    // Not a directory.
    const auto file = run_shell(kMpirun + kJob + " --load " + shard.string());
    EXPECT_EQ(file.exit_code, 2);
    EXPECT_NE(file.err.find("is not a directory"), std::string::npos) << file.err;
    // A different seed would read other data: refused too.
    fs::resize_file(shard, original);
    const auto other_seed = run_shell(kMpirun + std::string(" ") + TRIDENT_BINARY +
                                      " run --model gpt-tiny --cluster localhost "
                                      "--devices-per-node 2 --tp 1 --dp 1 --pp 2 --mbs 2 --gbs 8 "
                                      "--seq-length 16 --steps 4 --seed 12 --load " +
                                      dir);
    EXPECT_EQ(other_seed.exit_code, 2);
}

TEST(Checkpoint, SurvivesRanksKilledAtRandomPoints) {
    const auto& reference = reference_losses();
    const std::string dir = fresh_dir("fault");
    const std::string command =
        kMpirun + kJob + " --save " + dir + " --save-interval 1 --load " + dir;
    std::mt19937 rng(20261130);
    std::map<int, std::string> final_losses;
    int kills = 0, resume_from = 0;
    for (int attempt = 0; attempt < 8; ++attempt) {
        // Three kills, each 1-3 steps after the resume point plus 0-6 ms (a step with its save
        // takes a few ms, so many kills land inside a save), then a run to the end. 16 steps
        // leave room for all three kills however far each run gets before its kill lands.
        const bool kill = kills < 3;
        const int kill_after = kill ? resume_from + 1 + int(rng() % 3) : -1;
        const int delay_us = int(rng() % 6000), victim = int(rng() % 2);
        const Attempt a = run_and_kill(command, kill_after, delay_us, victim);
        for (const auto& [step, loss] : losses_of(a.out)) final_losses[step] = loss;
        if (a.killed) {
            ++kills;
            EXPECT_NE(a.status, 0);
        } else {
            ASSERT_TRUE(WIFEXITED(a.status) && WEXITSTATUS(a.status) == 0) << a.out;
            break;
        }
        // Whatever the kill interrupted, every checkpoint directory in place is whole.
        const auto verify = trident::test::run_trident({"checkpoint", "verify", "--dir", dir});
        EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
        std::ifstream latest(fs::path(dir) / "latest_checkpointed_iteration.txt");
        if (!(latest >> resume_from)) resume_from = 0;
        std::printf("killed rank %d %d us after step %d was logged; newest checkpoint: step %d%s\n",
                    victim, delay_us, kill_after, resume_from,
                    verify.out.find("interrupted") != std::string::npos
                        ? "; an interrupted save was left (ignored by --load)"
                        : "");
    }
    EXPECT_EQ(kills, 3);
    ASSERT_EQ(final_losses.size(), reference.size());
    for (const auto& [step, loss] : reference)
        EXPECT_EQ(final_losses[step], loss) << "step " << step;
    // The last run cleaned up after the killed ones: no half-written directory remains.
    for (const auto& entry : fs::directory_iterator(dir))
        EXPECT_EQ(entry.path().string().find(".partial"), std::string::npos) << entry.path();
    const auto verify = trident::test::run_trident({"checkpoint", "verify", "--dir", dir});
    EXPECT_EQ(verify.exit_code, 0) << verify.out;
    EXPECT_NE(verify.out.find("iter_0000016: whole"), std::string::npos) << verify.out;
}

// Which checkpoint --load takes: DIR/iter_N and --ckpt-step N load that one; a missing
// iteration or directory is refused (a missing one is a first launch only when it is also the
// --save directory); a damaged newest checkpoint is refused with the --ckpt-step that loads the
// newest whole one, which `checkpoint list` names too.
TEST(Checkpoint, LoadsTheIterationAskedForAndExplainsMissingOrDamagedOnes) {
    const std::string dir = fresh_dir("choose");
    const std::string job = kJob + " --steps 4";
    const auto saved = run_shell(kMpirun + job + " --save " + dir + " --save-interval 2");
    ASSERT_EQ(saved.exit_code, 0) << saved.err;
    const auto uninterrupted = losses_of(saved.out);
    ASSERT_EQ(uninterrupted.size(), 4u);
    const auto expect_from_two = [&](const std::string& load) {
        const auto r = run_shell(kMpirun + job + " --load " + load);
        EXPECT_EQ(r.exit_code, 0) << load << "\n" << r.err;
        EXPECT_NE(r.out.find("iter_0000002 (step 2,"), std::string::npos) << r.out;
        const auto losses = losses_of(r.out);
        EXPECT_EQ(losses.size(), 2u) << r.out;
        for (const auto& [step, loss] : losses) EXPECT_EQ(loss, uninterrupted.at(step)) << step;
    };
    expect_from_two(dir + "/iter_0000002");
    expect_from_two(dir + "/iter_0000002/");
    expect_from_two(dir + " --ckpt-step 2");
    const auto refused = [&](const std::string& args, const std::string& field,
                             const std::string& words) {
        const auto r = run_shell(kMpirun + job + args);
        EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.out;
        EXPECT_NE(r.err.find("trident: error: " + field + ": "), std::string::npos) << r.err;
        EXPECT_NE(r.err.find(words), std::string::npos) << r.err;
        return r;
    };
    refused(" --load " + dir + " --ckpt-step 3", "--load",
            "has no whole iter_0000003 (it holds iterations 2, 4)");
    refused(" --load " + dir + "/iter_0000002 --ckpt-step 4", "--ckpt-step",
            "is 4, but --load names iter_0000002");
    const std::string missing = fresh_dir("choose-missing");
    refused(" --load " + missing, "--load", "does not exist");
    EXPECT_FALSE(fs::exists(missing));
    // The auto-resume pattern: the same directory for both is a first launch.
    const auto first =
        run_shell(kMpirun + kJob + " --steps 2 --load " + missing + " --save " + missing);
    EXPECT_EQ(first.exit_code, 0) << first.err;
    EXPECT_NE(first.out.find("(a first launch): starting from step 0"), std::string::npos)
        << first.out;

    // The newest checkpoint damaged: refused, naming the older whole one.
    const fs::path shard = fs::path(dir) / "iter_0000004" / "rank_00000.bin";
    fs::resize_file(shard, fs::file_size(shard) - 8);
    refused(" --load " + dir, "--load",
            "the newest whole checkpoint before it is iter_0000002: load it with --ckpt-step 2");
    const auto list = trident::test::run_trident({"checkpoint", "list", "--dir", dir});
    EXPECT_EQ(list.exit_code, 0) << list.err;
    EXPECT_NE(list.out.find("DAMAGED"), std::string::npos) << list.out;
    EXPECT_NE(list.out.find("--ckpt-step 2"), std::string::npos) << list.out;
    EXPECT_NE(list.out.find("[latest_checkpointed_iteration]  [--load takes this]"),
              std::string::npos)
        << list.out;
    expect_from_two(dir + " --ckpt-step 2");
}

// Preemption as Slurm does it: SIGTERM — here to one rank only, so the ranks must agree — under
// --exit-signal-handler finishes the step, saves on every rank and exits 0; the run then resumes
// from that checkpoint to the uninterrupted losses.
TEST(Checkpoint, SigtermSavesAtTheEndOfTheStepAndExitsZero) {
    const auto& reference = reference_losses();
    const std::string dir = fresh_dir("sigterm");
    const Attempt a = run_and_kill(kMpirun + kJob + " --save " + dir + " --exit-signal-handler", 3,
                                   0, 1, SIGTERM);
    ASSERT_TRUE(a.killed) << a.out;
    ASSERT_TRUE(WIFEXITED(a.status) && WEXITSTATUS(a.status) == 0) << a.out;
    const auto at = a.out.find("stopped after step ");
    ASSERT_NE(at, std::string::npos) << a.out;
    const int stopped = std::stoi(a.out.substr(at + 19));
    EXPECT_GE(stopped, 3);
    EXPECT_LT(stopped, 16);
    EXPECT_NE(a.out.find("of 16: received SIGTERM (--exit-signal-handler)"), std::string::npos)
        << a.out;
    const auto verify = trident::test::run_trident({"checkpoint", "verify", "--dir", dir});
    EXPECT_EQ(verify.exit_code, 0) << verify.out;
    char name[32];
    std::snprintf(name, sizeof name, "iter_%07d: whole", stopped);
    EXPECT_NE(verify.out.find(name), std::string::npos) << verify.out;
    const auto resumed = run_shell(kMpirun + kJob + " --load " + dir);
    ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
    const auto losses = losses_of(resumed.out);
    EXPECT_EQ(losses.size(), std::size_t(16 - stopped));
    for (const auto& [step, loss] : losses) EXPECT_EQ(loss, reference.at(step)) << step;
}
