#pragma once
// WhatIfPanel: the planner tab's what-if. Type cluster sizes ("1,2,4"), click Compare sizes:
// a worker plans each size and the tp × pp pairs at the panel's size, then the panel draws
// tokens/s and cost against nodes beside the heat map of the best tokens/s per (tp, pp).
#include "scaling_chart_picture.h"
#include "tp_pp_heat_map_picture.h"
#include "what_if_search.h"

#include <QFutureWatcher>
#include <QImage>
#include <QWidget>
#include <atomic>
#include <functional>
#include <memory>

class QLabel;
class QLineEdit;
class QPushButton;

namespace trident::gui {

class WhatIfCharts;

class WhatIfPanel : public QWidget {
    Q_OBJECT
public:
    // `request`: the planner panel's current request (model, cluster, size, batch, budget).
    explicit WhatIfPanel(std::function<PlannerRequest()> request, QWidget* parent = nullptr);
    ~WhatIfPanel() override; // cancels a running search and waits for it

    bool running() const;
    QString message() const;
    const WhatIfOutcome& outcome() const { return outcome_; }
    QLineEdit* sizes_edit() const { return sizes_edit_; }
    QPushButton* compare_button() const { return compare_button_; }

    // Both charts side by side: the scaling plot on the left 60 %, the heat map on the right.
    ScalingChartPicture scaling_picture(QSizeF whole) const;
    HeatMapPicture heat_map_picture(QSizeF whole) const;
    QRectF heat_map_rect(QSizeF whole) const;
    QImage render_image(QSize size) const;

public slots:
    void compare();

signals:
    void finished(bool found);

private:
    void finish();

    std::function<PlannerRequest()> request_;
    QLineEdit* sizes_edit_ = nullptr;
    QPushButton* compare_button_ = nullptr;
    QLabel* message_label_ = nullptr;
    WhatIfCharts* charts_ = nullptr;
    QFutureWatcher<WhatIfOutcome> watcher_;
    std::shared_ptr<std::atomic<bool>> cancel_flag_;
    WhatIfOutcome outcome_;

    friend class WhatIfCharts;
};

} // namespace trident::gui
