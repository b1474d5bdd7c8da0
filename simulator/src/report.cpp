#include "trident/simulator/report.h"

#include "trident/core/units.h"
#include "trident/simulator/device_memory.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <ostream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace trident::simulator {
namespace {

std::string fmt(const char* format, double v) {
    char buffer[64];
    std::snprintf(buffer, sizeof buffer, format, v);
    return buffer;
}

std::string upper(std::string s) {
    for (char& c : s) c = char(std::toupper(static_cast<unsigned char>(c)));
    return s;
}

// `text` right-aligned (width > 0) or left-aligned (width < 0) in |width| columns.
std::string pad(const std::string& text, int width) {
    const std::size_t n = std::size_t(std::abs(width));
    if (text.size() >= n) return text;
    const std::string fill(n - text.size(), ' ');
    return width > 0 ? fill + text : text + fill;
}

// ZeRO-2/3 per stage: what the data-parallel stream carried for the FSDP units, how much of it
// the passes' compute hid, and the gathered units' memory (within the buffers column).
void print_sharding(const Report& r, const core::Unit& unit, std::ostream& out) {
    out << core::describe_sharding(r.job.plan) << ", prefetch "
        << r.job.plan.sharding.prefetch_units << " unit"
        << (r.job.plan.sharding.prefetch_units == 1 ? "" : "s") << ":\n"
        << "stage  gather/scatter s  hidden s  exposed s  gathered " << unit.name
        << " (in buffers)  compute lost to overlapped SMs s\n";
    for (const StageReport& s : r.stages)
        out << fmt("%5.0f", double(s.stage)) << fmt("%17.3f", s.sharding_stream_s)
            << fmt("%10.3f", std::max(0.0, s.sharding_stream_s - s.sharding_s))
            << fmt("%11.3f", s.sharding_s) << fmt("%13.1f", s.memory.gathered_bytes / unit.scale)
            << fmt("%34.3f", s.contention_s) << "\n";
}

// Passes whose kernels are too small for the host to keep the GPU fed: shown once the wait
// reaches 1 % of the step on some stage.
void print_host_bound(const Report& r, std::ostream& out) {
    const bool shown = std::any_of(r.stages.begin(), r.stages.end(), [&](const StageReport& s) {
        return s.host_s >= 0.01 * r.step_time_s;
    });
    if (!shown) return;
    out << "host-bound passes: the GPU waits for the host to issue kernels (device.host_op_issue_s"
        << fmt(" = %.1f µs", r.host_op_issue_s * 1e6) << " per operation):\n"
        << "stage  kernels  host issue s  GPU waited s  of the step\n";
    for (const StageReport& s : r.stages)
        out << fmt("%5.0f", double(s.stage)) << fmt("%9.0f", s.kernels)
            << fmt("%14.3f", s.kernels * r.host_op_issue_s) << fmt("%14.3f", s.host_s)
            << fmt("%11.1f%%", 100 * s.host_s / r.step_time_s) << "\n";
}

// MoE layouts: the token exchange per stage (what the dispatcher and the load cost).
void print_moe(const Report& r, std::ostream& out) {
    const auto& moe = r.job.model.moe;
    if (!moe || r.job.plan.expert_tp() * r.job.plan.ep == 1) return;
    const bool overlapped =
        r.job.plan.overlap_moe_expert_parallel_comm || r.job.plan.moe_shared_expert_overlap;
    out << "MoE token exchange (" << core::kTokenDispatcherNames[int(r.job.plan.token_dispatcher)]
        << " dispatcher; busiest expert-parallel rank at "
        << fmt("%.2f", moe->expert_load(r.job.plan.ep)) << "x the mean tokens):\n"
        << "stage  exchange s  of the step"
        << (overlapped ? "    hidden s  exposed of the step" : "") << "\n";
    for (const StageReport& s : r.stages) {
        out << fmt("%5.0f", double(s.stage)) << fmt("%12.3f", s.moe_exchange_s)
            << fmt("%12.1f%%", 100 * s.moe_exchange_s / r.step_time_s);
        // Merged forward-backward pairs (--overlap-moe-expert-parallel-comm) or the shared
        // experts (--moe-shared-expert-overlap) hide a part.
        if (overlapped)
            out << fmt("%12.3f", s.moe_hidden_s)
                << fmt("%20.1f%%", 100 * (s.moe_exchange_s - s.moe_hidden_s) / r.step_time_s);
        out << "\n";
    }
}

// One row per stage (time and memory), or in a summary one per run of neighbouring stages with
// the same times, showing the memory of the run's busiest stage.
// The busiest stage's memory as Megatron reports it and as the device must hold it.
void print_memory_line(const Report& r, const core::Unit& unit, std::ostream& out) {
    if (r.stages.empty()) return;
    std::size_t busiest = 0;
    for (std::size_t s = 0; s < r.stages.size(); ++s)
        if (r.stages[s].memory.total_bytes() > r.stages[busiest].memory.total_bytes()) busiest = s;
    const StageMemory& m = r.stages[busiest].memory;
    const auto in = [&](double bytes) { return fmt("%.1f", bytes / unit.scale); };
    out << "memory of stage " << r.stages[busiest].stage << ": " << in(m.allocated_bytes()) << " "
        << unit.name << " allocated";
    if (m.allocator_reserve_bytes <= 0 && m.runtime_bytes <= 0) { // a CPU device: nothing more
        out << "\n";
        return;
    }
    out << " (Megatron's max allocated), " << in(m.reserved_bytes())
        << " reserved (an allocator allowance of "
        << fmt("%.0f %%", 100 * m.allocator_reserve_bytes / std::max(1.0, m.allocated_bytes()))
        << "), " << in(m.total_bytes()) << " on the device";
    const RuntimeMemory runtime = runtime_memory(r.job, r.stages[busiest].stage);
    if (runtime.total() > 0)
        out << " (CUDA context " << in(runtime.cuda_context_bytes) << ", NCCL "
            << in(runtime.nccl_bytes)
            << (runtime.deepep_bytes > 0 ? ", DeepEP " + in(runtime.deepep_bytes) : "") << ")";
    out << "\n";
}

void print_stage_table(const Report& r, const core::Unit& unit, StageRows stage_rows,
                       std::ostream& out) {
    const auto in = [&](double bytes) { return fmt("%.1f", bytes / unit.scale); };
    std::vector<std::string> times, memories; // each stage's row without its number, in two
    for (const StageReport& s : r.stages) {
        const StageMemory& m = s.memory;
        std::ostringstream time, memory;
        time << fmt("%7.0f", double(s.layers)) << fmt("%9.3f", s.compute_s)
             << fmt("%11.3f", s.recompute_s) << fmt("%10.3f", s.collective_s)
             << fmt("%8.3f", s.data_parallel_s) << fmt("%11.3f", s.optimizer_s)
             << fmt("%9.3f", s.bubble_s) << fmt("%8.1f%%", 100 * s.bubble_fraction(r.step_time_s));
        const std::string parts = "(" + in(m.weights_bytes) + " " + in(m.gradients_bytes) + " " +
                                  in(m.optimizer_bytes) + " " +
                                  in(m.activations_bytes + m.backward_working_bytes) + " " +
                                  in(m.buffers_bytes + m.gathered_bytes) + " " +
                                  in(m.allocator_reserve_bytes) + " " + in(m.runtime_bytes) + ")";
        memory << pad(in(m.total_bytes()), 9) << " " << pad(parts, -54)
               << fmt("%10.0f%%", 100 * m.total_bytes() / r.memory_capacity_bytes)
               << (m.total_bytes() > r.memory_capacity_bytes ? "  OUT OF MEMORY" : "");
        times.push_back(time.str());
        memories.push_back(memory.str());
    }
    struct Shown {
        std::string label;
        std::size_t time_row, memory_row;
    };
    std::vector<Shown> shown;
    for (std::size_t i = 0; i < times.size();) {
        std::size_t j = i + 1, busiest = i;
        if (stage_rows == StageRows::summary)
            for (; j < times.size() && times[j] == times[i]; ++j)
                if (r.stages[j].memory.total_bytes() > r.stages[busiest].memory.total_bytes())
                    busiest = j;
        const std::string first = std::to_string(r.stages[i].stage);
        shown.push_back(
            {j - i > 1 ? first + "-" + std::to_string(r.stages[j - 1].stage) : first, i, busiest});
        i = j;
    }
    int width = 5;
    for (const Shown& row : shown) width = std::max(width, int(row.label.size()));
    out << pad("stage", -width)
        << " layers  compute  recompute  tp/cp/ep  dp+emb  optimizer   bubble  bubble%   "
        << pad("memory " + std::string(unit.name) +
                   " (weights grads optim activ buffers reserve runtime)",
               -64)
        << "of capacity\n";
    for (const Shown& row : shown)
        out << pad(row.label, width) << times[row.time_row] << memories[row.memory_row] << "\n";
    if (shown.size() < times.size())
        out << "(" << times.size() << " stages in " << shown.size()
            << " rows: a range is neighbouring stages with the same times, its memory the "
               "busiest one's; --stages all lists each)\n";
    print_memory_line(r, unit, out);
}

} // namespace

