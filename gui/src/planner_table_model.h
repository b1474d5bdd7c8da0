#pragma once
// The planner's candidates as a table: one row per layout, fastest first as the planner
// ranked them. Display text is formatted for people; kSortRole gives the raw number (or word)
// so a QSortFilterProxyModel sorts 10 after 9 and 0.020 s before 0.100 s.
#include "trident/planner/planner.h"

#include <QAbstractTableModel>
#include <vector>

namespace trident::gui {

class PlannerTableModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column {
        tp,
        pp,
        dp,
        cp,
        ep,
        etp,
        vpp,
        micro_batch,
        schedule,
        recompute,
        sequence_parallel,
        zero,      // ZeRO stage (with hybrid-sharding replicas)
        precision, // bf16, fp8-…, mxfp8
        step_time,
        tokens_per_s,
        mfu,
        bubble,
        peak_memory,
        column_count
    };
    static constexpr int kSortRole = Qt::UserRole;

    using QAbstractTableModel::QAbstractTableModel;

    void set_candidates(std::vector<planner::Candidate> candidates, double memory_budget_bytes);
    const planner::Candidate& candidate(int row) const { return candidates_.at(std::size_t(row)); }
    const std::vector<planner::Candidate>& candidates() const { return candidates_; }
    double memory_budget_bytes() const { return memory_budget_bytes_; }

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

private:
    std::vector<planner::Candidate> candidates_;
    double memory_budget_bytes_ = 0.0;
};

// "full 4", "selective", "none": what the table and the CLI show for a plan's recomputation.
QString recompute_text(const core::ParallelPlan& plan);

} // namespace trident::gui
