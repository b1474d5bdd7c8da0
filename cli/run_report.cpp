#include "run_report.h"

#include "format.h"
#include "trident/core/step_numbers.h"
#include "trident/core/units.h"
#include "trident/executor/checkpoint.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace trident::cli {
namespace {

// The steps since the last printed line.
struct Interval {
    std::int64_t steps = 0, skipped = 0;
    double loss_sum = 0.0, seconds = 0.0, tokens = 0.0, flops = 0.0;
    std::vector<double> mtp_loss_sums; // per multi-token-prediction module
};

// " | mtp_1 loss 5.61 | mtp_2 loss 5.63": each MTP module's loss (as Megatron logs them), the
// step's or the interval's mean.
std::string mtp_losses_text(const Interval& in) {
    std::string out;
    for (std::size_t d = 0; d < in.mtp_loss_sums.size(); ++d) {
        char text[64];
        std::snprintf(text, sizeof text, " | mtp_%zu loss %.9g", d + 1,
                      in.mtp_loss_sums[d] / double(in.steps));
        out += text;
    }
    return out;
}

void print_interval(const executor::StepReport& last, const Interval& in, std::int64_t total) {
    const executor::StepStats& st = last.stats;
    const double n = double(in.steps);
    const double tokens_per_s = in.seconds > 0 ? in.tokens / in.seconds : 0.0;
    const double flops_per_s = in.seconds > 0 ? in.flops / in.seconds : 0.0;
    char mfu[32] = "";
    if (last.mfu && last.flops_per_device_s > 0)
        std::snprintf(mfu, sizeof mfu, " | MFU %.1f %%",
                      100 * *last.mfu * flops_per_s / last.flops_per_device_s);
    // "skipped (…)" for a one-step line, "skipped 2 of these steps (…)" for an interval.
    const std::string skipped =
        in.skipped == 0
            ? ""
            : " | skipped " +
                  (in.steps == 1 ? std::string()
                                 : count_of(in.skipped, "of these steps", "of these steps") + " ") +
                  "(non-finite gradients; " + std::to_string(last.skipped_so_far) + " so far)";
    // One step: its own loss, exactly (%.9g reads back as the float). More: their mean.
    std::printf("step %lld/%lld | loss %.9g%s%s | lr %.3e | grad norm %.4f | %.3f s%s | "
                "%.0f tokens/s | %s%s%s\n",
                (long long)(st.step + 1), (long long)total,
                in.steps == 1 ? st.loss : in.loss_sum / n,
                in.steps == 1 ? "" : (" (mean of " + std::to_string(in.steps) + ")").c_str(),
                mtp_losses_text(in).c_str(), st.lr, st.grad_norm, in.seconds / n,
                in.steps == 1 ? "" : " per step", tokens_per_s,
                core::flop_rate_text(flops_per_s, 2).c_str(), mfu, skipped.c_str());
    std::fflush(stdout);
}

// 0.00226 s, 14.3 s: three significant digits, since a CPU test's steps take milliseconds.
std::string seconds_text(double s) {
    char text[32];
    std::snprintf(text, sizeof text, "%.3g s", s);
    return text;
}

// "goodput 91.2 % of 14.3 s: steps 13 s, …" for this launch, and over every launch that
// saved into the same folder when there were several.
void print_goodput(const executor::TrainingSummary& summary) {
    const executor::RunTime& t = summary.launch;
    const double other =
        std::max(0.0, t.wall_s - t.steps_s - t.saves_s - t.validation_s - t.startup_s);
    std::printf("goodput %.1f %% of %s: steps %s, saves %s (%s), validation %s (%s), start-up "
                "and checkpoint load %s, other %s\n",
                100 * t.goodput(), seconds_text(t.wall_s).c_str(), seconds_text(t.steps_s).c_str(),
                seconds_text(t.saves_s).c_str(),
                count_of(std::int64_t(summary.saves.size()), "save", "saves").c_str(),
                seconds_text(t.validation_s).c_str(),
                count_of(std::int64_t(summary.validations.size()), "pass", "passes").c_str(),
                seconds_text(t.startup_s).c_str(), seconds_text(other).c_str());
    const executor::RunTime& all = summary.so_far;
    if (all.launches > 1)
        std::printf("run so far, %lld launches: goodput %.1f %% of %s (steps %s, %s of them "
                    "redone after restarts; start-ups and loads %s; saves %s; validation %s; "
                    "the time between launches is not seen)\n",
                    (long long)all.launches, 100 * all.goodput(), seconds_text(all.wall_s).c_str(),
                    seconds_text(all.steps_s).c_str(), seconds_text(all.lost_s).c_str(),
                    seconds_text(all.startup_s).c_str(), seconds_text(all.saves_s).c_str(),
                    seconds_text(all.validation_s).c_str());
}

} // namespace

