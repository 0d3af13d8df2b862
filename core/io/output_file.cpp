// Output files: resolution of what a path names, whole-or-nothing replacement, streaming, and
// removal of temporaries when a signal ends the process.
#include "core/io/output_file.h"

#include <atomic>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/input_error.h"

namespace epochcast {

namespace {

[[noreturn]] void fail(const std::string& path, std::string_view option, const std::string& why) {
  throw InputError(SourceMark{path, 0, 0}, std::string(option), why);
}

// ---- temporaries a signal handler may have to remove ----------------------------------------
// A fixed table, so the handler reads it without locks or allocation: a slot is claimed
// (kFilling), its path written, then published (kReady); the handler unlinks ready slots only.
constexpr int kFree = 0, kFilling = 1, kReady = 2;
struct PendingTemporary {
  std::atomic<int> state{kFree};
  char path[PATH_MAX] = {};
};
PendingTemporary pending[16];
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler reads these");

// Returns the slot, or -1 when the table is full (the write still happens; a signal during it
// would leave its temporary behind).
int remember_temporary(const std::string& path) {
  if (path.size() >= PATH_MAX) return -1;
  for (int i = 0; i < static_cast<int>(std::size(pending)); ++i) {
    int expected = kFree;
    if (pending[i].state.compare_exchange_strong(expected, kFilling)) {
      std::memcpy(pending[i].path, path.c_str(), path.size() + 1);
      pending[i].state.store(kReady);
      return i;
    }
  }
  return -1;
}

void forget_temporary(int slot) {
  if (slot >= 0) pending[slot].state.store(kFree);
}

extern "C" void remove_temporaries_and_end(int signal_number) {
  for (PendingTemporary& slot : pending) {
    if (slot.state.load() == kReady) ::unlink(slot.path);
  }
  ::signal(signal_number, SIG_DFL);
  ::raise(signal_number);  // delivered with the default action once this handler returns
}

// ---- helpers ----------------------------------------------------------------------------------

// Writes all of `content` to `fd`, retrying partial writes and interruptions; errno on failure.
bool write_all(int fd, std::string_view content) {
  const char* data = content.data();
  std::size_t left = content.size();
  while (left > 0) {
    ssize_t n = ::write(fd, data, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += n;
    left -= static_cast<std::size_t>(n);
  }
  return true;
}

// The process's umask, read without changing it (umask(2) would race with other threads).
mode_t current_umask() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Umask:", 0) == 0)
      return static_cast<mode_t>(std::stoul(line.substr(6), nullptr, 8));
  }
  return 022;
}

std::filesystem::path folder_of(const std::filesystem::path& path) {
  return path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
}

void check_folder(const std::filesystem::path& target, const std::string& given,
                  std::string_view option) {
  std::filesystem::path folder = folder_of(target);
  struct stat st {};
  if (::stat(folder.c_str(), &st) != 0) {
    fail(given, option,
         fmt::format("cannot write the file: the folder '{}' does not exist", folder.string()));
  }
  if (!S_ISDIR(st.st_mode)) {
    fail(given, option,
         fmt::format("cannot write the file: '{}' is not a folder", folder.string()));
  }
  if (::access(folder.c_str(), W_OK | X_OK) != 0) {
    fail(given, option,
         fmt::format("cannot write the file: no permission to write in '{}'", folder.string()));
  }
}

// A path that does not exist (yet), reached perhaps through dangling symlinks: follows them by
// hand, since realpath() needs the final file to exist.
std::filesystem::path follow_dangling_links(const std::string& given, std::string_view option) {
  std::filesystem::path p = given;
  for (int hops = 0; hops < 40; ++hops) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) return p;  // the final, missing name
    if (!S_ISLNK(st.st_mode)) return p;
    std::error_code error;
    std::filesystem::path link = std::filesystem::read_symlink(p, error);
    if (error) fail(given, option, "cannot follow the symlink: " + error.message());
    p = link.is_absolute() ? link : folder_of(p) / link;
  }
  fail(given, option, "cannot write the file: more than 40 symlinks in a row (a loop?)");
}

