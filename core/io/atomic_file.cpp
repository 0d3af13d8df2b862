// Temp-file-and-rename writes.
#include "core/io/atomic_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include <fmt/format.h>
#include <unistd.h>

#include "core/input_error.h"

namespace epochcast {

void write_file_atomically(const std::filesystem::path& path, std::string_view content,
                           std::string_view option) {
  auto fail = [&](const std::string& why) {
    throw InputError(SourceMark{path.string(), 0, 0}, std::string(option),
                     fmt::format("cannot write the file: {}", why));
  };
  std::filesystem::path temporary = path;
  temporary += fmt::format(".tmp.{}", ::getpid());
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) fail(std::strerror(errno));
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.flush();
    if (!out) {
      std::string why = std::strerror(errno);
      out.close();
      std::remove(temporary.c_str());
      fail(why);
    }
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error) {
    std::remove(temporary.c_str());
    fail(error.message());
  }
}

}  // namespace epochcast
