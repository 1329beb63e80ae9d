// export writes only where it may: --out / is a usage error (it used to spin forever); --overwrite
// replaces only a previous loft export (a folder with .loft-export, a file that is GGUF); the
// temporaries of killed exports are removed by the next export into the same folder, only loft's
// and only when their writer is dead; an export already writing --out is not raced. Every
// planted file in and around the paths survives byte for byte.
#include <algorithm>
#include <fstream>
#include <thread>

#include "engine/io/folder_lock.h"
#include "export/gguf/gguf_reader.h"
#include "tests/common/cli_expect.h"
#include "tests/common/loft_process.h"
#include "tests/common/test_util.h"
#include "tests/robustness/bystanders.h"

namespace loft {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> export_args(const fs::path& out, const std::string& format = "bf16",
                                     std::vector<std::string> extra = {}) {
  std::vector<std::string> a{"export", "--model", test::data_path("models/stories260K-hf").string(),
                             "--format", format, "--out", out.string()};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

// The names in `dir` that look like an export's temporary.
std::vector<std::string> temporaries(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(".loft-tmp-") != std::string::npos) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

TEST(ExportPaths, RootOutIsAUsageErrorNotAHang) {
  test::TempDir dir;
  int n = 0;
  for (const auto& [out, format] : std::vector<std::pair<std::string, std::string>>{
           {"/", "bf16"}, {"//", "bf16"}, {"///", "peft"}, {"/", "gguf"}, {"//", "gguf"}}) {
    auto args = export_args(out, format);
    if (format == "peft") args.insert(args.end(), {"--adapter", dir.path().string()});
    test::LoftProcess p(args, dir / std::to_string(n++));
    EXPECT_EQ(p.wait(std::chrono::seconds(60)), 2) << out << ": " << p.err();
    const std::string err = p.err();
    EXPECT_TRUE(test::contains(err, "--out " + out + ": the root folder is never an output")) << err;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  }
}

TEST(ExportPaths, OverwriteReplacesOnlyAPreviousLoftExport) {
  test::TempDir dir;
  test::Bystanders around;
  around.plant(dir.path());
  around.plant(dir / "o");  // a folder loft did not write
  const auto plain = test::run_cli_captured(export_args(dir / "o"));
  test::expect_one_line(plain, 2, "already exists (pass --overwrite");
  const auto forced = test::run_cli_captured(export_args(dir / "o", "bf16", {"--overwrite"}));
  test::expect_one_line(forced, 2, "is not a loft export (it has no .loft-export)");
  EXPECT_TRUE(around.intact());

  ASSERT_EQ(test::run_cli_captured(export_args(dir / "p")).code, 0);
  EXPECT_TRUE(fs::exists(dir / "p" / ".loft-export"));
  EXPECT_FALSE(fs::exists(dir / "p" / ".loft.lock")) << "the lock goes with the export";
  write(dir / "p" / "extra.txt", "inside an export: replaced with it");
  const auto again = test::run_cli_captured(export_args(dir / "p", "bf16", {"--overwrite"}));
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_FALSE(fs::exists(dir / "p" / "extra.txt"));
  EXPECT_TRUE(fs::exists(dir / "p" / "model.safetensors"));
  EXPECT_TRUE(around.intact());
  EXPECT_EQ(temporaries(dir.path()), std::vector<std::string>{".x.loft-tmp-999999999"}) << "only the planted one";

  // An export folder another process holds (an export replacing it) is not replaced under it.
  {
    const FolderLock held(dir / "p", "export", "test");
    const auto r = test::run_cli_captured(export_args(dir / "p", "bf16", {"--overwrite"}));
    test::expect_one_line(r, 1, cat("is in use by pid ", getpid(), " (export, started "));
  }
  EXPECT_TRUE(fs::exists(dir / "p" / "model.safetensors"));
}

TEST(ExportPaths, AGgufFileIsReplacedOnlyWhenItIsGguf) {
  test::TempDir dir;
  test::Bystanders around;
  around.plant(dir.path());
  around.plant_file(dir / "x.gguf", "my notes, not a model");
  test::expect_one_line(test::run_cli_captured(export_args(dir / "x.gguf", "gguf", {"--overwrite"})), 2,
                        "is not a GGUF file; --overwrite replaces only a GGUF file");
  ASSERT_EQ(test::run_cli_captured(export_args(dir / "y.gguf", "gguf")).code, 0);
  const auto r = test::run_cli_captured(export_args(dir / "y.gguf", "gguf", {"--overwrite", "--gguf-type", "f32"}));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NO_THROW(gguf::read_gguf(dir / "y.gguf"));
  EXPECT_TRUE(around.intact());
  EXPECT_EQ(temporaries(dir.path()), std::vector<std::string>{".x.loft-tmp-999999999"});
}

// Temporaries of dead exports (by name, marker, free lock and gone pid) are removed; a live
// writer's, a marker-less one with content, one in a subfolder and one of a live lock stay.
TEST(ExportPaths, TemporariesOfKilledExportsAreRemovedByTheNextExport) {
  test::TempDir dir;
  test::Bystanders kept;
  kept.plant(dir.path());
  const pid_t dead = test::dead_pid();
  const auto tmp = [&](const std::string& target, pid_t pid) { return dir / cat(".", target, ".loft-tmp-", pid); };
  for (const fs::path& p : {tmp("o", dead), tmp("other", dead), dir / cat(".o.loft-old-", dead)}) {
    write(p / ".loft-export", "{}\n");
    write(p / "model.safetensors", std::string(1 << 20, 'w'));
  }
  fs::create_directory(tmp("empty", dead));
  kept.plant_file(tmp("nomarker", dead) / "data.bin", "someone's, named like ours");
  kept.plant_file(tmp("alive", getpid()) / ".loft-export", "{}\n");
  kept.plant_file(tmp("locked", dead) / ".loft-export", "{}\n");
  kept.plant_file(dir / "sub" / cat(".o.loft-tmp-", dead) / ".loft-export", "{}\n");
  const FolderLock held(tmp("locked", dead), "export", "test");
  const auto r = test::run_cli_captured(export_args(dir / "o"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(test::contains(r.out, "export: removed 4 temporaries of interrupted exports")) << r.out;
  for (const fs::path& p : {tmp("o", dead), tmp("other", dead), dir / cat(".o.loft-old-", dead), tmp("empty", dead)})
    EXPECT_FALSE(fs::exists(p)) << p;
  EXPECT_TRUE(kept.intact());
  EXPECT_TRUE(fs::exists(dir / "o" / "model.safetensors"));
}

// The real thing: exports killed with SIGKILL while writing leave their temporary, and the next
// export into the folder removes it. (A killed export that got as far as its own cleanup removed
// those killed before it; one killed inside that cleanup left them still recognisable.)
TEST(ExportPaths, AnExportKilledWhileWritingIsCleanedUpByTheNext) {
  test::TempDir dir;
  test::Bystanders kept;
  kept.plant(dir.path());
  std::vector<std::string> killed;  // the temporaries of the exports killed while writing
  for (int i = 0; i < 6 && killed.size() < 3; ++i) {
    test::LoftProcess p(export_args(dir / cat("k", i), "gguf"));
    const std::string name = cat(".k", i, ".loft-tmp-", p.pid());
    if (test::wait_for(p, [&] { return fs::exists(dir / name / ".loft.lock"); })) {
      p.kill();
      if (fs::exists(dir / name)) killed.push_back(name);
    }
  }
  ASSERT_FALSE(killed.empty()) << "no export was caught while writing";
  std::vector<std::string> left = temporaries(dir.path());
  std::erase(left, ".x.loft-tmp-999999999");
  ASSERT_FALSE(left.empty());
  EXPECT_EQ(left.back(), killed.back());
  for (const std::string& t : left) EXPECT_NE(std::find(killed.begin(), killed.end(), t), killed.end()) << t;
  const auto r = test::run_cli_captured(export_args(dir / "next", "gguf"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(test::contains(r.out, cat("export: removed ", left.size(), " temporar"))) << r.out;
  EXPECT_EQ(temporaries(dir.path()), std::vector<std::string>{".x.loft-tmp-999999999"});
  EXPECT_TRUE(kept.intact());
}

// While an export writes --out (its temporary's lock held), a later export into the same --out
// is refused naming it; one into another name goes ahead beside it.
TEST(ExportPaths, AnExportAlreadyWritingTheSameOutIsRefused) {
  test::TempDir dir;
  const fs::path writing = dir / cat(".o.loft-tmp-", getpid());
  write(writing / ".loft-export", "{}\n");
  const FolderLock held(writing, "export", "test");
  // Exports into one --out are admitted by start time, to the second: be a second earlier.
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  test::LoftProcess later(export_args(dir / "o"), dir / "later");
  EXPECT_EQ(later.wait(), 1) << later.err();
  EXPECT_TRUE(test::contains(later.err(), cat("--out ", (dir / "o").string(), " is being written by another export, pid ",
                                              getpid(), " (export, started ", held.holder().started, ")")))
      << later.err();
  EXPECT_FALSE(fs::exists(dir / "o"));
  EXPECT_TRUE(fs::exists(writing / ".loft-export"));
  test::LoftProcess beside(export_args(dir / "o2"), dir / "beside");
  EXPECT_EQ(beside.wait(), 0) << beside.err();
}

}  // namespace
}  // namespace loft
