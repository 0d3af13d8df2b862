// Strict YAML reading: typed scalars, exact key sets, located errors.
#include "core/yaml/strict_yaml.h"

#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>
#include <system_error>

#include <fmt/format.h>
#include <yaml-cpp/eventhandler.h>

#include "core/format/utf8.h"

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

std::optional<SourceMark> Source::override_mark(std::string_view path) const {
  if (overridden.empty()) return std::nullopt;
  // `path` itself, then each ancestor: "a.b[2].c" -> "a.b[2]" -> "a.b" -> "a".
  while (!path.empty()) {
    if (auto found = overridden.find(path); found != overridden.end()) return found->second;
    std::size_t cut = path.find_last_of(".[");
    if (cut == std::string_view::npos) break;
    path = path.substr(0, cut);
  }
  return std::nullopt;
}

Node::Node(YAML::Node node, std::shared_ptr<const Source> source, std::string path)
    : node_(std::move(node)), source_(std::move(source)), path_(std::move(path)) {}

Node& Node::operator=(const Node& other) {
  if (this == &other) return *this;
  node_.reset(other.node_);
  source_ = other.source_;
  path_ = other.path_;
  mark_override_ = other.mark_override_;
  return *this;
}

Node& Node::operator=(Node&& other) {
  if (this == &other) return *this;
  node_.reset(other.node_);
  source_ = std::move(other.source_);
  path_ = std::move(other.path_);
  mark_override_ = std::move(other.mark_override_);
  return *this;
}

