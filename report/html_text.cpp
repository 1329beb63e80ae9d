#include "report/html_text.h"

#include <cmath>
#include <cstdio>
#include <iomanip>
#include <sstream>

namespace loft::report {

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string short_number(double v, int digits) {
  if (!std::isfinite(v)) return std::isnan(v) ? "NaN" : (v > 0 ? "inf" : "-inf");
  const double a = std::fabs(v);
  const char* suffix = "";
  if (a >= 1e9) v /= 1e9, suffix = "G";
  else if (a >= 1e6) v /= 1e6, suffix = "M";
  else if (a >= 1e4) v /= 1e3, suffix = "k";
  // Enough digits for the integer part (3070, not 3.07e+03), fewer for tiny values (2e-05).
  int precision = digits;
  if (a != 0 && a < 1e-3) precision = std::max(1, digits - 1);
  else if (a >= 1 && a < 1e4) precision = std::max(digits, int(std::floor(std::log10(a))) + 1);
  std::ostringstream os;
  os << std::setprecision(precision) << v << suffix;
  return os.str();
}

std::string bytes_text(double bytes) {
  char buf[64];
  if (bytes >= double(1 << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / double(1 << 30));
  else std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / double(1 << 20));
  return buf;
}

}  // namespace loft::report
