#include "trident/executor/training_loop.h"

#include "trident/core/atomic_file.h"
#include "trident/core/spec_error.h"
#include "trident/core/step_numbers.h"
#include "trident/executor/checkpoint.h"
#include "trident/executor/trace_gather.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <thread>

namespace trident::executor {

namespace {

// Mean validation loss over eval_iters global batches of the validation stream.
ValidationReport validate(Trainer& trainer, const core::JobSpec& job, const TrainingLoopOptions& o,
                          std::int64_t after_step) {
    double sum = 0.0;
    for (std::int64_t i = 0; i < o.eval_iters; ++i)
        sum += trainer.evaluate(o.validation, i * job.training.global_batch_size);
    return {after_step, sum / double(o.eval_iters)};
}

StepReport report_of(const StepStats& st, const core::JobSpec& job, const TrainingLoopOptions& o,
                     std::int64_t skipped, double devices) {
    StepReport r;
    r.stats = st;
    r.tokens_per_s = st.seconds > 0 ? double(job.training.tokens_per_step()) / st.seconds : 0.0;
    // Model FLOPs per device (Narayanan et al. 2021), as Megatron reports them.
    r.flops_per_device_s = core::flops_per_device_s(o.model_flops_per_step, st.seconds, devices);
    if (o.peak_flops_per_s)
        r.mfu = core::flops_utilization(o.model_flops_per_step, st.seconds, devices,
                                        *o.peak_flops_per_s);
    r.skipped_so_far = skipped;
    return r;
}

void write_trace(const std::vector<core::TraceEvent>& events, const core::JobSpec& job,
                 const std::string& path, int rank) {
    core::Trace trace = gather_trace(events); // collective
    trace.plan = core::to_json(job);
    if (rank != 0) return;
    std::ostringstream text;
    core::write_chrome_trace(trace, text);
    core::write_file_atomically(path, text.str(), "--trace");
}

// Why every rank stops now, or "": a signal any rank received, or the longest elapsed time
// past --exit-duration-in-mins. One reduction, so all ranks agree on the same step.
std::string reason_to_stop(const TrainingLoopOptions& o, ProcessGroups& groups,
                           std::chrono::steady_clock::time_point started) {
    if (!o.exit_signal && o.exit_duration_s <= 0.0) return "";
    const double elapsed_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    float flags[2] = {o.exit_signal && o.exit_signal->received() ? 1.0f : 0.0f, float(elapsed_s)};
    groups.world->all_reduce_max(flags, 2);
    if (flags[0] > 0.0f)
        return "received " + signal_name(o.exit_signal->signal_number()) +
               " (--exit-signal-handler)";
    if (o.exit_duration_s > 0.0 && flags[1] >= o.exit_duration_s) {
        char text[96];
        std::snprintf(text, sizeof text, "%.1f minutes of training (--exit-duration-in-mins)",
                      double(flags[1]) / 60.0);
        return text;
    }
    return "";
}

// The memory model's counterpart: activations and parameters held at once, on the busiest rank.
void reduce_peak_memory(TrainingSummary& summary, ProcessGroups& groups) {
    float peak_bytes[2] = {float(summary.peak_activation_bytes),
                           float(summary.peak_parameter_bytes)};
    groups.world->all_reduce_max(peak_bytes, 2);
    summary.peak_activation_bytes = peak_bytes[0];
    summary.peak_parameter_bytes = peak_bytes[1];
}

// This launch's goodput as it goes, and the run so far in the save folder's ledger (rank 0
// only: a report, so a damaged ledger is a warning, not a stop one rank would take alone).
class GoodputCount {
public:
    template <typename Since>
    GoodputCount(const TrainingLoopOptions& o, int rank, const Since& since)
        : dir_(rank == 0 ? o.save : std::string()),
          launched_(o.launched.value_or(std::chrono::steady_clock::now())) {
        earlier.launches = 0;
        launch.startup_s = since(launched_);
        if (dir_.empty() || o.first_step == 0) return; // a fresh run starts a fresh count
        try {
            earlier = read_goodput_ledger(dir_);
        } catch (const core::SpecError& e) {
            std::fprintf(stderr, "trident: warning: %s; counting goodput from this launch\n",
                         e.what());
        }
    }
    // Rewrites the ledger with the run so far (rank 0, with --save).
    void write() {
        launch.wall_s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - launched_).count();
        if (dir_.empty()) return;
        try {
            write_goodput_ledger(dir_, run_so_far(earlier, launch));
        } catch (const core::SpecError& e) {
            if (!warned_)
                std::fprintf(stderr, "trident: warning: %s; goodput.json not kept\n", e.what());
            warned_ = true;
        }
    }