executor::TrainingLoopHooks report_hooks(ProgressBar& bar, const std::string& save_dir,
                                         std::int64_t log_interval) {
    executor::TrainingLoopHooks hooks;
    auto interval = std::make_shared<Interval>();
    hooks.on_step = [&bar, interval, log_interval](const executor::StepReport& r,
                                                   std::int64_t steps) {
        const executor::StepStats& st = r.stats;
        Interval& in = *interval;
        ++in.steps;
        in.skipped += st.skipped ? 1 : 0;
        in.loss_sum += st.loss;
        in.mtp_loss_sums.resize(st.mtp_losses.size(), 0.0);
        for (std::size_t d = 0; d < st.mtp_losses.size(); ++d)
            in.mtp_loss_sums[d] += st.mtp_losses[d];
        in.seconds += st.seconds;
        in.tokens += r.tokens_per_s * st.seconds;
        in.flops += r.flops_per_device_s * st.seconds;
        if ((st.step + 1) % log_interval == 0 || st.step + 1 == steps) {
            bar.finish();
            print_interval(r, in, steps);
            in = Interval{};
        }
        char detail[64];
        std::snprintf(detail, sizeof detail, "loss %.4f", st.loss);
        bar.update(double(st.step + 1), detail);
    };
    hooks.on_validation = [&bar](const executor::ValidationReport& v) {
        bar.finish();
        std::printf("validation after step %lld | loss %.9g | perplexity %.4g\n",
                    (long long)v.after_step, v.loss, v.perplexity());
        std::fflush(stdout);
    };
    hooks.on_save = [&bar, save_dir](const executor::SaveTime& t) {
        bar.finish();
        std::printf("saved %s/%s (training blocked %.3f s)\n", save_dir.c_str(),
                    executor::checkpoint_name(t.after_step).c_str(), t.blocking_s);
        std::fflush(stdout);
    };
    return hooks;
}

void print_run_summary(const executor::TrainingSummary& summary, const core::JobSpec& job) {
    if (summary.steps.empty()) return;
    std::vector<double> seconds;
    double total_s = 0.0, flops = 0.0;
    for (const auto& r : summary.steps) {
        seconds.push_back(r.stats.seconds);
        total_s += r.stats.seconds;
        flops += r.flops_per_device_s * r.stats.seconds;
    }
    const std::size_t n = seconds.size();
    const double median = core::median(seconds);
    const double tokens = double(n) * double(job.training.tokens_per_step());
    std::string mfu;
    if (summary.steps.back().mfu && summary.steps.back().flops_per_device_s > 0) {
        const double peak = summary.steps.back().flops_per_device_s / *summary.steps.back().mfu;
        char text[32];
        std::snprintf(text, sizeof text, ", MFU %.1f %%", 100.0 * flops / total_s / peak);
        mfu = text;
    }
    std::printf("summary: %s (%lld to %lld), %s tokens, step time mean %.3f s, median %.3f s, "
                "%.0f tokens/s%s\n",
                count_of(std::int64_t(n), "step", "steps").c_str(),
                (long long)summary.steps.front().stats.step + 1,
                (long long)summary.steps.back().stats.step + 1,
                with_commas(std::int64_t(tokens)).c_str(), total_s / double(n), median,
                tokens / total_s, mfu.c_str());
    print_goodput(summary);
}

} // namespace trident::cli
