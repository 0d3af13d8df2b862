// Strict YAML reading: typed scalars, exact key sets, located errors.
#include "core/yaml/strict_yaml.h"

#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>
#include <system_error>

#include <fmt/format.h>
#include <yaml-cpp/eventhandler.h>

namespace epochcast::yaml {

namespace {

SourceMark to_source_mark(const YAML::Mark& mark, const std::string& file) {
  if (mark.is_null() || mark.line < 0) return SourceMark{file, 0, 0};
  return SourceMark{file, mark.line + 1, mark.column + 1};
}

// yaml-cpp tags quoted scalars "!" and plain ones "?": a quoted "20" is a string, not a number.
bool is_quoted(const YAML::Node& node) {
  return node.Tag() == "!";
}

std::string shorten(std::string_view text) {
  constexpr std::size_t kLimit = 40;
  if (text.size() <= kLimit) return std::string(text);
  return std::string(text.substr(0, kLimit)) + "...";
}

}  // namespace

Node::Node(YAML::Node node, std::shared_ptr<const std::string> file, std::string path)
    : node_(std::move(node)), file_(std::move(file)), path_(std::move(path)) {}

SourceMark Node::mark() const {
  if (mark_override_) return *mark_override_;
  return to_source_mark(node_.Mark(), *file_);
}

std::string Node::describe() const {
  if (!node_.IsDefined() || node_.IsNull()) return "nothing";
  if (node_.IsMap()) return "a mapping";
  if (node_.IsSequence()) return "a list";
  const std::string& text = node_.Scalar();
  if (is_quoted(node_)) return fmt::format("the string \"{}\"", shorten(text));
  return fmt::format("'{}'", shorten(text));
}

void Node::fail(const std::string& problem) const {
  throw InputError(mark(), path_, problem);
}

std::string Node::plain_scalar(std::string_view expected) const {
  if (!node_.IsScalar() || is_quoted(node_)) {
    std::string hint = (node_.IsScalar() && is_quoted(node_)) ? " (remove the quotes)" : "";
    fail(fmt::format("expected {}, got {}{}", expected, describe(), hint));
  }
  return node_.Scalar();
}

std::string Node::as_string() const {
  if (!node_.IsScalar()) fail(fmt::format("expected a string, got {}", describe()));
  const std::string& text = node_.Scalar();
  if (text.empty()) fail("expected a non-empty string, got an empty one");
  return text;
}

std::int64_t Node::as_int() const {
  std::string text = plain_scalar("an integer");
  std::int64_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error == std::errc::result_out_of_range) fail(fmt::format("'{}' is out of range", text));
  if (error != std::errc() || end != text.data() + text.size()) {
    fail(fmt::format("expected an integer, got {}", describe()));
  }
  return value;
}

std::int64_t Node::as_int_at_least(std::int64_t minimum) const {
  std::int64_t value = as_int();
  if (value < minimum) {
    std::string what = minimum == 1   ? "a positive integer"
                       : minimum == 0 ? "a non-negative integer"
                                      : fmt::format("an integer of at least {}", minimum);
    fail(fmt::format("expected {}, got {}", what, value));
  }
  return value;
}

double Node::as_number() const {
  std::string text = plain_scalar("a number");
  double value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || !std::isfinite(value)) {
    fail(fmt::format("expected a finite number, got {}", describe()));
  }
  return value;
}

double Node::as_positive_number() const {
  double value = as_number();
  if (!(value > 0)) fail(fmt::format("expected a positive number, got {}", node_.Scalar()));
  return value;
}

double Node::as_fraction() const {
  double value = as_number();
  if (value < 0 || value > 1) {
    fail(fmt::format("expected a fraction between 0 and 1, got {}", node_.Scalar()));
  }
  return value;
}

bool Node::as_bool() const {
  std::string text = plain_scalar("true or false");
  if (text == "true") return true;
  if (text == "false") return false;
  fail(fmt::format("expected true or false, got {}", describe()));
}

std::size_t Node::as_choice(std::span<const std::string_view> choices) const {
  if (!node_.IsScalar()) {
    fail(fmt::format("expected one of {}, got {}", join_alternatives(choices), describe()));
  }
  const std::string& text = node_.Scalar();
  for (std::size_t i = 0; i < choices.size(); ++i) {
    if (choices[i] == text) return i;
  }
  fail(fmt::format("expected one of {}, got {}{}", join_alternatives(choices), describe(),
                   did_you_mean(text, choices)));
}

std::vector<Node> Node::items(std::size_t min_size) const {
  if (!node_.IsSequence()) fail(fmt::format("expected a list, got {}", describe()));
  if (node_.size() < min_size) {
    fail(min_size == 1 ? std::string("expected a non-empty list")
                       : fmt::format("expected a list of at least {} items", min_size));
  }
  std::vector<Node> out;
  out.reserve(node_.size());
  std::size_t index = 0;
  for (const YAML::Node& item : node_) {
    out.emplace_back(item, file_, fmt::format("{}[{}]", path_, index++));
  }
  return out;
}

std::vector<std::int64_t> Node::as_int_list(std::int64_t minimum, std::size_t min_size) const {
  std::vector<std::int64_t> out;
  for (const Node& item : items(min_size))
    out.push_back(item.as_int_at_least(minimum));
  return out;
}

