// Line charts as inline SVG for the HTML report: no scripts, colours from CSS classes (s0..s7,
// defined by the page for its light and dark themes), a viewBox so they scale with the page.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace loft::report {

using Points = std::vector<std::pair<double, double>>;  // (step, value), steps ascending

struct Series {
  std::string label;
  Points points;
  int color = 0;        // CSS class s<color % 8>
  bool faint = false;   // the raw curve under its smoothed one
  bool dashed = false;  // validation curves
  bool markers = false; // a dot per point (sparse series such as validation loss)
};

struct Chart {
  std::string title;
  std::vector<Series> series;
};

// The chart as an <svg> element; a chart without points says so instead of drawing axes.
std::string svg_line_chart(const Chart& chart);

// TensorBoard's smoothing: an exponential moving average with the bias of its zero start removed.
Points ema_smooth(const Points& raw, double weight = 0.8);

}  // namespace loft::report
