// Finding bundled data files by name or path.
#include "core/spec/data_paths.h"

#include <algorithm>
#include <cstdlib>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

// The installed data folder relative to the installed binary's folder, as CMake's install
// layout puts them (GNUInstallDirs: bin/ and share/epochcast/ under one prefix).
#ifndef EPOCHCAST_DATA_RELATIVE_TO_BINARY
#error "EPOCHCAST_DATA_RELATIVE_TO_BINARY must be defined by the build"
#endif

namespace epochcast {

namespace fs = std::filesystem;

namespace {

// The folders beside the running binary that hold bundled data: the installed layout's, then a
// build tree's (every binary of a build sits one folder below build/, beside build/share).
std::vector<fs::path> beside_binary() {
  std::error_code error;
  const fs::path self = fs::read_symlink("/proc/self/exe", error);
  if (error) return {};
  std::vector<fs::path> found;
  for (const char* relative : {EPOCHCAST_DATA_RELATIVE_TO_BINARY, "../share/epochcast"}) {
    fs::path dir = (self.parent_path() / relative).lexically_normal();
    if (std::find(found.begin(), found.end(), dir) == found.end() && fs::is_directory(dir, error)) {
      found.push_back(dir);
    }
  }
  return found;
}

const char* data_dir_from_environment() {
  const char* env = std::getenv("EPOCHCAST_DATA_DIR");
  return env != nullptr && *env != '\0' ? env : nullptr;
}

}  // namespace

std::vector<fs::path> data_directories() {
  std::vector<fs::path> dirs;
  if (const char* env = data_dir_from_environment()) dirs.emplace_back(env);
  for (fs::path& dir : beside_binary())
    dirs.push_back(std::move(dir));
  return dirs;
}

std::string describe_data_directories() {
  std::string text;
  if (const char* env = data_dir_from_environment()) {
    text += fmt::format("data: {} ($EPOCHCAST_DATA_DIR)\n", env);
  }
  for (const fs::path& dir : beside_binary()) {
    text += fmt::format("data: {}\n", dir.string());
  }
  if (text.empty()) {
    text =
        "data: none found beside this binary (../share/epochcast); set EPOCHCAST_DATA_DIR to "
        "the folder holding topologies/ and scenarios/\n";
  }
  return text;
}

std::vector<std::string> bundled_names(std::string_view subdir) {
  std::set<std::string> names;
  for (const fs::path& dir : data_directories()) {
    std::error_code error;
    for (fs::directory_iterator it(dir / subdir, error), end; !error && it != end;
         it.increment(error)) {
      // The GPU catalogue lives beside the machines but is not one.
      if (subdir == "topologies" && it->path().stem() == "gpus") continue;
      if (it->path().extension() == ".yaml") names.insert(it->path().stem().string());
      // Scenarios sit in folders of their own (seed-001/linear); the model zoo beside them
      // (scenarios/models) is not a scenario.
      std::error_code inner;
      if (subdir == "scenarios" && it->is_directory(inner) && it->path().filename() != "models") {
        for (fs::directory_iterator file(it->path(), inner); !inner && file != end;
             file.increment(inner)) {
          if (file->path().extension() == ".yaml") {
            names.insert((it->path().filename() / file->path().stem()).string());
          }
        }
      }
    }
  }
  return {names.begin(), names.end()};
}

fs::path resolve_data_file(std::string_view reference, const fs::path& relative_to,
                           std::string_view subdir, const SourceMark& where,
                           const std::string& key) {
  std::error_code error;
  std::string ref(reference);
  bool is_path = ref.find('/') != std::string::npos || fs::path(ref).extension() == ".yaml";
  std::vector<fs::path> candidates;
  if (is_path) {
    fs::path given(ref);
    // A bundled name with its folder (seed-001/linear) may leave out ".yaml".
    std::vector<fs::path> spellings = {given};
    if (given.extension().empty()) spellings.push_back(fs::path(ref + ".yaml"));
    for (const fs::path& spelling : spellings) {
      if (spelling.is_absolute()) {
        candidates.push_back(spelling);
        continue;
      }
      candidates.push_back(relative_to / spelling);
      for (const fs::path& dir : data_directories()) {
        candidates.push_back(dir / spelling);
        candidates.push_back(dir / subdir / spelling);
      }
    }
  } else {
    for (const fs::path& dir : data_directories()) {
      candidates.push_back(dir / subdir / (ref + ".yaml"));
    }
  }
  for (const fs::path& candidate : candidates) {
    if (fs::is_regular_file(candidate, error)) return candidate.lexically_normal();
  }
  std::vector<std::string> names = bundled_names(subdir);
  std::vector<std::string_view> views(names.begin(), names.end());
  const bool named_with_folder = is_path && fs::path(ref).extension().empty();
  std::string stem = named_with_folder ? ref : fs::path(ref).stem().string();
  std::string suggestion = did_you_mean(stem, views);
  if (data_directories().empty()) {
    throw InputError(where, key,
                     fmt::format("{} not found, and this epochcast has no bundled data beside it "
                                 "(../share/epochcast, as `cmake --install` lays it out): set "
                                 "EPOCHCAST_DATA_DIR to the folder holding topologies/ and "
                                 "scenarios/",
                                 is_path ? "file '" + ref + "'" : "'" + ref + "'"));
  }
  throw InputError(where, key,
                   is_path ? fmt::format("file '{}' not found{}", ref, suggestion)
                           : fmt::format("no file '{}' in {}/{}; bundled: {}", ref + ".yaml",
                                         subdir, suggestion, fmt::join(names, ", ")));
}

}  // namespace epochcast