SourceMark Node::mark() const {
  if (mark_override_) return *mark_override_;
  // Parsed nodes carry their position; nodes built in code (or by an override) have none.
  if (!node_.Mark().is_null()) return to_source_mark(node_.Mark(), source_->file);
  if (std::optional<SourceMark> given = source_->override_mark(path_)) return *given;
  return SourceMark{source_->file, 0, 0};
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
  // Names and texts reach JSON outputs, tables and plots, which all need text.
  if (const std::size_t at = first_non_utf8(text); at != std::string::npos) {
    fail(
        fmt::format("expected UTF-8 text, got the byte 0x{:02x} at character {} (save the file "
                    "as UTF-8)",
                    static_cast<unsigned char>(text[at]), at + 1));
  }
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

std::int64_t Node::as_int_in(std::int64_t minimum, std::int64_t maximum) const {
  std::string text = plain_scalar("an integer");
  std::int64_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  bool whole = end == text.data() + text.size();
  if (error == std::errc::result_out_of_range ||
      (error == std::errc() && whole && (value < minimum || value > maximum))) {
    fail(fmt::format("expected an integer from {} to {}, got {}", readable_integer(minimum),
                     readable_integer(maximum),
                     error == std::errc() ? readable_integer(value) : text));
  }
  if (error != std::errc() || !whole) {
    fail(fmt::format("expected an integer from {} to {}, got {}", readable_integer(minimum),
                     readable_integer(maximum), describe()));
  }
  return value;
}

int Node::as_int32_in(int minimum, int maximum) const {
  return static_cast<int>(as_int_in(minimum, maximum));
}

double Node::as_number_in(double minimum, double maximum) const {
  double value = as_number();
  if (value < minimum || value > maximum) {
    fail(fmt::format("expected a number from {:g} to {:g}, got {}", minimum, maximum,
                     node_.Scalar()));
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
    out.emplace_back(item, source_, fmt::format("{}[{}]", path_, index++));
  }
  return out;
}

std::vector<std::int64_t> Node::as_int_list(std::int64_t minimum, std::size_t min_size) const {
  std::vector<std::int64_t> out;
  for (const Node& item : items(min_size))
    out.push_back(item.as_int_at_least(minimum));
  return out;
}

std::vector<std::int64_t> Node::as_int_list_in(std::int64_t minimum, std::int64_t maximum,
                                               std::size_t min_size) const {
  std::vector<std::int64_t> out;
  for (const Node& item : items(min_size))
    out.push_back(item.as_int_in(minimum, maximum));
  return out;
}

std::string readable_integer(std::int64_t value) {
  std::string digits = std::to_string(value);
  std::size_t first = value < 0 ? 1 : 0;
  for (std::size_t i = digits.size(); i > first + 3; i -= 3)
    digits.insert(i - 3, ",");
  return digits;
}

MapReader::MapReader(const Node& map, std::initializer_list<std::string_view> allowed,
                     std::initializer_list<Moved> moved)
    : map_(map), allowed_(allowed), moved_(moved) {
  check_keys();
}

MapReader::MapReader(const Node& map, std::span<const std::string_view> allowed,
                     std::initializer_list<Moved> moved)
    : map_(map), allowed_(allowed.begin(), allowed.end()), moved_(moved) {
  check_keys();
}

void MapReader::check_keys() const {
  if (!map_.is_map()) map_.fail(fmt::format("expected a mapping, got {}", map_.describe()));
  std::vector<std::pair<std::string, int>> seen;  // key, line
  for (auto it = map_.raw().begin(); it != map_.raw().end(); ++it) {
    if (!it->first.IsScalar()) {
      Node key(it->first, map_.source(), map_.path());
      key.fail(fmt::format("a key must be a plain name, got {}", key.describe()));
    }
    const std::string& name = it->first.Scalar();
    SourceMark mark = key_mark(it->first, name);
    for (const auto& [previous, line] : seen) {
      if (previous == name) {
        throw InputError(mark, child_path(name),
                         line > 0 ? fmt::format("duplicate key (first given on line {})", line)
                                  : std::string("duplicate key"));
      }
    }
    seen.emplace_back(name, mark.line);
    bool known = false;
    for (std::string_view candidate : allowed_)
      known = known || candidate == name;
    for (const Moved& m : moved_) {
      if (!known && m.key == name) {
        throw InputError(mark, child_path(name),
                         fmt::format("this setting has moved: write it as {}", m.now));
      }
    }
    if (!known) {
      throw InputError(mark, child_path(name),
                       fmt::format("unknown key{}; expected one of {}",
                                   did_you_mean(name, allowed_), join_alternatives(allowed_)));
    }
  }
}

std::string MapReader::child_path(std::string_view key) const {
  return map_.path().empty() ? std::string(key) : fmt::format("{}.{}", map_.path(), key);
}

SourceMark MapReader::key_mark(const YAML::Node& key, std::string_view name) const {
  // A key has the path of the value it introduces, so one an override created finds its mark.
  return Node(key, map_.source(), child_path(name)).mark();
}

bool MapReader::has(std::string_view key) const {
  return static_cast<bool>(map_.raw()[std::string(key)]);
}

std::optional<Node> MapReader::optional(std::string_view key) const {
  YAML::Node child = map_.raw()[std::string(key)];
  if (!child) return std::nullopt;
  // `key:` with no value: a strict reader treats it as a mistake, pointing at the key itself.
  // An override that set an empty value is named rather than the key it replaced the value of.
  if (child.IsNull()) {
    if (child.Mark().is_null()) {
      if (std::optional<SourceMark> given = map_.source()->override_mark(child_path(key))) {
        throw InputError(*given, child_path(key), "has no value");
      }
    }
    for (auto it = map_.raw().begin(); it != map_.raw().end(); ++it) {
      if (it->first.Scalar() == key) {
        throw InputError(key_mark(it->first, key), child_path(key), "has no value");
      }
    }
  }
  Node node(child, map_.source(), child_path(key));
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

Document parse(const std::string& text, std::shared_ptr<Source> source,
               Document (*make)(YAML::Node, std::shared_ptr<Source>)) {
  const std::string& file = source->file;
  YAML::Node root;
  int documents = 0;
  try {
    root = YAML::Load(text);
    documents = count_documents(text, 2);
  } catch (const YAML::Exception& error) {
    throw InputError(to_source_mark(error.mark, file), "",
                     fmt::format("not valid YAML: {}", error.msg));
  } catch (const std::exception& error) {
    throw InputError(SourceMark{file, 0, 0}, "", fmt::format("not valid YAML: {}", error.what()));
  }
  if (documents > 1) {
    throw InputError(SourceMark{file, 0, 0}, "",
                     "the file holds more than one YAML document (a '---' separator, or a line "
                     "the parser reads as the start of another); expected one");
  }
  if (documents == 0 || root.IsNull()) {
    throw InputError(SourceMark{file, 0, 0}, "", "the file holds no YAML content");
  }
  return make(root, std::move(source));
}

}  // namespace

Document Document::load_string(const std::string& text, const std::string& name) {
  auto source = std::make_shared<Source>(Source{name, {}});
  if (text.size() > kMaxDocumentBytes) {
    throw InputError(
        SourceMark{name, 0, 0}, "",
        fmt::format("input is {} bytes; the limit is {}", text.size(), kMaxDocumentBytes));
  }
  return parse(text, std::move(source), [](YAML::Node root, std::shared_ptr<Source> s) {
    return Document(std::move(root), std::move(s));
  });
}

namespace {

thread_local InputRecord* current_record = nullptr;

}  // namespace

InputRecord::InputRecord() : outer_(current_record) {
  current_record = this;
}

InputRecord::~InputRecord() {
  current_record = outer_;
}

void InputRecord::add(std::string_view content) {
  digest_.add(content);
  ++files_;
}

std::string read_input_file(const std::filesystem::path& path) {
  std::string name = path.string();
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) {
    throw InputError(SourceMark{name, 0, 0}, "", "is a directory, not a file to read");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw InputError(SourceMark{name, 0, 0}, "",
                     std::filesystem::exists(path, error) ? "cannot be read (permission denied?)"
                                                          : "no such file");
  }
  // Read at most one byte past the limit, so an endless input (/dev/zero, a FIFO that never
  // closes its data) is refused instead of filling memory.
  std::string content(kMaxDocumentBytes + 1, '\0');
  in.read(content.data(), static_cast<std::streamsize>(content.size()));
  if (in.bad()) throw InputError(SourceMark{name, 0, 0}, "", "read error");
  content.resize(static_cast<std::size_t>(in.gcount()));
  if (content.size() > kMaxDocumentBytes) {
    throw InputError(SourceMark{name, 0, 0}, "",
                     fmt::format("the file is larger than the limit of {} bytes",
                                 readable_integer(static_cast<std::int64_t>(kMaxDocumentBytes))));
  }
  if (current_record != nullptr) current_record->add(content);
  return content;
}

