#include "studio/assets.h"

#include <array>
#include <utility>

namespace loft::studio {

const Asset* find_asset(std::string_view name) {
  for (const Asset& a : embedded_assets())
    if (a.name == name) return &a;
  return nullptr;
}

std::string_view content_type_for(std::string_view name) {
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 11> kTypes{{
      {".html", "text/html; charset=utf-8"},
      {".js", "text/javascript; charset=utf-8"},
      {".mjs", "text/javascript; charset=utf-8"},
      {".css", "text/css; charset=utf-8"},
      {".json", "application/json"},
      {".svg", "image/svg+xml"},
      {".png", "image/png"},
      {".ico", "image/x-icon"},
      {".woff2", "font/woff2"},
      {".txt", "text/plain; charset=utf-8"},
      {".map", "application/json"},
  }};
  for (const auto& [ext, type] : kTypes)
    if (name.ends_with(ext)) return type;
  return "application/octet-stream";
}

}  // namespace loft::studio
