// The page's files (studio/web/), Chart.js and js-yaml, compiled into the binary at build time by
// cmake/embed_assets.cmake: served under /static/NAME (index.html also at /).
#pragma once
#include <span>
#include <string_view>

namespace loft::studio {

struct Asset {
  // Path under studio/web/ ("index.html", "app.js"); Chart.js is "chart.min.js", js-yaml "js-yaml.min.js".
  std::string_view name;
  std::string_view data;
};

// Every embedded file (generated: studio_assets_data.cpp in the build folder).
std::span<const Asset> embedded_assets();
// The file of that name, or null.
const Asset* find_asset(std::string_view name);
// The Content-Type a browser needs for a file of that name (by its extension).
std::string_view content_type_for(std::string_view name);

}  // namespace loft::studio
