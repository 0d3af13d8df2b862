// Strict reading of YAML: every key known, every value typed, every error located.
//
// Loaders walk a document with `Node` and `MapReader`. Any problem — an unknown or duplicate
// key, a wrong type, a missing key, an impossible value — raises InputError carrying
// file:line:col and the dotted key path, so no half-validated spec ever reaches the simulator.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "core/input_error.h"
#include "core/io/digest.h"
#include "core/yaml/override.h"

namespace epochcast::yaml {

class MapReader;

// Where a document's nodes came from: the file, and the paths that overrides replaced or created
// (path -> "--set PATH=VALUE"). Shared by the document and all its nodes.
struct Source {
  std::string file;
  std::map<std::string, SourceMark, std::less<>> overridden;

  // The mark of the longest overridden path that `path` is, or lies beneath (at a '.' or '['
  // boundary); nullopt when none.
  std::optional<SourceMark> override_mark(std::string_view path) const;
};

// A YAML node together with the source it came from and its dotted path from the root.
class Node {
 public:
  Node(YAML::Node node, std::shared_ptr<const Source> source, std::string path);
  Node(const Node&) = default;
  Node(Node&&) = default;
  // YAML::Node's own assignment writes through to the document (it replaces the value of the
  // node assigned to), so assigning one of ours must rebind instead.
  Node& operator=(const Node& other);
  Node& operator=(Node&& other);
  ~Node() = default;

  const std::string& path() const { return path_; }
  SourceMark mark() const;

  bool is_map() const { return node_.IsMap(); }
  bool is_sequence() const { return node_.IsSequence(); }
  bool is_scalar() const { return node_.IsScalar(); }
  bool is_null() const { return node_.IsNull(); }
  // A short description of what this node is, for "expected X, got Y" messages.
  std::string describe() const;

  // Typed reads. Each raises InputError naming this node when the value does not fit.
  std::string as_string() const;
  std::int64_t as_int() const;
  std::int64_t as_int_at_least(std::int64_t minimum) const;
  // An integer in [minimum, maximum], checked in 64 bits before any narrowing; the message
  // names the range ("expected an integer from 1 to 1,024, got 4,294,967,296").
  std::int64_t as_int_in(std::int64_t minimum, std::int64_t maximum) const;
  // as_int_in for values stored in an int (maximum must fit one).
  int as_int32_in(int minimum, int maximum) const;
  double as_number() const;  // any finite number
  // A finite number in [minimum, maximum].
  double as_number_in(double minimum, double maximum) const;
  double as_positive_number() const;  // finite and > 0
  double as_fraction() const;         // in [0, 1]
  bool as_bool() const;
  // One of `choices`; returns its index. Misspellings get a suggestion.
  std::size_t as_choice(std::span<const std::string_view> choices) const;
  // A sequence of at least `min_size` elements.
  std::vector<Node> items(std::size_t min_size = 0) const;
  std::vector<std::int64_t> as_int_list(std::int64_t minimum, std::size_t min_size = 1) const;
  // A list whose every element is in [minimum, maximum].
  std::vector<std::int64_t> as_int_list_in(std::int64_t minimum, std::int64_t maximum,
                                           std::size_t min_size = 1) const;

  // Raises InputError at this node with the given problem.
  [[noreturn]] void fail(const std::string& problem) const;

  const YAML::Node& raw() const { return node_; }
  // A node built in code (not parsed) has no position; this lends it one for error messages.
  Node& at(SourceMark mark) {
    mark_override_ = std::move(mark);
    return *this;
  }
  // The source this node shares with its document: pass it on to build related nodes.
  const std::shared_ptr<const Source>& source() const { return source_; }
  const std::shared_ptr<const Source>& file() const { return source_; }  // same as source()

 private:
  std::string plain_scalar(std::string_view expected) const;

