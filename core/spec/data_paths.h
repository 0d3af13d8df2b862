// Where bundled data lives (the model zoo, GPU catalogue, machines, scenarios, and schemas/, the
// JSON Schemas of the file formats that editors and tools read) and how a name written in a spec
// becomes a file.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "core/input_error.h"

namespace epochcast {

// $EPOCHCAST_DATA_DIR (if set) first, then the data installed beside the running binary:
// <prefix>/share/epochcast for <prefix>/bin/epochcast. A build tree mirrors that layout
// (build/share/epochcast links to the sources' topologies/ and scenarios/), so build/cli/epochcast
// finds its data the same way. Nothing depends on where the sources were when it was built.
std::vector<std::filesystem::path> data_directories();

// How data_directories() reads to a user: each folder and where it came from, one a line
// (`epochcast --version` prints it).
std::string describe_data_directories();

// Resolves a reference to a bundled file. `reference` is either a path (it contains a '/' or
// ends in ".yaml"), tried relative to `relative_to` and then to each data directory, or a bare
// name looked up as <data dir>/<subdir>/<name>.yaml. Raises InputError at `where` (naming `key`)
// when nothing matches, suggesting the closest bundled name.
std::filesystem::path resolve_data_file(std::string_view reference,
                                        const std::filesystem::path& relative_to,
                                        std::string_view subdir, const SourceMark& where,
                                        const std::string& key);

// The bundled names (file stems) in <data dir>/<subdir>, sorted.
std::vector<std::string> bundled_names(std::string_view subdir);

}  // namespace epochcast
