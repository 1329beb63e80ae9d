#include "report/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "engine/core/error.h"
#include "report/html_text.h"

namespace loft::report {

namespace {

constexpr double kWidth = 600, kHeight = 300;
constexpr double kLeft = 58, kRight = 14, kTop = 30, kBottom = 34;
constexpr size_t kMaxPoints = 2000;  // longer series are thinned: the page stays small

struct Range {
  double lo = std::numeric_limits<double>::infinity(), hi = -std::numeric_limits<double>::infinity();
  void add(double v) {
    if (!std::isfinite(v)) return;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  bool empty() const { return lo > hi; }
  void pad() {  // a flat series still gets a visible band
    if (hi - lo < 1e-12 * std::max(1.0, std::fabs(hi))) {
      const double d = lo == 0 ? 1 : std::fabs(lo) * 0.1;
      lo -= d, hi += d;
    }
  }
};

// 1, 2 or 5 times a power of ten: about `target` intervals over the range.
double nice_step(double range, int target) {
  const double raw = range / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double r = raw / mag;
  return (r < 1.5 ? 1 : r < 3 ? 2 : r < 7 ? 5 : 10) * mag;
}

std::vector<double> ticks(Range& r, int target) {
  const double step = nice_step(r.hi - r.lo, target);
  r.lo = std::floor(r.lo / step) * step;
  r.hi = std::ceil(r.hi / step) * step;
  std::vector<double> t;
  for (double v = r.lo; v <= r.hi + step * 1e-6; v += step) t.push_back(std::fabs(v) < step * 1e-9 ? 0 : v);
  return t;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

Points thin(const Points& p) {
  if (p.size() <= kMaxPoints) return p;
  Points out;
  const size_t stride = (p.size() + kMaxPoints - 1) / kMaxPoints;
  for (size_t i = 0; i < p.size(); i += stride) out.push_back(p[i]);
  if (out.back() != p.back()) out.push_back(p.back());
  return out;
}

}  // namespace

Points ema_smooth(const Points& raw, double weight) {
  Points out;
  double last = 0;
  int64_t n = 0;
  for (const auto& [x, y] : raw) {
    if (!std::isfinite(y)) continue;
    last = last * weight + (1 - weight) * y;
    ++n;
    out.emplace_back(x, last / (1 - std::pow(weight, double(n))));
  }
  return out;
}

std::string svg_line_chart(const Chart& chart) {
  Range xr, yr;
  for (const auto& s : chart.series)
    for (const auto& [x, y] : s.points)
      if (std::isfinite(y)) xr.add(x), yr.add(y);
  std::string svg = "<svg class=\"chart\" viewBox=\"0 0 " + num(kWidth) + " " + num(kHeight) +
                    "\" role=\"img\" aria-label=\"" + html_escape(chart.title) + "\"><title>" +
                    html_escape(chart.title) + "</title><text class=\"ctitle\" x=\"" + num(kLeft) +
                    "\" y=\"18\">" + html_escape(chart.title) + "</text>";
  if (yr.empty()) return svg + "<text class=\"axis\" x=\"" + num(kWidth / 2) + "\" y=\"" + num(kHeight / 2) +
                         "\" text-anchor=\"middle\">no data</text></svg>";
  xr.pad();
  yr.pad();
  const std::vector<double> yt = ticks(yr, 5), xt = ticks(xr, 6);
  const double pw = kWidth - kLeft - kRight, ph = kHeight - kTop - kBottom;
  const auto px = [&](double x) { return kLeft + (x - xr.lo) / (xr.hi - xr.lo) * pw; };
  const auto py = [&](double y) { return kTop + (1 - (y - yr.lo) / (yr.hi - yr.lo)) * ph; };
  for (double v : yt)
    svg += "<line class=\"grid\" x1=\"" + num(kLeft) + "\" x2=\"" + num(kLeft + pw) + "\" y1=\"" + num(py(v)) +
           "\" y2=\"" + num(py(v)) + "\"/><text class=\"axis\" x=\"" + num(kLeft - 6) + "\" y=\"" + num(py(v) + 4) +
           "\" text-anchor=\"end\">" + short_number(v) + "</text>";
  for (double v : xt)
    svg += "<text class=\"axis\" x=\"" + num(px(v)) + "\" y=\"" + num(kTop + ph + 16) +
           "\" text-anchor=\"middle\">" + short_number(v) + "</text>";
  svg += "<text class=\"axis\" x=\"" + num(kLeft + pw) + "\" y=\"" + num(kHeight - 2) +
         "\" text-anchor=\"end\">step</text><rect class=\"frame\" x=\"" + num(kLeft) + "\" y=\"" + num(kTop) +
         "\" width=\"" + num(pw) + "\" height=\"" + num(ph) + "\"/>";
  for (const auto& s : chart.series) {
    const Points p = thin(s.points);
    const std::string cls = cat("s", s.color % 8);
    std::string pts;
    for (const auto& [x, y] : p)
      if (std::isfinite(y)) pts += cat(pts.empty() ? "" : " ", num(px(x)), ",", num(py(y)));
    if (p.size() > 1)
      svg += "<polyline class=\"line " + cls + (s.faint ? " faint" : "") + (s.dashed ? " dashed" : "") +
             "\" points=\"" + pts + "\"><title>" + html_escape(s.label) + "</title></polyline>";
    if (s.markers || p.size() == 1)
      for (const auto& [x, y] : p)
        if (std::isfinite(y))
          svg += "<circle class=\"dot " + cls + "\" cx=\"" + num(px(x)) + "\" cy=\"" + num(py(y)) +
                 "\" r=\"3\"><title>" + html_escape(s.label) + " step " + short_number(x, 6) + ": " +
                 short_number(y, 4) + "</title></circle>";
  }
  return svg + "</svg>";
}

}  // namespace loft::report