MapReader::MapReader(const Node& map, std::initializer_list<std::string_view> allowed)
    : map_(map), allowed_(allowed) {
  check_keys();
}

MapReader::MapReader(const Node& map, std::span<const std::string_view> allowed)
    : map_(map), allowed_(allowed.begin(), allowed.end()) {
  check_keys();
}

void MapReader::check_keys() const {
  if (!map_.is_map()) map_.fail(fmt::format("expected a mapping, got {}", map_.describe()));
  std::vector<std::pair<std::string, int>> seen;  // key, line
  for (auto it = map_.raw().begin(); it != map_.raw().end(); ++it) {
    Node key(it->first, map_.file(), map_.path());
    if (!it->first.IsScalar())
      key.fail(fmt::format("a key must be a plain name, got {}", key.describe()));
    const std::string& name = it->first.Scalar();
    for (const auto& [previous, line] : seen) {
      if (previous == name) {
        throw InputError(key.mark(), child_path(name),
                         fmt::format("duplicate key (first given on line {})", line));
      }
    }
    seen.emplace_back(name, key.mark().line);
    bool known = false;
    for (std::string_view candidate : allowed_)
      known = known || candidate == name;
    if (!known) {
      throw InputError(key.mark(), child_path(name),
                       fmt::format("unknown key{}; expected one of {}",
                                   did_you_mean(name, allowed_), join_alternatives(allowed_)));
    }
  }
}

std::string MapReader::child_path(std::string_view key) const {
  return map_.path().empty() ? std::string(key) : fmt::format("{}.{}", map_.path(), key);
}

bool MapReader::has(std::string_view key) const {
  return static_cast<bool>(map_.raw()[std::string(key)]);
}

std::optional<Node> MapReader::optional(std::string_view key) const {
  YAML::Node child = map_.raw()[std::string(key)];
  if (!child) return std::nullopt;
  // `key:` with no value: a strict reader treats it as a mistake, pointing at the key itself.
  if (child.IsNull()) {
    for (auto it = map_.raw().begin(); it != map_.raw().end(); ++it) {
      if (it->first.Scalar() == key) {
        throw InputError(to_source_mark(it->first.Mark(), *map_.file()), child_path(key),
                         "has no value");
      }
    }
  }
  Node node(child, map_.file(), child_path(key));
  return node;
}

Node MapReader::required(std::string_view key) const {
  std::optional<Node> node = optional(key);
  if (!node) {
    throw InputError(map_.mark(), child_path(key), "missing required key");
  }
  return *node;
}

std::vector<std::string> MapReader::keys() const {
  std::vector<std::string> out;
  for (auto it = map_.raw().begin(); it != map_.raw().end(); ++it)
    out.push_back(it->first.Scalar());
  return out;
}

namespace {

// Receives parser events and ignores them: used only to count documents.
class IgnoreEvents : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

// Counts the documents in `text`, stopping at `limit`. YAML::LoadAll is not used because on some
// malformed input (a top-level line starting with ',') yaml-cpp 0.7 yields empty documents
// without end, which LoadAll collects until memory runs out.
int count_documents(const std::string& text, int limit) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  IgnoreEvents ignore;
  int documents = 0;
  while (documents < limit && parser.HandleNextDocument(ignore))
    ++documents;
  return documents;
}

Document parse(const std::string& text, std::shared_ptr<const std::string> file,
               Document (*make)(YAML::Node, std::shared_ptr<const std::string>)) {
  YAML::Node root;
  int documents = 0;
  try {
    root = YAML::Load(text);
    documents = count_documents(text, 2);
  } catch (const YAML::Exception& error) {
    throw InputError(to_source_mark(error.mark, *file), "",
                     fmt::format("not valid YAML: {}", error.msg));
  } catch (const std::exception& error) {
    throw InputError(SourceMark{*file, 0, 0}, "", fmt::format("not valid YAML: {}", error.what()));
  }
  if (documents > 1) {
    throw InputError(SourceMark{*file, 0, 0}, "",
                     "the file holds more than one YAML document (a '---' separator, or a line "
                     "the parser reads as the start of another); expected one");
  }
  if (documents == 0 || root.IsNull()) {
    throw InputError(SourceMark{*file, 0, 0}, "", "the file holds no YAML content");
  }
  return make(root, std::move(file));
}

}  // namespace

Document Document::load_string(const std::string& text, const std::string& name) {
  auto file = std::make_shared<const std::string>(name);
  if (text.size() > kMaxDocumentBytes) {
    throw InputError(
        SourceMark{name, 0, 0}, "",
        fmt::format("input is {} bytes; the limit is {}", text.size(), kMaxDocumentBytes));
  }
  return parse(text, file, [](YAML::Node root, std::shared_ptr<const std::string> f) {
    return Document(std::move(root), std::move(f));
  });
}

Document Document::load_file(const std::filesystem::path& path) {
  std::string name = path.string();
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) {
    throw InputError(SourceMark{name, 0, 0}, "", "is a directory, not a YAML file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw InputError(SourceMark{name, 0, 0}, "",
                     std::filesystem::exists(path, error) ? "cannot be read (permission denied?)"
                                                          : "no such file");
  }
  std::ostringstream content;
  content << in.rdbuf();
  if (in.bad()) throw InputError(SourceMark{name, 0, 0}, "", "read error");
  return load_string(content.str(), name);
}

}  // namespace epochcast::yaml
