#include "trident/executor/communicator.h"

namespace trident::executor {

namespace {

// What a communicator without non-blocking collectives returns: the work is done already.
class CompletedCollective final : public PendingCollective {
public:
    void wait() override {}
};

} // namespace

std::unique_ptr<PendingCollective> Communicator::start_all_gather(const float* in, float* out,
                                                                  std::size_t n_per_rank) {
    all_gather(in, out, n_per_rank);
    return std::make_unique<CompletedCollective>();
}

} // namespace trident::executor