void print_report(const Report& r, std::ostream& out, StageRows stage_rows) {
    const core::JobSpec& j = r.job;
    const core::ParallelPlan& p = j.plan;
    out << j.model.name << " on " << j.cluster.devices() << " × " << r.profile_name << " ("
        << j.cluster.nodes << (j.cluster.nodes == 1 ? " node" : " nodes") << "): tp " << p.tp
        << " · cp " << p.cp << " · dp " << p.dp << " · pp " << p.pp
        << (p.ep > 1 ? " · ep " + std::to_string(p.ep) : "")
        << (p.etp ? " · etp " + std::to_string(*p.etp) : "") << ", " << core::to_string(p.schedule)
        << (p.vpp > 1 ? " v=" + std::to_string(p.vpp) : "") << ", micro-batch "
        << p.micro_batch_size << " × " << r.microbatches << ", recompute "
        << core::to_string(p.recompute.granularity) << "\n";
    if (const core::PipelineSplit split = j.pipeline_split(); !split.even())
        out << "uneven stages: layers per virtual stage " << core::layout_text(split) << "\n";
    // Every utilisation names the peak it is of: an FP8 layout quoted against the BF16 peak
    // alone reads twice as good as it is.
    const std::string peak_name = upper(core::to_string(j.model.precision.params));
    out << "step time " << fmt("%.3f s", r.step_time_s) << "   tokens/s "
        << fmt("%.0f", r.tokens_per_s) << "   per device "
        << core::flop_rate_text(r.tflops_per_device * 1e12) << "   MFU "
        << fmt("%.1f %%", 100 * r.mfu) << " of " << peak_name << " peak"
        << (p.fp8.enabled()
                ? ", " + fmt("%.1f %%", 100 * r.mfu_fp8_peak) + " of " +
                      upper(core::to_string(core::quantized_dtype(p.fp8.recipe))) + " peak"
                : "")
        << "   HFU " << fmt("%.1f %%", 100 * r.hfu) << "   (" << peak_name << " peak "
        << core::flop_rate_text(r.peak_flops_per_s) << ")\n";
    out << "\n";
    // One memory unit for the whole table, the one that fits its largest stage.
    double largest = 0.0;
    for (const StageReport& s : r.stages) largest = std::max(largest, s.memory.total_bytes());
    const core::Unit unit = core::byte_unit(largest);
    print_stage_table(r, unit, stage_rows, out);
    out << "(seconds per step on one rank of each stage; bubble = idle waiting for the pipeline "
           "and point-to-point data)\n";
    if (p.fp8.enabled()) {
        out << "stage  GEMM s  of which FP8  other GEMMs  FP8 casts (within compute + recompute)\n";
        for (const StageReport& s : r.stages)
            out << fmt("%5.0f", double(s.stage)) << fmt("%8.3f", s.gemm_s)
                << fmt("%13.3f", s.fp8_gemm_s) << fmt("%13.3f", s.gemm_s - s.fp8_gemm_s)
                << fmt("%11.3f", s.fp8_cast_s) << "\n";
    }
    if (p.zero_stage() >= 2) print_sharding(r, unit, out);
    if (p.tp_comm_overlap) {
        out << "tensor-parallel communication overlap (--tp-comm-overlap):\n"
            << "stage  tp comm s  hidden s  exposed s  compute lost to overlapped SMs s (all "
               "overlaps)\n";
        for (const StageReport& s : r.stages)
            out << fmt("%5.0f", double(s.stage)) << fmt("%11.3f", s.tp_collective_s)
                << fmt("%10.3f", s.tp_hidden_s) << fmt("%11.3f", s.tp_collective_s - s.tp_hidden_s)
                << fmt("%18.3f", s.contention_s) << "\n";
    }
    print_host_bound(r, out);
    print_moe(r, out);
    out << "profile " << r.profile_name << " (" << r.profile_kind << ")";
    if (r.fallbacks.empty()) {
        out << "; every lookup inside the tables\n";
    } else {
        out << "; fallbacks outside the tables:\n";
        for (const auto& [what, count] : r.fallbacks)
            out << "  " << what << " (" << count << "×)\n";
    }
}

