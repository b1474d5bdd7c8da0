#include "what_if_panel.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPainter>
#include <QPushButton>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrentRun>

namespace trident::gui {

// The drawing area: both pictures, laid out for the widget's size.
class WhatIfCharts : public QWidget {
public:
    explicit WhatIfCharts(const WhatIfPanel& panel) : panel_(panel) { setMinimumSize(480, 220); }

protected:
    void paintEvent(QPaintEvent*) override {
        QPainter painter(this);
        const QImage image = panel_.render_image(size());
        painter.drawImage(0, 0, image);
    }

private:
    const WhatIfPanel& panel_;
};

WhatIfPanel::WhatIfPanel(std::function<PlannerRequest()> request, QWidget* parent)
    : QWidget(parent), request_(std::move(request)) {
    sizes_edit_ = new QLineEdit;
    sizes_edit_->setPlaceholderText("half, once and twice the nodes");
    sizes_edit_->setToolTip("Cluster sizes in nodes: 64,128,256 or 1-4");
    compare_button_ = new QPushButton("Compare sizes");
    message_label_ = new QLabel;
    message_label_->setWordWrap(true);
    charts_ = new WhatIfCharts(*this);
    auto* controls = new QHBoxLayout;
    controls->addWidget(new QLabel("Sizes"));
    controls->addWidget(sizes_edit_, 1);
    controls->addWidget(compare_button_);
    auto* layout = new QVBoxLayout(this);
    layout->addLayout(controls);
    layout->addWidget(message_label_);
    layout->addWidget(charts_, 1);
    connect(compare_button_, &QPushButton::clicked, this, &WhatIfPanel::compare);
    connect(sizes_edit_, &QLineEdit::returnPressed, this, &WhatIfPanel::compare);
    connect(&watcher_, &QFutureWatcher<WhatIfOutcome>::finished, this, &WhatIfPanel::finish);
}

WhatIfPanel::~WhatIfPanel() {
    if (cancel_flag_) cancel_flag_->store(true);
    watcher_.waitForFinished();
}

bool WhatIfPanel::running() const {
    return watcher_.isRunning();
}

QString WhatIfPanel::message() const {
    return message_label_->text();
}

void WhatIfPanel::compare() {
    if (running()) return;
    cancel_flag_ = std::make_shared<std::atomic<bool>>(false);
    compare_button_->setEnabled(false);
    message_label_->setText("Planning each size and each tp × pp pair…");
    watcher_.setFuture(
        QtConcurrent::run([request = request_(), sizes = sizes_edit_->text(), flag = cancel_flag_] {
            return run_what_if(request, sizes, flag.get());
        }));
}

void WhatIfPanel::finish() {
    outcome_ = watcher_.result();
    compare_button_->setEnabled(true);
    QString text = outcome_.error;
    if (text.isEmpty()) {
        text = QString("%1 size%2 planned, %3 tp × pp pairs")
                   .arg(outcome_.sizes.size())
                   .arg(outcome_.sizes.size() == 1 ? "" : "s")
                   .arg(outcome_.map.size());
        if (!outcome_.missing.isEmpty()) text += "\n" + outcome_.missing.trimmed();
    }
    message_label_->setText(text);
    charts_->update();
    emit finished(outcome_.error.isEmpty() && !outcome_.sizes.empty());
}

QRectF WhatIfPanel::heat_map_rect(QSizeF whole) const {
    const double left = std::floor(whole.width() * 0.6);
    return {left, 0, whole.width() - left, whole.height()};
}

ScalingChartPicture WhatIfPanel::scaling_picture(QSizeF whole) const {
    return layout_scaling_chart(outcome_.sizes,
                                QSizeF(heat_map_rect(whole).left(), whole.height()));
}

HeatMapPicture WhatIfPanel::heat_map_picture(QSizeF whole) const {
    return layout_tp_pp_heat_map(outcome_.map, outcome_.map_devices, heat_map_rect(whole).size());
}

QImage WhatIfPanel::render_image(QSize size) const {
    QImage image(size, QImage::Format_ARGB32);
    image.fill(Qt::white);
    QPainter painter(&image);
    paint_chart(scaling_picture(size), painter);
    painter.translate(heat_map_rect(size).topLeft());
    paint_chart(heat_map_picture(size), painter);
    return image;
}

} // namespace trident::gui
