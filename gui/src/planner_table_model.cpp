#include "planner_table_model.h"

#include "trident/core/units.h"

namespace trident::gui {
namespace {

// MFU names its peak: the BF16 one, and an FP8 layout's FP8 one in its cell.
const char* const kHeaders[] = {"tp",        "pp",         "dp",       "cp",
                                "ep",        "etp",        "vpp",      "mbs",
                                "schedule",  "recompute",  "SP",       "ZeRO",
                                "precision", "step time",  "tokens/s", "MFU of BF16 peak",
                                "bubble",    "peak memory"};
static_assert(std::size(kHeaders) == PlannerTableModel::column_count);

QVariant sort_value(const planner::Candidate& c, int column) {
    const core::ParallelPlan& p = c.job.plan;
    switch (column) {
    case PlannerTableModel::tp:
        return qlonglong(p.tp);
    case PlannerTableModel::pp:
        return qlonglong(p.pp);
    case PlannerTableModel::dp:
        return qlonglong(p.dp);
    case PlannerTableModel::cp:
        return qlonglong(p.cp);
    case PlannerTableModel::ep:
        return qlonglong(p.ep);
    case PlannerTableModel::etp:
        return qlonglong(p.expert_tp());
    case PlannerTableModel::vpp:
        return qlonglong(p.vpp);
    case PlannerTableModel::micro_batch:
        return qlonglong(p.micro_batch_size);
    case PlannerTableModel::schedule:
        return QString::fromStdString(core::to_string(p.schedule));
    case PlannerTableModel::recompute:
        return recompute_text(p);
    case PlannerTableModel::sequence_parallel:
        return int(p.sequence_parallel);
    case PlannerTableModel::zero:
        return p.zero_stage() * 1000 + int(p.sharding.instances);
    case PlannerTableModel::precision:
        return QString::fromStdString(core::precision_name(p.fp8.recipe));
    case PlannerTableModel::step_time:
        return c.step_time_s;
    case PlannerTableModel::tokens_per_s:
        return c.tokens_per_s;
    case PlannerTableModel::mfu:
        return c.mfu;
    case PlannerTableModel::bubble:
        return c.bubble_fraction;
    case PlannerTableModel::peak_memory:
        return c.peak_memory_bytes;
    default:
        return {};
    }
}

QString display_text(const planner::Candidate& c, int column, double budget_bytes) {
    const core::ParallelPlan& p = c.job.plan;
    switch (column) {
    case PlannerTableModel::sequence_parallel:
        return p.sequence_parallel ? "on" : "off";
    case PlannerTableModel::zero: // the stage, "3h4" for 4 hybrid-sharding replicas
        return QString::fromStdString(core::sharding_cell(p));
    case PlannerTableModel::step_time:
        return QString::number(c.step_time_s * 1e3, 'f', 1) + " ms";
    case PlannerTableModel::tokens_per_s:
        return QString::number(c.tokens_per_s, 'f', 0);
    case PlannerTableModel::mfu:
        return QString::number(100.0 * c.mfu, 'f', 1) + " %" +
               (p.fp8.enabled()
                    ? " (" + QString::number(100.0 * c.mfu_fp8_peak, 'f', 1) + " % of " +
                          QString::fromStdString(
                              core::to_string(core::quantized_dtype(p.fp8.recipe)))
                              .toUpper() +
                          " peak)"
                    : QString());
    case PlannerTableModel::bubble:
        return QString::number(100.0 * c.bubble_fraction, 'f', 1) + " %";
    case PlannerTableModel::peak_memory: { // in the unit that fits the budget
        const core::Unit unit = core::byte_unit(budget_bytes);
        return QString::number(c.peak_memory_bytes / unit.scale, 'f', 1) + " / " +
               QString::fromStdString(core::in_unit(budget_bytes, unit));
    }
    default:
        return sort_value(c, column).toString();
    }
}

} // namespace

QString recompute_text(const core::ParallelPlan& plan) {
    return QString::fromStdString(core::short_text(plan.recompute));
}

void PlannerTableModel::set_candidates(std::vector<planner::Candidate> candidates,
                                       double memory_budget_bytes) {
    beginResetModel();
    candidates_ = std::move(candidates);
    memory_budget_bytes_ = memory_budget_bytes;
    endResetModel();
}

int PlannerTableModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : int(candidates_.size());
}

int PlannerTableModel::columnCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : column_count;
}

QVariant PlannerTableModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || index.row() >= rowCount()) return {};
    const planner::Candidate& c = candidate(index.row());
    if (role == kSortRole) return sort_value(c, index.column());
    if (role == Qt::DisplayRole) return display_text(c, index.column(), memory_budget_bytes_);
    if (role == Qt::TextAlignmentRole)
        return index.column() == schedule || index.column() == recompute
                   ? QVariant(Qt::AlignLeft | Qt::AlignVCenter)
                   : QVariant(Qt::AlignRight | Qt::AlignVCenter);
    if (role == Qt::ToolTipRole && !c.recompute_reason.empty())
        return QString::fromStdString(c.recompute_reason);
    return {};
}

QVariant PlannerTableModel::headerData(int section, Qt::Orientation orientation, int role) const {
    if (role != Qt::DisplayRole) return {};
    if (orientation == Qt::Vertical) return section + 1;
    return section >= 0 && section < column_count ? QString(kHeaders[section]) : QVariant();
}

} // namespace trident::gui