core::Json report_json(const Report& r) {
    core::Json j;
    j["format"] = "trident.report/1";
    j["job"] = core::to_json(r.job);
    j["profile"] = {{"name", r.profile_name}, {"kind", r.profile_kind}};
    j["step_time_s"] = r.step_time_s;
    j["tokens_per_s"] = r.tokens_per_s;
    j["model_flops"] = r.model_flops;
    j["hardware_flops"] = r.hardware_flops;
    j["tflops_per_device"] = r.tflops_per_device;
    j["mfu"] = r.mfu;
    if (r.job.plan.fp8.enabled())
        j["mfu_" + core::to_string(core::quantized_dtype(r.job.plan.fp8.recipe)) + "_peak"] =
            r.mfu_fp8_peak;
    j["hfu"] = r.hfu;
    j["microbatches"] = r.microbatches;
    j["host_op_issue_s"] = r.host_op_issue_s;
    j["memory_capacity_bytes"] = r.memory_capacity_bytes;
    core::Json stages = core::Json::array();
    for (const StageReport& s : r.stages) {
        const StageMemory& m = s.memory;
        stages.push_back({{"stage", s.stage},
                          {"representative_rank", s.representative_rank},
                          {"layers", s.layers},
                          {"compute_s", s.compute_s},
                          {"recompute_s", s.recompute_s},
                          {"collective_s", s.collective_s},
                          {"data_parallel_s", s.data_parallel_s},
                          {"optimizer_s", s.optimizer_s},
                          {"bubble_s", s.bubble_s},
                          {"bubble_fraction", s.bubble_fraction(r.step_time_s)},
                          {"gemm_s", s.gemm_s},
                          {"fp8_gemm_s", s.fp8_gemm_s},
                          {"fp8_cast_s", s.fp8_cast_s},
                          {"sharding_s", s.sharding_s},
                          {"sharding_stream_s", s.sharding_stream_s},
                          {"tp_collective_s", s.tp_collective_s},
                          {"tp_hidden_s", s.tp_hidden_s},
                          {"contention_s", s.contention_s},
                          {"kernels", s.kernels},
                          {"host_s", s.host_s},
                          {"moe_exchange_s", s.moe_exchange_s},
                          {"moe_hidden_s", s.moe_hidden_s},
                          {"memory",
                           {{"weights_bytes", m.weights_bytes},
                            {"gradients_bytes", m.gradients_bytes},
                            {"optimizer_bytes", m.optimizer_bytes},
                            {"activations_bytes", m.activations_bytes},
                            {"backward_working_bytes", m.backward_working_bytes},
                            {"buffers_bytes", m.buffers_bytes},
                            {"gathered_bytes", m.gathered_bytes},
                            {"allocator_reserve_bytes", m.allocator_reserve_bytes},
                            {"runtime_bytes", m.runtime_bytes},
                            {"allocated_bytes", m.allocated_bytes()},
                            {"reserved_bytes", m.reserved_bytes()},
                            {"total_bytes", m.total_bytes()},
                            {"in_flight_microbatches", m.in_flight}}}});
    }
    j["stages"] = stages;
    core::Json fallbacks = core::Json::object();
    for (const auto& [what, count] : r.fallbacks) fallbacks[what] = count;
    j["fallbacks"] = fallbacks;
    return j;
}

} // namespace trident::simulator
