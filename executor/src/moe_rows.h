#pragma once
// Blocks of rows moved between the ranks of a group by the MoE token dispatchers
// (gpt_chunk_moe.cpp, gpt_chunk_moe_gather.cpp): offsets and element counts of per-rank blocks,
// a variable-size all-gather and its inverse for partial sums.
#include "trident/executor/gpt_chunk.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <numeric>
#include <vector>

namespace trident::executor::moe_rows {

// Start of each rank's block of rows, and element counts of blocks of `width`-wide rows.
inline std::vector<std::int64_t> row_offsets(const std::vector<std::int64_t>& rows) {
    std::vector<std::int64_t> at(rows.size(), 0);
    for (std::size_t r = 1; r < rows.size(); ++r) at[r] = at[r - 1] + rows[r - 1];
    return at;
}

inline std::vector<std::size_t> element_counts(const std::vector<std::int64_t>& rows,
                                               std::int64_t width) {
    std::vector<std::size_t> counts;
    for (auto n : rows) counts.push_back(std::size_t(n * width));
    return counts;
}

inline std::int64_t total_rows(const std::vector<std::int64_t>& rows) {
    return std::accumulate(rows.begin(), rows.end(), std::int64_t{0});
}

// The first element of slot `slot`'s row among per-rank blocks of `width`-wide rows that start
// at send_at (row_offsets of MoeState::sent): the row its token took to its expert's rank.
inline std::int64_t slot_offset(const GptChunk::MoeState& s,
                                const std::vector<std::int64_t>& send_at, std::int64_t slot,
                                std::int64_t width) {
    return (send_at[std::size_t(s.slot_rank[std::size_t(slot)])] + s.slot_row[std::size_t(slot)]) *
           width;
}

// The rows each rank of `g` sends this one, given the rows this one sends each: an all-to-all
// of the counts, before the rows' variable-size exchange.
inline std::vector<std::int64_t> exchange_counts(const std::vector<std::int64_t>& sent,
                                                 Communicator& g) {
    const std::size_t R = sent.size();
    Vec out(R), in(R);
    for (std::size_t r = 0; r < R; ++r) out[r] = float(sent[r]);
    g.all_to_all(out.data(), in.data(), 1);
    std::vector<std::int64_t> received(R);
    for (std::size_t r = 0; r < R; ++r) received[r] = std::int64_t(in[r]);
    return received;
}

inline bool all_equal(const std::vector<std::int64_t>& counts) {
    return std::adjacent_find(counts.begin(), counts.end(), std::not_equal_to<>()) == counts.end();
}

// Every rank's block of `width`-wide rows, in rank order, on every rank of `g`; `counts` gets
// each rank's row count. An all-gather where every block is as long (the allgather
// dispatcher's tokens), else a variable-size one through all-to-all-v.
inline Vec gather_row_blocks(const Vec& mine, std::int64_t width, Communicator& g,
                             std::vector<std::int64_t>& counts) {
    const int R = g.size();
    float n = float(std::int64_t(mine.size()) / width);
    Vec all_n(static_cast<std::size_t>(R));
    g.all_gather(&n, all_n.data(), 1);
    counts.assign(std::size_t(R), 0);
    for (int r = 0; r < R; ++r) counts[std::size_t(r)] = std::int64_t(all_n[std::size_t(r)]);
    Vec out(std::size_t(total_rows(counts) * width));
    if (all_equal(counts)) {
        g.all_gather(mine.data(), out.data(), mine.size());
        return out;
    }
    Vec send(static_cast<std::size_t>(R) * mine.size());
    for (int r = 0; r < R; ++r) std::copy(mine.begin(), mine.end(), send.begin() + r * mine.size());
    g.all_to_allv(send.data(), std::vector<std::size_t>(std::size_t(R), mine.size()), out.data(),
                  element_counts(counts, width));
    return out;
}

// The inverse of gather_row_blocks for partial sums: `all` holds a block per rank of `g`
// (`counts` rows each); every rank gets the sum over ranks of its own block (a reduce-scatter
// where the blocks are as long).
inline Vec reduce_scatter_row_blocks(const Vec& all, const std::vector<std::int64_t>& counts,
                                     std::int64_t width, Communicator& g) {
    const int R = g.size(), me = g.rank();
    const std::size_t mine = std::size_t(counts[std::size_t(me)] * width);
    if (all_equal(counts)) {
        Vec sum(mine);
        g.reduce_scatter_sum(all.data(), sum.data(), mine);
        return sum;
    }
    Vec received(static_cast<std::size_t>(R) * mine);
    g.all_to_allv(all.data(), element_counts(counts, width), received.data(),
                  std::vector<std::size_t>(std::size_t(R), mine));
    Vec sum(mine, 0.0f);
    for (int r = 0; r < R; ++r)
        for (std::size_t i = 0; i < mine; ++i) sum[i] += received[std::size_t(r) * mine + i];
    return sum;
}

// Expert tensor parallelism, as the all-to-all and flex dispatchers use it: every rank of the
// expert-tensor group `etp` runs its columns of the experts over the rows all of them received
// (`counts` gets each rank's row count), and their partial sums go back to each rank's own rows.
// Nothing moves when the group is one rank.
inline Vec rows_of_expert_tensor_group(Vec rows, std::int64_t width, Communicator& etp,
                                       std::vector<std::int64_t>& counts) {
    if (etp.size() > 1) return gather_row_blocks(rows, width, etp, counts);
    counts = {std::int64_t(rows.size()) / width};
    return rows;
}

inline Vec own_rows_summed(Vec rows, const std::vector<std::int64_t>& counts, std::int64_t width,
                           Communicator& etp) {
    return etp.size() > 1 ? reduce_scatter_row_blocks(rows, counts, width, etp) : rows;
}

} // namespace trident::executor::moe_rows
