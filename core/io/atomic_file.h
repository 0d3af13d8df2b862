// Output files are written whole or not at all: into a temporary file beside the target, then
// renamed over it, so a crash or a full disk never leaves half a CSV behind.
#pragma once

#include <filesystem>
#include <string_view>

namespace epochcast {

// Raises InputError naming the path (and the option that gave it) when it cannot be written.
void write_file_atomically(const std::filesystem::path& path, std::string_view content,
                           std::string_view option = "");

}  // namespace epochcast