[[noreturn]] void throw_broken_pipe(const OutputFile& out) {
  throw BrokenPipe(fmt::format(
      "{}: the reader of {} closed it before everything was written (a broken pipe); nothing "
      "else was wrong",
      out.option(),
      out.kind() == OutputFile::Kind::standard_output ? "standard output"
                                                      : fmt::format("'{}'", out.given())));
}

}  // namespace

// ---- OutputWriter -----------------------------------------------------------------------------

OutputWriter::OutputWriter(const OutputFile& file) : file_(file) {
  switch (file_.kind()) {
    case OutputFile::Kind::standard_output:
      std::cout.flush();
      std::fflush(stdout);
      fd_ = STDOUT_FILENO;
      return;
    case OutputFile::Kind::stream:
      // A FIFO opens here, when its content is ready: without a reader this waits for one.
      fd_ = ::open(file_.target().c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC);
      if (fd_ < 0) {
        fail(file_.given(), file_.option(),
             fmt::format("cannot write the file: {}", std::strerror(errno)));
      }
      return;
    case OutputFile::Kind::replace:
      break;
  }
  const std::filesystem::path& target = file_.target();
  temporary_ =
      (folder_of(target) / ("." + target.filename().string() + ".epochcast-XXXXXX")).string();
  // The temporary is created and entered in the handler's table with SIGINT and SIGTERM held
  // back: a signal between the two would end the process with a temporary the handler does not
  // know of. Held back, it arrives once the entry is ready.
  sigset_t stop_signals, previous;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, &previous);
  fd_ = ::mkostemp(temporary_.data(), O_CLOEXEC);  // not inherited by a child started meanwhile
  const int create_error = errno;
  slot_ = fd_ >= 0 ? remember_temporary(temporary_) : -1;
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  if (fd_ < 0) {
    temporary_.clear();
    fail(file_.given(), file_.option(),
         fmt::format("cannot write the file: {}", std::strerror(create_error)));
  }
  // The replacement keeps the mode of the file it replaces; a new file gets the usual 0666
  // less the umask (mkstemp makes 0600).
  struct stat st {};
  mode_t mode = ::stat(target.c_str(), &st) == 0 ? (st.st_mode & 07777) : (0666 & ~current_umask());
  if (::fchmod(fd_, mode) != 0) abandon(errno);
}

OutputWriter::~OutputWriter() {
  if (!committed_) discard();
}

void OutputWriter::discard() noexcept {
  if (file_.kind() == OutputFile::Kind::standard_output) return;
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!temporary_.empty()) {
    ::unlink(temporary_.c_str());
    forget_temporary(slot_);
    temporary_.clear();
  }
}

void OutputWriter::abandon(int error_number) {
  discard();
  committed_ = true;  // nothing left to discard
  if (error_number == EPIPE) throw_broken_pipe(file_);
  fail(file_.given(), file_.option(),
       fmt::format(
           "cannot write {}: {}",
           file_.kind() == OutputFile::Kind::standard_output ? "to standard output" : "the file",
           std::strerror(error_number)));
}

void OutputWriter::append(std::string_view piece) {
  if (committed_) throw std::logic_error("OutputWriter::append after commit");
  if (!write_all(fd_, piece)) abandon(errno);
}

