// Text helpers the HTML report and its SVG charts share: escaping and compact number formatting.
#pragma once
#include <string>
#include <string_view>

namespace loft::report {

// &, <, >, " and ' escaped for HTML text and attribute values.
std::string html_escape(std::string_view s);
// A number with `digits` significant digits, no trailing zeros, k/M/G for large magnitudes
// (1234567 -> "1.23M"), scientific for tiny ones (2e-05).
std::string short_number(double v, int digits = 3);
// Bytes as "12.3 MiB" / "1.50 GiB".
std::string bytes_text(double bytes);

}  // namespace loft::report
