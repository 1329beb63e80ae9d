#include "tests/common/event_decode.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>

#include "report/tf_record.h"
#include "tests/common/test_util.h"

namespace loft::test {

namespace fs = std::filesystem;

std::optional<std::string> protoc_decode_event(const std::string& bytes) {
  if (std::system("command -v protoc >/dev/null 2>&1") != 0) return std::nullopt;
  TempDir dir;
  {
    std::ofstream f(dir / "event.bin", std::ios::binary);
    f << bytes;
  }
  const std::string cmd = "protoc --proto_path='" + (source_dir() / "report").string() +
                          "' --decode=tensorboard.Event tensorboard_event.proto < '" + (dir / "event.bin").string() + "'";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return std::nullopt;
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  if (pclose(p) != 0) return std::nullopt;
  return out;
}

std::optional<DecodedEvents> decode_event_file(const fs::path& file) {
  DecodedEvents d;
  const std::vector<std::string> records = report::read_tf_records(file);
  const std::regex version(R"(file_version: "([^"]*)\")"), step(R"(\bstep: (\d+))"),
      value(R"(tag: "([^"]*)\"\s*simple_value: ([-+0-9.eE]+|nan|inf|-inf))");
  for (size_t i = 0; i < records.size(); ++i) {
    auto text = protoc_decode_event(records[i]);
    if (!text) return std::nullopt;
    std::smatch m;
    if (i == 0 && std::regex_search(*text, m, version)) d.file_version = m[1];
    int64_t s = 0;
    if (std::regex_search(*text, m, step)) s = std::stoll(m[1]);
    for (std::sregex_iterator it(text->begin(), text->end(), value), end; it != end; ++it)
      d.scalars.emplace_back(s, (*it)[1], std::stod((*it)[2]));
    d.text.push_back(std::move(*text));
  }
  return d;
}

}  // namespace loft::test