    RunTime earlier, launch;

private:
    std::string dir_;
    std::chrono::steady_clock::time_point launched_;
    bool warned_ = false;
};

} // namespace

InjectedStall injected_stall(const char* text) {
    InjectedStall stall;
    if (!text || !*text) return stall;
    long long step = 0;
    char end = 0;
    if (std::sscanf(text, "%d:%lld:%lf%c", &stall.rank, &step, &stall.seconds, &end) != 3 ||
        stall.rank < 0 || step < 1 || stall.seconds < 0.0)
        throw core::SpecError("TRIDENT_FAULT_STALL",
                              "'" + std::string(text) +
                                  "' is not RANK:STEP:SECONDS (e.g. 1:2:60: rank 1 sleeps 60 s "
                                  "before step 2)");
    stall.step = step;
    return stall;
}

InjectedCrash injected_crash(const char* text) {
    InjectedCrash crash;
    if (!text || !*text) return crash;
    long long step = 0;
    char end = 0;
    if (std::sscanf(text, "%d:%lld%c", &crash.rank, &step, &end) != 2 || crash.rank < 0 || step < 1)
        throw core::SpecError("TRIDENT_FAULT_CRASH",
                              "'" + std::string(text) +
                                  "' is not RANK:STEP (e.g. 0:5: rank 0 exits after step 5)");
    crash.step = step;
    return crash;
}

double ValidationReport::perplexity() const {
    return std::exp(std::min(loss, 700.0));
}

TrainingSummary run_training_loop(Trainer& trainer, const core::JobSpec& job, ProcessGroups& groups,
                                  const TrainingLoopOptions& o, const TrainingLoopHooks& hooks) {
    const int rank = groups.world_rank;
    const std::int64_t steps = job.training.train_iters;
    const std::int64_t gbs = job.training.global_batch_size;
    const double devices = double(groups.world->size());
    const bool validating = o.eval_interval > 0 && o.validation;
    TrainingSummary summary;
    summary.last_step = o.first_step;
    const auto seconds_since = [](std::chrono::steady_clock::time_point t) {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
    };
    Watchdog& watchdog = *groups.watchdog;
    GoodputCount count(o, rank, seconds_since);
    RunTime& launch = count.launch;
    const auto run_validation = [&](std::int64_t after_step) {
        watchdog.set_phase("validation after step " + std::to_string(after_step));
        const auto begin = std::chrono::steady_clock::now();
        summary.validations.push_back(validate(trainer, job, o, after_step));
        launch.validation_s += seconds_since(begin);
        if (rank == 0 && hooks.on_validation) hooks.on_validation(summary.validations.back());
    };
    const auto save = [&](std::int64_t after_step) {
        watchdog.set_phase("saving the checkpoint of step " + std::to_string(after_step));
        const auto begin = std::chrono::steady_clock::now();
        save_checkpoint(o.save, {after_step, after_step * gbs, o.seed, {}}, trainer, job, groups);
        summary.saves.push_back({after_step, seconds_since(begin)});
        launch.saves_s += summary.saves.back().blocking_s;
        launch.unsaved_steps_s = 0.0;
        count.write();
        if (rank == 0 && hooks.on_save) hooks.on_save(summary.saves.back());
    };
    std::vector<core::TraceEvent> events;
    std::int64_t last_saved = o.first_step, last_validated = -1;
    const auto started = std::chrono::steady_clock::now();
    for (std::int64_t s = o.first_step; s < steps; ++s) {
        summary.last_step = s + 1;
        events.clear();
        watchdog.set_phase("step " + std::to_string(s + 1));
        if (o.stall.rank == rank && o.stall.step == s + 1)
            std::this_thread::sleep_for(std::chrono::duration<double>(o.stall.seconds));
        const bool record = !o.trace.empty() && s == steps - 1;
        const StepStats st = trainer.step(s, record ? &events : nullptr);
        summary.peak_activation_bytes =
            std::max(summary.peak_activation_bytes, st.peak_activation_bytes);
        summary.peak_parameter_bytes =
            std::max(summary.peak_parameter_bytes, st.peak_parameter_bytes);
        summary.steps.push_back(report_of(st, job, o, trainer.skipped_steps(), devices));
        launch.steps_s += st.seconds;
        launch.unsaved_steps_s += st.seconds;
        if (rank == 0 && hooks.on_step) hooks.on_step(summary.steps.back(), steps);
        if (o.ledger_interval > 0 && (s + 1) % o.ledger_interval == 0) count.write();
        if (o.crash.rank == rank && o.crash.step == s + 1) std::_Exit(70);
        if (record) write_trace(events, job, o.trace, rank);
        if (validating && (s + 1) % o.eval_interval == 0) {
            run_validation(s + 1);
            last_validated = s + 1;
        }
        if (o.save_interval > 0 && (s + 1) % o.save_interval == 0) {
            save(s + 1);
            last_saved = s + 1;
        }
        if (o.exit_interval > 0 && (s + 1) % o.exit_interval == 0) break;
        if ((summary.stopped_early = reason_to_stop(o, groups, started)) != "") break;
    }
    if (validating && last_validated != summary.last_step) run_validation(summary.last_step);
    if (!o.save.empty() && last_saved != summary.last_step) save(summary.last_step);
    watchdog.set_phase("after training");
    count.write();
    summary.launch = launch;
    summary.so_far = run_so_far(count.earlier, launch);
    reduce_peak_memory(summary, groups);
    if (rank == 0 && !o.metrics_json.empty())
        core::write_file_atomically(o.metrics_json, metrics_json(job, summary).dump(2) + "\n",
                                    "--metrics-json");
    return summary;
}

