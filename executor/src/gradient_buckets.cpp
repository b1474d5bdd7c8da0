#include "trident/executor/gradient_buckets.h"

#include "trident/core/internal_error.h"

#include <stdexcept>
#include <string>

namespace trident::executor {

GradientBuckets::GradientBuckets(const ParameterStore& store, std::int64_t bucket_elements,
                                 std::function<bool(const ParameterStore::Tensor&)> include)
    : bucket_of_(store.tensors.size(), -1), marked_(store.tensors.size(), 0) {
    if (bucket_elements <= 0)
        throw std::invalid_argument("GradientBuckets: bucket_elements must be positive");
    bool open = false;
    // Backwards through the buffer: the last layers' gradients are final first.
    for (std::size_t i = store.tensors.size(); i-- > 0;) {
        const ParameterStore::Tensor& t = store.tensors[i];
        if (include && !include(t)) {
            open = false; // an excluded tensor splits the contiguous run
            continue;
        }
        if (open && buckets_.back().begin != t.offset + t.size) open = false; // a gap
        if (!open) {
            buckets_.push_back({t.offset + t.size, t.offset + t.size, 0});
            open = true;
        }
        Bucket& b = buckets_.back();
        b.begin = t.offset;
        ++b.tensors;
        bucket_of_[i] = std::int32_t(buckets_.size() - 1);
        if (b.end - b.begin >= bucket_elements) open = false;
    }
    reset();
}

void GradientBuckets::reset() {
    waiting_.resize(buckets_.size());
    for (std::size_t b = 0; b < buckets_.size(); ++b) waiting_[b] = buckets_[b].tensors;
    std::fill(marked_.begin(), marked_.end(), 0);
}

std::int32_t GradientBuckets::mark_final(std::size_t tensor_index) {
    if (tensor_index >= bucket_of_.size() || bucket_of_[tensor_index] < 0)
        throw core::InternalError("GradientBuckets: tensor " + std::to_string(tensor_index) +
                                  " is not in a bucket");
    if (marked_[tensor_index])
        throw core::InternalError("GradientBuckets: tensor " + std::to_string(tensor_index) +
                                  " marked final twice in one step");
    marked_[tensor_index] = 1;
    const std::int32_t b = bucket_of_[tensor_index];
    return --waiting_[std::size_t(b)] == 0 ? b : -1;
}

std::vector<std::int32_t> GradientBuckets::incomplete() const {
    std::vector<std::int32_t> out;
    for (std::size_t b = 0; b < waiting_.size(); ++b)
        if (waiting_[b] > 0) out.push_back(std::int32_t(b));
    return out;
}

} // namespace trident::executor