void OutputWriter::commit() {
  if (committed_) throw std::logic_error("OutputWriter::commit twice");
  switch (file_.kind()) {
    case OutputFile::Kind::standard_output:
      committed_ = true;
      return;
    case OutputFile::Kind::stream: {
      const int closed = ::close(fd_);
      fd_ = -1;
      if (closed != 0) abandon(errno);
      committed_ = true;
      return;
    }
    case OutputFile::Kind::replace:
      break;
  }
  if (::fsync(fd_) != 0) abandon(errno);
  const int closed = ::close(fd_);
  fd_ = -1;
  if (closed != 0) abandon(errno);
  const std::filesystem::path& target = file_.target();
  if (::rename(temporary_.c_str(), target.c_str()) != 0) abandon(errno);
  forget_temporary(slot_);
  temporary_.clear();
  committed_ = true;
  // The rename itself is durable once the folder is synced.
  int folder = ::open(folder_of(target).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (folder >= 0) {
    ::fsync(folder);
    ::close(folder);
  }
}

OutputFile OutputFile::resolve(const std::string& path, std::string_view option) {
  OutputFile out;
  out.given_ = path;
  out.option_ = std::string(option);
  if (path.empty()) fail("<command line>", option, "expected a file name, got an empty one");
  if (path == "-") {
    out.kind_ = Kind::standard_output;
    return out;
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) fail(path, option, "cannot write the file: it is a folder");
    out.device_ = static_cast<std::uint64_t>(st.st_dev);
    out.inode_ = static_cast<std::uint64_t>(st.st_ino);
    if (S_ISREG(st.st_mode)) {
      out.kind_ = Kind::replace;
      std::error_code error;
      out.target_ = std::filesystem::canonical(path, error);
      if (error) fail(path, option, "cannot follow the path: " + error.message());
      check_folder(out.target_, path, option);
    } else {
      // FIFOs, terminals, /dev/null, sockets (and /dev/stdout's magic link to a pipe): opened
      // through the path as given.
      out.kind_ = Kind::stream;
      out.target_ = path;
    }
    return out;
  }
  if (errno == ELOOP) fail(path, option, "cannot write the file: a symlink loop");
  if (errno != ENOENT) {
    fail(path, option, fmt::format("cannot write the file: {}", std::strerror(errno)));
  }
  out.kind_ = Kind::replace;
  out.target_ = follow_dangling_links(path, option);
  check_folder(out.target_, path, option);
  std::error_code error;
  std::filesystem::path absolute =
      std::filesystem::weakly_canonical(std::filesystem::absolute(out.target_), error);
  if (!error) out.target_ = absolute;
  return out;
}

void OutputFile::write(std::string_view content) const {
  OutputWriter writer(*this);
  writer.append(content);
  writer.commit();
}

bool OutputFile::same_as(const OutputFile& other) const {
  if (kind_ == Kind::standard_output || other.kind_ == Kind::standard_output) {
    return kind_ == other.kind_;
  }
  if (inode_ != 0 && other.inode_ != 0) return device_ == other.device_ && inode_ == other.inode_;
  return target_ == other.target_;
}

OutputFile OutputFiles::add(const std::string& path, std::string_view option) {
  OutputFile file = OutputFile::resolve(path, option);
  for (const OutputFile& earlier : files_) {
    if (!file.same_as(earlier)) continue;
    std::string what = file.kind() == OutputFile::Kind::standard_output
                           ? std::string("standard output")
                           : fmt::format("'{}'", path);
    throw InputError(SourceMark{"<command line>", 0, 0}, std::string(option),
                     fmt::format("{} is already the output of {}: give each output its own file",
                                 what, earlier.option()));
  }
  files_.push_back(file);
  return file;
}

bool OutputFiles::to_standard_output() const {
  for (const OutputFile& f : files_) {
    if (f.kind() == OutputFile::Kind::standard_output) return true;
  }
  return false;
}

void write_output(const std::string& path, std::string_view content, std::string_view option) {
  OutputFile::resolve(path, option).write(content);
}

void remove_partial_outputs_on_signals() {
  for (int signal_number : {SIGINT, SIGTERM}) {
    struct sigaction action {};
    action.sa_handler = remove_temporaries_and_end;
    sigemptyset(&action.sa_mask);
    ::sigaction(signal_number, &action, nullptr);
  }
}

}  // namespace epochcast