core::Json goodput_json(const TrainingSummary& summary) {
    core::Json saves = core::Json::array();
    for (const SaveTime& t : summary.saves)
        saves.push_back({{"after_step", t.after_step}, {"blocking_s", t.blocking_s}});
    core::Json j = to_json(summary.launch);
    j["saves"] = std::move(saves);
    j["run_so_far"] = to_json(summary.so_far);
    return j;
}

core::Json metrics_json(const core::JobSpec& job, const TrainingSummary& summary) {
    core::Json steps = core::Json::array();
    for (const StepReport& r : summary.steps) {
        core::Json j = {{"step", r.stats.step + 1},
                        {"loss", r.stats.loss},
                        {"lr", r.stats.lr},
                        {"grad_norm", r.stats.grad_norm},
                        {"seconds", r.stats.seconds},
                        {"tokens_per_s", r.tokens_per_s},
                        {"model_flops_per_device_s", r.flops_per_device_s},
                        {"skipped", r.stats.skipped},
                        {"peak_activation_bytes_rank0", r.stats.peak_activation_bytes}};
        if (r.mfu) j["mfu"] = *r.mfu;
        if (!r.stats.mtp_losses.empty()) j["mtp_losses"] = r.stats.mtp_losses;
        steps.push_back(std::move(j));
    }
    core::Json validations = core::Json::array();
    for (const ValidationReport& v : summary.validations)
        validations.push_back(
            {{"after_step", v.after_step}, {"loss", v.loss}, {"perplexity", v.perplexity()}});
    return {{"format", "trident.metrics/1"},
            {"job", core::to_json(job)},
            {"last_step", summary.last_step},
            {"peak_activation_bytes_largest_rank", summary.peak_activation_bytes},
            {"peak_parameter_bytes_largest_rank", summary.peak_parameter_bytes},
            {"skipped_steps", summary.steps.empty() ? 0 : summary.steps.back().skipped_so_far},
            {"steps", std::move(steps)},
            {"validation", std::move(validations)},
            {"goodput", goodput_json(summary)}};
}

} // namespace trident::executor
