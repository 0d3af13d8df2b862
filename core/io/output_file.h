// Output files, written the one safe way for what the path names, decided before any work:
//  - a regular file or a new path: a temporary file in the same folder, written, fsynced and
//    renamed over the target, so a reader sees the old file or the whole new one, never half;
//    the temporary is removed on failure, and on SIGINT/SIGTERM once
//    `remove_partial_outputs_on_signals()` is installed;
//  - a symlink: followed to its final target (which may not exist yet), written as above there,
//    so the link stays a link;
//  - "-": standard output (the command then prints nothing else there);
//  - a FIFO, a character device or a socket: opened and streamed to, never replaced.
// A command registers all of its outputs in one `OutputFiles` before it starts working, which
// refuses two outputs naming the same file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace epochcast {

class OutputFile {
 public:
  enum class Kind { standard_output, replace, stream };

  // Decides how `path` (as given to `option`, e.g. "--json") is written. Raises InputError
  // naming the option when the path is empty, a directory, in a folder that does not exist or
  // cannot be written, or a symlink loop.
  static OutputFile resolve(const std::string& path, std::string_view option);

  Kind kind() const { return kind_; }
  const std::string& given() const { return given_; }
  // What is written: the symlink's final target for a link, else the path as given.
  const std::filesystem::path& target() const { return target_; }
  const std::string& option() const { return option_; }

  // Writes `content` whole (see the file comment). Raises InputError naming the path and the
  // option when it cannot, after removing its temporary.
  void write(std::string_view content) const;

  // Whether both name the same file (standard output, the same inode, or the same new path).
  bool same_as(const OutputFile& other) const;

 private:
  Kind kind_ = Kind::replace;
  std::string given_;
  std::string option_;
  std::filesystem::path target_;
  // Identity of an existing target (device, inode); 0/0 for a path that does not exist yet.
  std::uint64_t device_ = 0;
  std::uint64_t inode_ = 0;
};

// The outputs of one command.
class OutputFiles {
 public:
  // Resolves and records `path`; raises InputError naming both options when it names the same
  // file as an earlier output.
  OutputFile add(const std::string& path, std::string_view option);
  // True when some output is standard output (the command must then print elsewhere).
  bool to_standard_output() const;

 private:
  std::vector<OutputFile> files_;
};

// Raised when the reader of a pipe (a FIFO, or standard output piped to `head`) closed it
// before everything was written. Commands end with exit status 141 (128 + SIGPIPE, as a shell
// reports a process that SIGPIPE ended) and say which output it was.
class BrokenPipe : public std::runtime_error {
 public:
  explicit BrokenPipe(const std::string& what) : std::runtime_error(what) {}
};
inline constexpr int kBrokenPipeExit = 141;

// An output written in pieces as it is made (a long trace), with write()'s guarantees: a
// replaced file appears whole at commit() or not at all (the destructor of an uncommitted writer
// removes its temporary); a FIFO or standard output receives the pieces as they come. Failures
// raise InputError naming the path and option, or BrokenPipe.
class OutputWriter {
 public:
  explicit OutputWriter(const OutputFile& file);
  ~OutputWriter();
  OutputWriter(const OutputWriter&) = delete;
  OutputWriter& operator=(const OutputWriter&) = delete;

  void append(std::string_view piece);
  void commit();

 private:
  [[noreturn]] void abandon(int error_number);
  void discard() noexcept;

  OutputFile file_;
  int fd_ = -1;
  std::string temporary_;  // replace: the file being written beside the target
  int slot_ = -1;          // its entry in the signal handler's table
  bool committed_ = false;
};

// One output written at once: `OutputFile::resolve(path, option).write(content)`.
void write_output(const std::string& path, std::string_view content, std::string_view option);

// Installs SIGINT and SIGTERM handlers that remove the temporary files of writes in progress
// and then end the process by the same signal (exit status 130 / 143). For programs whose
// signals end them; a program that handles the signals itself (epochcast-run) finishes its
// write before it acts on the flag, and leaves nothing behind either.
void remove_partial_outputs_on_signals();

}  // namespace epochcast
