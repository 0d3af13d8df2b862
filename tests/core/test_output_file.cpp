// Output files: written whole through a temporary, through symlinks to their targets, streamed
// to FIFOs, and refused when two outputs name one file — all in a fresh temporary folder (tests
// never write to /dev).
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>

#include <catch2/catch.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include "core/input_error.h"
#include "core/io/output_file.h"
#include "support/text.h"

using namespace epochcast;
using epochcast::test::read_file;
namespace fs = std::filesystem;

namespace {

// A new, empty folder removed at the end of the test.
class Folder {
 public:
  Folder() {
    std::string pattern = (fs::temp_directory_path() / "epochcast-output-XXXXXX").string();
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    path_ = pattern;
  }
  ~Folder() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  Folder(const Folder&) = delete;
  Folder& operator=(const Folder&) = delete;

  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  // Names in the folder, sorted, so a stray temporary shows.
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& entry : fs::directory_iterator(path_))
      out.push_back(entry.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  fs::path path_;
};

std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const InputError& error) {
    return error.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("a new output file is written whole, with the usual permissions, and no temporary") {
  Folder folder;
  write_output(folder / "out.csv", "a,b\n1,2\n", "--csv");
  CHECK(read_file(folder / "out.csv") == "a,b\n1,2\n");
  CHECK(folder.names() == std::vector<std::string>{"out.csv"});
  mode_t mask = ::umask(0);
  ::umask(mask);
  struct stat st {};
  REQUIRE(::stat((folder / "out.csv").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == (0666 & ~mask));
}

TEST_CASE("replacing a file keeps its permissions") {
  Folder folder;
  write_output(folder / "out.json", "old", "--json");
  REQUIRE(::chmod((folder / "out.json").c_str(), 0640) == 0);
  write_output(folder / "out.json", "new", "--json");
  CHECK(read_file(folder / "out.json") == "new");
  struct stat st {};
  REQUIRE(::stat((folder / "out.json").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0640);
}

TEST_CASE("a symlink is written through to its target and stays a link") {
  Folder folder;
  fs::create_directory(folder / "data");
  write_output(folder / "data/target.json", "old", "--json");
  fs::create_symlink("data/target.json", folder / "link.json");
  OutputFile out = OutputFile::resolve(folder / "link.json", "--json");
  CHECK(out.kind() == OutputFile::Kind::replace);
  out.write("new");
  CHECK(fs::is_symlink(folder / "link.json"));
  CHECK(read_file(folder / "data/target.json") == "new");
  CHECK(folder.names() == std::vector<std::string>{"data", "link.json"});
}

TEST_CASE("a dangling symlink creates its target") {
  Folder folder;
  fs::create_directory(folder / "data");
  fs::create_symlink("data/later.json", folder / "a.json");
  fs::create_symlink("a.json", folder / "b.json");  // a chain of two links
  write_output(folder / "b.json", "made", "--json");
  CHECK(fs::is_symlink(folder / "a.json"));
  CHECK(fs::is_symlink(folder / "b.json"));
  CHECK(read_file(folder / "data/later.json") == "made");
}

TEST_CASE("a FIFO is streamed to and never replaced") {
  Folder folder;
  std::string fifo = folder / "pipe";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  std::string received;
  std::thread reader([&] { received = read_file(fifo); });
  OutputFile out = OutputFile::resolve(fifo, "--csv");
  CHECK(out.kind() == OutputFile::Kind::stream);
  out.write("streamed\n");
  reader.join();
  CHECK(received == "streamed\n");
  struct stat st {};
  REQUIRE(::lstat(fifo.c_str(), &st) == 0);
  CHECK(S_ISFIFO(st.st_mode));
  CHECK(folder.names() == std::vector<std::string>{"pipe"});
}

TEST_CASE("a dash is standard output") {
  CHECK(OutputFile::resolve("-", "--json").kind() == OutputFile::Kind::standard_output);
}

TEST_CASE("an output path that cannot be written is refused before anything is written") {
  Folder folder;
  fs::create_directory(folder / "dir");
  CHECK_THAT(error_of([&] { OutputFile::resolve(folder / "dir", "--json"); }),
             Catch::Contains("--json: cannot write the file: it is a folder"));
  CHECK_THAT(error_of([&] { OutputFile::resolve(folder / "missing/out.json", "--json"); }),
             Catch::Contains("the folder '" + (folder / "missing") + "' does not exist"));
  fs::create_symlink("loop2", folder / "loop1");
  fs::create_symlink("loop1", folder / "loop2");
  CHECK_THAT(error_of([&] { OutputFile::resolve(folder / "loop1", "--csv"); }),
             Catch::Contains("symlink loop"));
  CHECK_THAT(error_of([] { OutputFile::resolve("", "--csv"); }),
             Catch::Contains("expected a file name, got an empty one"));
}

TEST_CASE("two outputs naming one file are refused, however the path is spelt") {
  Folder folder;
  write_output(folder / "out.json", "x", "--json");
  fs::create_symlink("out.json", folder / "alias.json");
  fs::create_hard_link(folder / "out.json", folder / "hard.json");
  struct Case {
    std::string first, second;
  };
  for (const Case& c : {Case{folder / "new.csv", folder / "./new.csv"},
                        Case{folder / "out.json", folder / "alias.json"},
                        Case{folder / "out.json", folder / "hard.json"}, Case{"-", "-"}}) {
    INFO(c.first << " and " << c.second);
    OutputFiles outputs;
    outputs.add(c.first, "--csv");
    CHECK_THAT(error_of([&] { outputs.add(c.second, "--json"); }),
               Catch::Contains("is already the output of --csv"));
  }
  OutputFiles distinct;
  distinct.add(folder / "a.csv", "--csv");
  distinct.add(folder / "a.json", "--json");
  distinct.add("-", "--trace");
  CHECK(distinct.to_standard_output());
}
