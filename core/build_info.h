// Which epochcast this is: the release version and the git revision it was built from, as
// `--version` prints them. Defined in a file the build generates (cmake/build_info.cmake).
#pragma once

#include <string>

namespace epochcast {

// "0.1.0".
const char* project_version();
// The git revision of the sources (`git describe --always --dirty`), or "unknown" when they
// were not a git checkout.
const char* git_revision();

// "<program> 0.1.0 (git 8a5538a1b2c3)": the first line of `--version`.
std::string version_line(const std::string& program);

}  // namespace epochcast
