#include "trident/simulator/goodput.h"

#include "trident/core/parameter_count.h"
#include "trident/core/spec_error.h"
#include "trident/core/step_numbers.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace trident::simulator {

CheckpointCost checkpoint_cost(const core::JobSpec& job, const core::ClusterReliability& r) {
    const core::ParameterCounts counts = core::count_parameters(job.model);
    const core::Precision& precision = job.model.precision;
    const double parameters = double(counts.total() + counts.mtp);
    CheckpointCost c;
    c.bytes = parameters * (double(core::dtype_bytes(precision.params)) +
                            core::optimizer_state_bytes_per_parameter(precision));
    // Megatron's fully parallel save spreads the shards over every rank, so every node's link
    // carries its share at once; the file system's sustained rate caps the sum.
    const double nodes = double(job.cluster.nodes);
    const auto rate = [&](double file_system) {
        return r.node_storage_bytes_per_s > 0
                   ? std::min(file_system, nodes * r.node_storage_bytes_per_s)
                   : file_system;
    };
    c.write_s = c.bytes / rate(r.storage_write_bytes_per_s);
    c.read_s = c.bytes / rate(r.storage_read_bytes_per_s);
    if (r.host_copy_bytes_per_s > 0)
        c.stage_s = c.bytes / double(job.cluster.devices()) / r.host_copy_bytes_per_s;
    return c;
}

double expected_wall_s(double work_s, double interval_s, double save_s, double restart_s,
                       double mtbf_s) {
    // Daly (2006): each interval of work plus its save is retried until it runs failure-free,
    // each failure costing the restart (which may fail too): M·e^(R/M)·(e^((τ+δ)/M) − 1) per
    // interval. It tends to τ + δ as M grows.
    const double per_interval =
        mtbf_s * std::exp(restart_s / mtbf_s) * std::expm1((interval_s + save_s) / mtbf_s);
    return per_interval * work_s / interval_s;
}

Goodput goodput(const core::JobSpec& job, const core::ClusterReliability& r, double step_time_s,
                const GoodputOptions& options) {
    if (!(step_time_s > 0)) throw std::invalid_argument("goodput: step time must be above 0");
    Goodput g;
    g.checkpoint = checkpoint_cost(job, r);
    const double per_hour = r.failures_per_gpu_hour * double(job.cluster.devices()) +
                            r.failures_per_node_hour * double(job.cluster.nodes);
    g.mtbf_s = 3600.0 / per_hour;
    if (options.async_save && r.host_copy_bytes_per_s <= 0)
        throw core::SpecError("--async-save",
                              "cluster " + job.cluster.name +
                                  " gives no reliability.host_copy_gb_per_s (the device-to-host "
                                  "rate an asynchronous save stages at)");
    g.save_s = options.async_save ? g.checkpoint.stage_s : g.checkpoint.write_s;
    g.relaunch_counted = r.relaunch_s.has_value();
    g.restart_s = r.relaunch_s.value_or(0.0) + g.checkpoint.read_s;
    // Young (1974): the interval that balances time lost saving against work lost to failures,
    // to first order in save_s / mtbf_s.
    g.young_interval_s = std::sqrt(2.0 * g.save_s * g.mtbf_s);
    std::int64_t steps = options.save_interval_steps.value_or(
        std::max<std::int64_t>(1, std::llround(g.young_interval_s / step_time_s)));
    // An asynchronous save writes in the background, and the next save waits for that write:
    // Young's interval is kept at least as long, and an asked-for shorter one blocks the rest.
    if (options.async_save && !options.save_interval_steps)
        steps = std::max(steps, std::int64_t(std::ceil(g.checkpoint.write_s / step_time_s)));
    if (options.run_steps > 0) steps = std::min(steps, options.run_steps);
    g.interval_steps = steps;
    g.interval_s = double(steps) * step_time_s;
    if (options.async_save) g.save_s += std::max(0.0, g.checkpoint.write_s - g.interval_s);
    const double wall =
        expected_wall_s(g.interval_s, g.interval_s, g.save_s, g.restart_s, g.mtbf_s);
    g.fraction = std::isfinite(wall) && wall > 0 ? g.interval_s / wall : 0.0;
    return g;
}

} // namespace trident::simulator
