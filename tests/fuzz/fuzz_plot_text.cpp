// libFuzzer target for text from input files on its way into gnuplot scripts (scenario, model
// and profile names become plot titles). Each input is a name: gnuplot_quoted must give one
// string that reads back as gnuplot_visible(name) (control characters as spaces, bytes that are
// not UTF-8 as '?'), and, where gnuplot is installed, gnuplot itself must print exactly that
// for `print <quoted>`, in an empty folder that it must leave empty: no backquoted command,
// macro or escape of the name may run or change it. One gnuplot serves the whole campaign (a
// sentinel line after each name says where its answer ends); one that hangs, dies or answers
// otherwise is a finding. EPOCHCAST_FUZZ_VERBOSE=1 prints each name and what gnuplot printed.
#include <cerrno>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <unistd.h>

#include "core/format/gnuplot_text.h"
#include "tests/fuzz/fuzz_common.h"

extern char** environ;

namespace {

using epochcast::fuzz::finding;
using epochcast::fuzz::shell_quoted;

constexpr std::string_view kSentinel = "epochcast-fuzz-end-of-answer";

// A gnuplot reading commands from a pipe, printing to another, in a folder of its own.
class Gnuplot {
 public:
  Gnuplot() {
    folder_ =
        std::filesystem::temp_directory_path() / fmt::format("epochcast-fuzz-plot-{}", ::getpid());
    std::filesystem::remove_all(folder_);
    std::filesystem::create_directories(folder_);
    int commands[2], answers[2];
    if (::pipe2(commands, O_CLOEXEC) != 0 || ::pipe2(answers, O_CLOEXEC) != 0) return;
    posix_spawn_file_actions_t files;
    posix_spawn_file_actions_init(&files);
    posix_spawn_file_actions_adddup2(&files, commands[0], STDIN_FILENO);
    posix_spawn_file_actions_adddup2(&files, answers[1], STDOUT_FILENO);
    posix_spawn_file_actions_addopen(&files, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addchdir_np(&files, folder_.c_str());
    char program[] = "gnuplot";
    char* argv[] = {program, nullptr};
    const int spawned = ::posix_spawnp(&pid_, program, &files, nullptr, argv, environ);
    posix_spawn_file_actions_destroy(&files);
    ::close(commands[0]);
    ::close(answers[1]);
    if (spawned != 0) {
      ::close(commands[1]);
      ::close(answers[0]);
      return;
    }
    to_ = commands[1];
    from_ = answers[0];
    ::signal(SIGPIPE, SIG_IGN);  // a gnuplot that died shows as a failed write, not a signal
    running_ = send("set print '-'\n");
  }
  ~Gnuplot() {
    if (to_ >= 0) ::close(to_);
    if (from_ >= 0) ::close(from_);
    std::filesystem::remove_all(folder_);
  }
  bool running() const { return running_; }
  const std::filesystem::path& folder() const { return folder_; }

  // What gnuplot prints for `command` (one line), up to the sentinel; false when it died.
  bool ask(const std::string& command, std::string& answer) {
    if (!send(command + "\nprint '" + std::string(kSentinel) + "'\n")) return false;
    answer.clear();
    const std::string mark = std::string(kSentinel) + "\n";
    auto ended = [&] {
      const std::size_t n = answer.size(), m = mark.size();
      return n >= m && answer.compare(n - m, m, mark) == 0 && (n == m || answer[n - m - 1] == '\n');
    };
    while (!ended()) {
      char buffer[4096];
      const ssize_t n = ::read(from_, buffer, sizeof buffer);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      answer.append(buffer, static_cast<std::size_t>(n));
    }
    answer.resize(answer.size() - mark.size());
    return true;
  }

 private:
  bool send(const std::string& text) {
    std::size_t at = 0;
    while (at < text.size()) {
      const ssize_t n = ::write(to_, text.data() + at, text.size() - at);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      at += static_cast<std::size_t>(n);
    }
    return true;
  }

  std::filesystem::path folder_;
  pid_t pid_ = -1;
  int to_ = -1, from_ = -1;
  bool running_ = false;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string name(reinterpret_cast<const char*>(data), size);
  const std::string quoted = epochcast::gnuplot_quoted(name);
  const std::string expected = epochcast::gnuplot_visible(name);
  std::string read_back;
  if (!epochcast::gnuplot_unquoted(quoted, read_back) || read_back != expected) {
    finding(fmt::format("gnuplot_quoted({}) = {} does not read back as the name",
                        shell_quoted(name), shell_quoted(quoted)));
  }
  static Gnuplot gnuplot;  // none where gnuplot is not installed: the checks above only
  if (!gnuplot.running()) return 0;
  std::string answer;
  const bool answered = gnuplot.ask("print " + quoted, answer);
  if (epochcast::fuzz::verbose_requested()) {
    std::fprintf(stderr, "name %s: gnuplot printed %s\n", shell_quoted(name).c_str(),
                 shell_quoted(answer).c_str());
  }
  if (!answered || answer != expected + "\n") {
    finding(fmt::format("gnuplot read the title {} as {}{}", shell_quoted(quoted),
                        shell_quoted(answer), answered ? "" : " and stopped answering"));
  }
  for (const auto& entry : std::filesystem::directory_iterator(gnuplot.folder())) {
    finding(fmt::format("gnuplot left {} behind for the title {}", entry.path().string(),
                        shell_quoted(quoted)));
  }
  return 0;
}
