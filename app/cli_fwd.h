// The CLI11 classes that command headers only name (by reference or pointer). CLI11 is header-only
// and every file that includes <CLI/CLI.hpp> compiles its validators, formatter and config
// reader (~7 s of CPU at -O3), so headers declare these and only the files that define options
// include CLI11 itself.
#pragma once

namespace CLI {
class App;
class Option;
}  // namespace CLI
