// The kernels' own worker threads, the only ones that run kernel work. Non-GEMM kernels (norms,
// activations, the attention core's small per-tile GEMMs, the cross-entropy, AdamW) once ran on
// one core while the BLAS worker spun idle — a quarter of a GPT-2 step at sequence 1024 on 2
// cores — and OpenBLAS's own threads, left spinning after each GEMM, then took CPU from them;
// now OpenBLAS runs single-threaded and the GEMMs are cut into blocks here too (matmul.cpp).
// parallel_for splits work into fixed contiguous blocks over `threads` (set_blas_threads), the
// caller taking the first block.
// Blocks depend only on n, the grain and the thread count, and callers give each block
// disjoint outputs, so results are identical to the one-thread loop.
#include "trident/kernels/cpu.h"

#include <algorithm>
#include <atomic>
#include <cblas.h>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace trident::kernels::cpu {
namespace {

class WorkerPool {
public:
    ~WorkerPool() { resize(1); }

    int threads() const { return int(workers_.size()) + 1; }

    void resize(int threads) {
        stop_workers();
        // A new worker waits for the next run, not for one it was not there for.
        const std::uint64_t now = generation_;
        for (int w = 1; w < threads; ++w) workers_.emplace_back([this, w, now] { work(w, now); });
    }

    void run(std::int64_t n, std::int64_t grain, const BlockBody& body) {
        const std::int64_t units = (n + grain - 1) / grain;
        const int blocks = int(std::min<std::int64_t>(threads(), units));
        // One region at a time: a call from inside a block (or from a second thread while a
        // region runs) runs its range on the calling thread, with the same results.
        bool idle = false;
        if (blocks <= 1 || !busy_.compare_exchange_strong(idle, true)) {
            if (n > 0) body(0, n);
            return;
        }
        {
            std::lock_guard lock(mutex_);
            body_ = &body;
            n_ = n;
            grain_ = grain;
            units_ = units;
            blocks_ = blocks;
            pending_ = blocks - 1;
            ++generation_;
        }
        wake_.notify_all();
        // The workers still read `body`: wait for them even when the caller's block throws.
        std::exception_ptr failure;
        try {
            body(0, block_begin(1));
        } catch (...) {
            failure = std::current_exception();
        }
        {
            std::unique_lock lock(mutex_);
            done_.wait(lock, [this] { return pending_ == 0; });
            body_ = nullptr;
        }
        busy_ = false;
        if (failure) std::rethrow_exception(failure);
    }

private:
    // Block b starts at a multiple of the grain, so vectorised loops see the same alignment
    // of their elements whatever the thread count.
    std::int64_t block_begin(int b) const { return std::min(n_, units_ * b / blocks_ * grain_); }

    void work(int w, std::uint64_t seen) {
        for (;;) {
            std::unique_lock lock(mutex_);
            wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
            if (stopping_) return;
            seen = generation_;
            if (w >= blocks_) continue;
            const BlockBody* body = body_;
            const std::int64_t begin = block_begin(w), end = block_begin(w + 1);
            lock.unlock();
            (*body)(begin, end);
            lock.lock();
            if (--pending_ == 0) done_.notify_one();
        }
    }

    void stop_workers() {
        {
            std::lock_guard lock(mutex_);
            stopping_ = true;
        }
        wake_.notify_all();
        for (auto& t : workers_) t.join();
        workers_.clear();
        stopping_ = false;
    }

    std::vector<std::thread> workers_;
    std::mutex mutex_;
    std::condition_variable wake_, done_;
    const BlockBody* body_ = nullptr;
    std::int64_t n_ = 0, grain_ = 1, units_ = 0;
    int blocks_ = 0, pending_ = 0;
    std::uint64_t generation_ = 0;
    bool stopping_ = false;
    std::atomic<bool> busy_ = false;
};

WorkerPool& pool() {
    static WorkerPool instance;
    return instance;
}

} // namespace

void set_blas_threads(int threads) {
    openblas_set_num_threads(1); // every sgemm call runs on the thread that makes it
    pool().resize(threads);
}

int kernel_threads() {
    return pool().threads();
}

void parallel_for(std::int64_t n, std::int64_t grain, const BlockBody& body) {
    pool().run(n, std::max<std::int64_t>(grain, 1), body);
}

} // namespace trident::kernels::cpu