Document Document::load_file(const std::filesystem::path& path) {
  return load_string(read_input_file(path), path.string());
}

namespace {

// One step of an override path: a map key or a list index, with the path up to and including it.
struct Step {
  bool is_index = false;
  std::string key;
  std::size_t index = 0;
  std::string path;
};

// `where` is how the user wrote the override ("--set PATH=VALUE", or an option like --gpus).
[[noreturn]] void override_error(std::string_view where, std::string key, std::string problem) {
  throw InputError(SourceMark{std::string(where), 0, 0}, std::move(key), std::move(problem));
}

// "a.b[2].c" -> a, b, [2], c. `text` is the whole override, for error messages.
std::vector<Step> parse_path(std::string_view path, std::string_view text) {
  if (path.empty()) override_error(text, "", "expected PATH=VALUE, got an empty path");
  std::vector<Step> steps;
  std::string so_far;
  std::size_t start = 0;
  while (true) {
    std::size_t dot = path.find('.', start);
    std::string_view segment =
        path.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (segment.empty()) {
      override_error(text, "", fmt::format("the path '{}' has an empty segment", path));
    }
    std::size_t bracket = segment.find('[');
    std::string_view name = segment.substr(0, bracket);
    if (name.empty() || name.find(']') != std::string_view::npos) {
      override_error(text, "",
                     fmt::format("malformed path segment '{}'; expected a key, optionally "
                                 "followed by list indices as in name[3]",
                                 segment));
    }
    so_far += so_far.empty() ? std::string(name) : fmt::format(".{}", name);
    steps.push_back(Step{false, std::string(name), 0, so_far});
    std::string_view rest = bracket == std::string_view::npos ? "" : segment.substr(bracket);
    while (!rest.empty()) {
      std::size_t close = rest.find(']');
      std::string_view digits =
          close == std::string_view::npos ? std::string_view() : rest.substr(1, close - 1);
      std::size_t index = 0;
      auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
      if (rest[0] != '[' || digits.empty() || error != std::errc() ||
          end != digits.data() + digits.size()) {
        override_error(text, "",
                       fmt::format("malformed list index in '{}'; expected name[N] with N a "
                                   "non-negative integer",
                                   segment));
      }
      so_far += fmt::format("[{}]", index);
      steps.push_back(Step{true, "", index, so_far});
      rest = rest.substr(close + 1);
    }
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return steps;
}

// A copy of `node` built in code, so it carries no position: an override's value is parsed from
// its own little text, whose line and column mean nothing in the document. Tags are kept, so a
// quoted "7" stays a string. `budget` bounds the nodes copied (aliases can make a short text
// expand enormously, or refer to itself).
YAML::Node without_marks(const YAML::Node& node, std::size_t& budget, int depth,
                         std::string_view text) {
  constexpr int kMaxDepth = 64;
  if (budget == 0 || depth > kMaxDepth) {
    override_error(text, "", "the value is too large or nested too deeply");
  }
  --budget;
  switch (node.Type()) {
    case YAML::NodeType::Scalar: {
      YAML::Node out(node.Scalar());
      out.SetTag(node.Tag());
      return out;
    }
    case YAML::NodeType::Sequence: {
      YAML::Node out(YAML::NodeType::Sequence);
      for (const YAML::Node& item : node)
        out.push_back(without_marks(item, budget, depth + 1, text));
      return out;
    }
    case YAML::NodeType::Map: {
      YAML::Node out(YAML::NodeType::Map);
      for (auto it = node.begin(); it != node.end(); ++it) {
        out.force_insert(without_marks(it->first, budget, depth + 1, text),
                         without_marks(it->second, budget, depth + 1, text));
      }
      return out;
    }
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      break;
  }
  return YAML::Node(YAML::NodeType::Null);
}

// Records that `path`, and everything beneath it, now comes from the override marked `mark`;
// what earlier overrides recorded beneath it has been replaced.
void record(Source& source, const std::string& path, const SourceMark& mark) {
  auto it = source.overridden.lower_bound(path);
  while (it != source.overridden.end() && it->first.starts_with(path)) {
    bool beneath = it->first.size() == path.size() || it->first[path.size()] == '.' ||
                   it->first[path.size()] == '[';
    it = beneath ? source.overridden.erase(it) : std::next(it);
  }
  source.overridden.emplace(path, mark);
}

}  // namespace

std::string Override::where() const {
  const std::string written = origin.empty() ? "--set " + text() : origin;
  constexpr std::size_t kHead = 60, kTail = 16;
  if (written.size() <= kHead + kTail + 5) return written;
  // Cut between UTF-8 characters, never inside one.
  auto continuation = [&](std::size_t i) {
    return (static_cast<unsigned char>(written[i]) & 0xC0) == 0x80;
  };
  std::size_t head = kHead, tail = written.size() - kTail;
  while (head > 0 && continuation(head))
    --head;
  while (tail < written.size() && continuation(tail))
    ++tail;
  return written.substr(0, head) + " ... " + written.substr(tail);
}

Override parse_override(std::string_view text) {
  const std::string where = "--set " + std::string(text);
  std::size_t equals = text.find('=');
  if (equals == std::string_view::npos) {
    override_error(where, "",
                   "expected PATH=VALUE (e.g. training.precision=fp32); there is no '='");
  }
  Override out{std::string(text.substr(0, equals)), std::string(text.substr(equals + 1)), ""};
  parse_path(out.path, where);  // rejects malformed paths now, before any file is read
  return out;
}

void Document::apply_overrides(const std::vector<Override>& overrides) {
  for (const Override& item : overrides)
    apply_override(item);
}

void Document::apply_override(const Override& item) {
  const std::string text = item.where();
  const std::vector<Step> steps = parse_path(item.path, text);
  const std::string& path = steps.back().path;

  YAML::Node parsed;
  int documents = 0;
  try {
    parsed = YAML::Load(item.value);
    documents = count_documents(item.value, 2);
  } catch (const YAML::Exception& error) {
    override_error(text, path, fmt::format("the value is not valid YAML: {}", error.msg));
  } catch (const std::exception& error) {
    override_error(text, path, fmt::format("the value is not valid YAML: {}", error.what()));
  }
  if (documents > 1) override_error(text, path, "the value holds more than one YAML document");
  std::size_t budget = 100'000;
  YAML::Node value = without_marks(parsed, budget, 0, text);

  // Walk down, creating missing (or empty) maps on the way; `current` is the node at `where`.
  if (!root_.IsMap()) {
    override_error(text, "", fmt::format("cannot set {}: the document is not a mapping", path));
  }
  YAML::Node current = root_;
  std::string where;
  std::vector<std::string> created;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const Step& step = steps[i];
    const bool last = i + 1 == steps.size();
    const YAML::Node& here = current;  // const access never adds keys
    if (step.is_index) {
      if (!here.IsSequence()) {
        override_error(text, "", fmt::format("cannot set {}: {} is not a list", path, where));
      }
      if (step.index >= here.size()) {
        override_error(text, "",
                       fmt::format("cannot set {}: index {} is out of range ({} has {} items)",
                                   path, step.index, where, here.size()));
      }
      if (last) {
        current[step.index] = value;
      } else {
        current.reset(here[step.index]);
      }
    } else {
      if (!here.IsMap()) {
        override_error(text, "", fmt::format("cannot set {}: {} is not a mapping", path, where));
      }
      if (last) {
        current[step.key] = value;
      } else {
        YAML::Node child = here[step.key];
        if (!child.IsDefined() || child.IsNull()) {
          if (steps[i + 1].is_index) {
            override_error(text, "",
                           fmt::format("cannot set {}: {} is not a list", path, step.path));
          }
          current[step.key] = YAML::Node(YAML::NodeType::Map);
          created.push_back(step.path);
          current.reset(here[step.key]);
        } else {
          current.reset(child);
        }
      }
    }
    where = step.path;
  }

  SourceMark mark{text, 0, 0};
  for (const std::string& made : created)
    record(*source_, made, mark);
  record(*source_, path, mark);
}

std::string quoted(std::string_view text) {
  // A raw newline inside the quotes would fold into a space: it is escaped too.
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          out += fmt::format("\\x{:02X}", static_cast<unsigned char>(c));
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

}  // namespace epochcast::yaml
