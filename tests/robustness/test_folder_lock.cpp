// The folder lock's contract (engine/io/folder_lock.h), which finetune, export and the studio
// share: one holder at a time, its line {"pid","started","command"}, refusals naming the holder, a
// lock file left by a dead process taken over, the file removed when the lock is let go.
#include <unistd.h>

#include <fstream>
#include <regex>

#include "engine/core/error.h"
#include "engine/io/folder_lock.h"
#include "tests/common/loft_process.h"
#include "tests/common/test_util.h"

namespace loft {
namespace {

namespace fs = std::filesystem;

TEST(FolderLock, WritesItsLineAndRefusesASecondHolder) {
  test::TempDir dir;
  const FolderLock lock(dir.path(), "finetune", "--out run");
  const std::string line = test::read_text(dir / ".loft.lock");
  const std::regex want(R"(\{"pid":(\d+),"started":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ","command":"finetune"\}\n)");
  std::smatch m;
  ASSERT_TRUE(std::regex_match(line, m, want)) << line;
  EXPECT_EQ(std::stoll(m[1]), getpid());
  const std::optional<LockHolder> h = folder_lock_holder(dir.path());
  ASSERT_TRUE(h);
  EXPECT_EQ(h->pid, getpid());
  EXPECT_EQ(h->command, "finetune");
  EXPECT_EQ(h->started, lock.holder().started);
  try {
    FolderLock second(dir.path(), "export", "--out run");
    FAIL() << "a second lock was taken";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_TRUE(test::contains(msg, cat("--out run is in use by pid ", getpid(), " (finetune, started ", h->started, ")")));
    EXPECT_EQ(msg.find('\n'), std::string::npos);
  }
  EXPECT_EQ(test::read_text(dir / ".loft.lock"), line) << "the refused one left the holder's line alone";
}

TEST(FolderLock, LettingGoRemovesTheFileAndFreesTheFolder) {
  test::TempDir dir;
  { const FolderLock lock(dir.path(), "finetune", "x"); }
  EXPECT_FALSE(fs::exists(dir / ".loft.lock"));
  EXPECT_FALSE(folder_lock_holder(dir.path()));
  EXPECT_FALSE(fs::exists(dir / ".loft.lock")) << "asking does not create the file";
  EXPECT_NO_THROW(FolderLock(dir.path(), "export", "x"));
  EXPECT_FALSE(folder_lock_holder(dir / "missing"));
  EXPECT_THROW(FolderLock(dir / "missing", "export", "x"), Error);
}

TEST(FolderLock, ALockFileOfADeadProcessIsTakenOver) {
  test::TempDir dir;
  const pid_t dead = test::dead_pid();
  const std::string stale = cat(R"({"pid":)", dead, R"(,"started":"2020-01-01T00:00:00Z","command":"finetune"})", "\n",
                                std::string(200, ' '), "a longer old line\n");
  std::ofstream(dir / ".loft.lock") << stale;
  EXPECT_FALSE(folder_lock_holder(dir.path())) << "nobody holds it";
  const FolderLock lock(dir.path(), "finetune", "x");
  const std::optional<LockHolder> h = folder_lock_holder(dir.path());
  ASSERT_TRUE(h);
  EXPECT_EQ(h->pid, getpid());
  EXPECT_EQ(test::read_text(dir / ".loft.lock").find("a longer old line"), std::string::npos);
}

TEST(FolderLock, TheLockMovesWithItsFolder) {
  test::TempDir dir;
  fs::create_directory(dir / "a");
  {
    FolderLock lock(dir / "a", "export", "x");
    fs::rename(dir / "a", dir / "b");
    lock.moved_to(dir / "b");
    ASSERT_TRUE(folder_lock_holder(dir / "b"));
    EXPECT_THROW(FolderLock(dir / "b", "export", "x"), Error);
  }
  EXPECT_FALSE(fs::exists(dir / "b" / ".loft.lock"));
}

}  // namespace
}  // namespace loft