  YAML::Node node_;
  std::shared_ptr<const Source> source_;
  std::string path_;
  std::optional<SourceMark> mark_override_;
};

// Reads one mapping. The constructor rejects non-maps, duplicate keys and keys outside
// `allowed` (with a "did you mean" suggestion), so a reader that exists is a clean map.
class MapReader {
 public:
  // A key the format no longer has here, and the path where its setting now lives.
  struct Moved {
    std::string_view key;
    std::string_view now;
  };
  // `moved`: keys refused with where they went, instead of as unknown.
  MapReader(const Node& map, std::initializer_list<std::string_view> allowed,
            std::initializer_list<Moved> moved = {});
  MapReader(const Node& map, std::span<const std::string_view> allowed,
            std::initializer_list<Moved> moved = {});

  bool has(std::string_view key) const;
  std::optional<Node> optional(std::string_view key) const;
  // A missing key is an error at the map's position naming the key.
  Node required(std::string_view key) const;

  const Node& node() const { return map_; }
  // The keys present, in file order.
  std::vector<std::string> keys() const;

 private:
  void check_keys() const;
  std::string child_path(std::string_view key) const;
  // Where the key `name` (node `key`) was given: the file, or the override that created it.
  SourceMark key_mark(const YAML::Node& key, std::string_view name) const;

  Node map_;
  std::vector<std::string_view> allowed_;
  std::vector<Moved> moved_;
};

// A whole YAML file. Loading rejects unreadable files, empty files, YAML syntax errors and
// files holding more than one document.
class Document {
 public:
  static Document load_file(const std::filesystem::path& path);
  // `name` stands in for the file name in error messages (e.g. "<command line>").
  static Document load_string(const std::string& text, const std::string& name);

  Node root() const { return Node(root_, source_, ""); }
  const std::string& file_name() const { return source_->file; }

  // Applies command-line overrides in order: each VALUE is parsed as YAML and put at its PATH,
  // creating missing maps on the way. Afterwards the overridden nodes, everything beneath them
  // and the keys created for them report "--set PATH=VALUE" as their mark. Raises InputError
  // naming the override when VALUE is not YAML, an intermediate node is not a mapping (or not a
  // list, for an index), or an index is out of range.
  void apply_overrides(const std::vector<Override>& overrides);

 private:
  Document(YAML::Node root, std::shared_ptr<Source> source)
      : root_(std::move(root)), source_(std::move(source)) {}

  void apply_override(const Override& item);

  YAML::Node root_;
  std::shared_ptr<Source> source_;
};

// The whole of an input file (at most kMaxDocumentBytes). Raises InputError naming the file
// when it is missing, a folder, unreadable or too large.
std::string read_input_file(const std::filesystem::path& path);

// What a command loaded: the bytes of every file read_input_file reads on this thread while the
// record is alive (the innermost one, when records nest), in the order read, as one digest. A
// later run loading the same inputs gets the same digest (epochcast merge checks the shards'
// scenario this way); file names are left out, so the same files found at another path (an
// installed data folder, another working folder) are the same inputs.
class InputRecord {
 public:
  InputRecord();
  ~InputRecord();
  InputRecord(const InputRecord&) = delete;
  InputRecord& operator=(const InputRecord&) = delete;

  std::string digest() const { return digest_.hex(); }
  int files() const { return files_; }
  // Called by read_input_file with each file's bytes.
  void add(std::string_view content);

 private:
  Digest digest_;
  int files_ = 0;
  InputRecord* outer_;
};

// An integer with thousands separators ("4,294,967,296"), for messages about ranges.
std::string readable_integer(std::int64_t value);

// `text` as a YAML double-quoted scalar, every control character escaped, so that any text
// (a name taken from a file name, a description) reads back exactly as it was and can never
// end the scalar or start a key.
std::string quoted(std::string_view text);

// Files larger than this are refused before parsing: no spec comes near it, and it bounds the
// memory a hostile input can make the parser take.
inline constexpr std::size_t kMaxDocumentBytes = 8u << 20;

}  // namespace epochcast::yaml
