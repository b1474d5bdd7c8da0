#include "trident/core/step_numbers.h"

#include "trident/core/dtype.h"

#include <algorithm>

namespace trident::core {

std::int64_t ddp_bucket_elements(std::int64_t data_context_ranks) {
    return std::max<std::int64_t>(40'000'000, 1'000'000 * data_context_ranks);
}

double optimizer_state_bytes_per_parameter(const Precision& precision) {
    return (precision.master_weights ? 4.0 : 0.0) +
           2.0 * double(dtype_bytes(precision.optimizer_state));
}

double state_bytes_per_parameter(const Precision& precision, std::int64_t optimizer_shards,
                                 bool master_sharded) {
    const double shards = double(std::max<std::int64_t>(1, optimizer_shards));
    const double master = precision.master_weights ? 4.0 : 0.0;
    const double optimizer = optimizer_state_bytes_per_parameter(precision);
    // The master copy sharded like the moments, or held whole beside them.
    const double held =
        master_sharded ? optimizer / shards : master + (optimizer - master) / shards;
    return double(dtype_bytes(precision.params)) + double(dtype_bytes(precision.grads)) + held;
}

Precision cpu_executor_precision() {
    return {Dtype::fp32, Dtype::fp32, Dtype::fp32, false};
}

double flops_utilization(double flops, double step_s, double devices, double peak_flops_per_s) {
    return step_s > 0.0 ? flops / (step_s * devices * peak_flops_per_s) : 0.0;
}

double flops_per_device_s(double flops, double step_s, double devices) {
    return step_s > 0.0 ? flops / step_s / devices : 0.0;
}

double bubble_fraction(double idle_s, double step_s) {
    return step_s > 0.0 ? idle_s / step_s : 0.0;
}

double idle_seconds(double step_s, double busy_s) {
    return std::max(0.0, step_s - busy_s);
}

double median(std::vector<double> values) {
    if (values.empty()) return 0.0;
    std::sort(values.begin(), values.end());
    const std::size_t n = values.size();
    return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

} // namespace trident::core
