// Shards of a sweep and their files (sweep_shard.h).
#include "sim/predict/sweep_shard.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <exception>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "core/input_error.h"
#include "core/io/digest.h"

namespace epochcast::sim {

namespace {

constexpr std::string_view kBase64 =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string base64(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (std::size_t at = 0; at < bytes.size(); at += 3) {
    const std::size_t n = std::min<std::size_t>(3, bytes.size() - at);
    std::uint32_t group = 0;
    for (std::size_t i = 0; i < 3; ++i) {
      group = group << 8 | (i < n ? static_cast<unsigned char>(bytes[at + i]) : 0u);
    }
    for (std::size_t i = 0; i < 4; ++i)
      out.push_back(i <= n ? kBase64[(group >> (18 - 6 * i)) & 63] : '=');
  }
  return out;
}

// The bytes of strict base64 (padded, no blanks); nullopt for anything else.
std::optional<std::string> from_base64(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (std::size_t at = 0; at < text.size(); at += 4) {
    std::uint32_t group = 0;
    std::size_t padding = 0;
    for (std::size_t i = 0; i < 4; ++i) {
      const char c = text[at + i];
      std::size_t value = 0;
      if (c == '=' && at + 4 == text.size() && i >= 2) {
        ++padding;
      } else if (padding > 0 || (value = kBase64.find(c)) == std::string_view::npos) {
        return std::nullopt;
      }
      group = group << 6 | static_cast<std::uint32_t>(value);
    }
    for (std::size_t i = 0; i < 3 - padding; ++i)
      out.push_back(static_cast<char>((group >> (16 - 8 * i)) & 0xff));
  }
  return out;
}

// A word as a POSIX shell reads it back: bare when it holds only safe characters.
std::string shell_word(const std::string& word) {
  const bool bare = !word.empty() && std::all_of(word.begin(), word.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 ||
           std::string_view("%+,-./:=@_").find(c) != std::string_view::npos;
  });
  if (bare) return word;
  std::string out = "'";
  for (char c : word)
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Line and column (from 1) of byte `offset` of `text`.
SourceMark mark_at(std::string_view text, std::size_t offset, const std::string& name) {
  offset = std::min(offset, text.size());
  SourceMark mark{name, 1, 1};
  for (std::size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++mark.line;
      mark.column = 1;
    } else {
      ++mark.column;
    }
  }
  return mark;
}

// Strict reading of the parsed JSON: exact key sets, typed values, errors naming the key.
class Reader {
 public:
  explicit Reader(const std::string& name) : name_(name) {}

  [[noreturn]] void fail(const std::string& key, const std::string& problem) const {
    throw InputError(SourceMark{name_, 0, 0}, key, problem + again_);
  }
  // Once the shard is known, every later problem says how to make the file again.
  void set_again(std::string again) { again_ = std::move(again); }

  void keys(const nlohmann::json& object, const std::string& where,
            std::initializer_list<std::string_view> expected) const {
    if (!object.is_object()) fail(where, "expected an object");
    for (const auto& [key, value] : object.items()) {
      if (std::find(expected.begin(), expected.end(), key) == expected.end())
        fail(prefixed(where, key), "unknown key in a shard file");
    }
    for (std::string_view key : expected) {
      if (!object.contains(key)) fail(prefixed(where, std::string(key)), "missing");
    }
  }
  std::string text(const nlohmann::json& object, const std::string& where,
                   const std::string& key) const {
    const nlohmann::json& value = object.at(key);
    if (!value.is_string()) fail(prefixed(where, key), "expected a string");
    return value.get<std::string>();
  }
  std::int64_t integer(const nlohmann::json& object, const std::string& where,
                       const std::string& key, std::int64_t lower, std::int64_t upper) const {
    const nlohmann::json& value = object.at(key);
    if (!value.is_number_integer() || value.get<std::int64_t>() < lower ||
        value.get<std::int64_t>() > upper) {
      fail(prefixed(where, key), fmt::format("expected a whole number from {} to {}, got {}", lower,
                                             upper, value.dump()));
    }
    return value.get<std::int64_t>();
  }

 private:
  static std::string prefixed(const std::string& where, const std::string& key) {
    return where.empty() ? key : where + "." + key;
  }
  const std::string& name_;
  std::string again_;
};

// The largest sweep and shard count a file may name: far beyond any sweep, small enough that
// every count below stays exact in a double (JSON readers) and in an int.
constexpr std::int64_t kMaxPoints = 1'000'000'000;
constexpr std::int64_t kMaxShards = 1'000'000;

}  // namespace

std::vector<std::size_t> shard_points(std::size_t points, int shard, int shards) {
  std::vector<std::size_t> out;
  for (auto i = static_cast<std::size_t>(shard - 1); i < points;
       i += static_cast<std::size_t>(shards))
    out.push_back(i);
  return out;
}

std::string SweepIdentity::id() const {
  Digest d;
  d.add(kShardFormat);
  d.add(epochcast);
  d.add(command);
  d.add(std::to_string(arguments.size()));
  for (const std::string& word : arguments)
    d.add(word);
  d.add(inputs);
  d.add(std::to_string(points));
  return d.hex();
}

std::string SweepIdentity::command_line() const {
  std::string out = "epochcast " + shell_word(command);
  for (const std::string& word : arguments)
    out += " " + shell_word(word);
  return out;
}

std::string shard_file_text(const ShardFile& file) {
  using nlohmann::json;
  const SweepIdentity& s = file.sweep;
  Digest outcomes_digest;
  std::string lines;
  for (std::size_t i = 0; i < file.outcomes.size(); ++i) {
    const std::string bytes = encode_outcome(file.outcomes[i].second);
    outcomes_digest.add(bytes);
    lines +=
        fmt::format("    {{\"point\": {}, \"outcome\": \"{}\"}}{}\n", file.outcomes[i].first + 1,
                    base64(bytes), i + 1 < file.outcomes.size() ? "," : "");
  }
  std::vector<std::string> words;
  for (const std::string& word : s.arguments)
    words.push_back(json(word).dump());
  const std::string arguments = fmt::format("[{}]", fmt::join(words, ", "));
  return fmt::format(
      "{{\n"
      "  \"format\": {},\n"
      "  \"sweep\": {{\n"
      "    \"id\": {},\n"
      "    \"epochcast\": {},\n"
      "    \"command\": {},\n"
      "    \"arguments\": {},\n"
      "    \"inputs\": {},\n"
      "    \"points\": {}\n"
      "  }},\n"
      "  \"shard\": {},\n"
      "  \"shards\": {},\n"
      "  \"outcomes_digest\": {},\n"
      "  \"outcomes\": [\n{}  ]\n"
      "}}\n",
      json(kShardFormat).dump(), json(s.id()).dump(), json(s.epochcast).dump(),
      json(s.command).dump(), arguments, json(s.inputs).dump(), s.points, file.shard, file.shards,
      json(outcomes_digest.hex()).dump(), lines);
}

ShardFile read_shard_file(std::string_view text, const std::string& name) {
  using nlohmann::json;
  json root;
  try {
    root = json::parse(text);
  } catch (const json::parse_error& e) {
    // What went wrong, without nlohmann's prefix, position (the mark says it) and the text it
    // last read (a line of base64).
    std::string what = e.what();
    what = what.substr(0, what.find("; last read"));
    if (const std::size_t column = what.find("column "); column != std::string::npos)
      what = what.substr(std::min(what.size(), what.find(": ", column) + 2));
    // nlohmann's byte is one past the offending character (1-based).
    throw InputError(mark_at(text, e.byte > 0 ? e.byte - 1 : 0, name), "",
                     fmt::format("not a shard file: the JSON is broken ({}); a shard file is "
                                 "written whole or not at all, so it was cut or changed since: "
                                 "compute that shard again",
                                 what));
  }
  Reader r(name);
  if (!root.is_object() || !root.contains("format") || !root.at("format").is_string() ||
      root.at("format").get<std::string>().rfind("epochcast.shard/", 0) != 0) {
    r.fail("format", fmt::format("not a shard file (expected format '{}'): give merge the "
                                 "files that --shard-output wrote",
                                 kShardFormat));
  }
  if (const std::string format = root.at("format").get<std::string>(); format != kShardFormat) {
    r.fail("format", fmt::format("'{}' is another version of shard files than this epochcast "
                                 "reads ('{}'): merge with the epochcast that computed the "
                                 "shards",
                                 format, kShardFormat));
  }
  r.keys(root, "", {"format", "sweep", "shard", "shards", "outcomes_digest", "outcomes"});
  ShardFile file;
  const json& sweep = root.at("sweep");
  r.keys(sweep, "sweep", {"id", "epochcast", "command", "arguments", "inputs", "points"});
  SweepIdentity& s = file.sweep;
  s.epochcast = r.text(sweep, "sweep", "epochcast");
  s.command = r.text(sweep, "sweep", "command");
  if (s.command != "predict" && s.command != "compare")
    r.fail("sweep.command", fmt::format("expected predict or compare, got '{}'", s.command));
  if (!sweep.at("arguments").is_array()) r.fail("sweep.arguments", "expected a list of words");
  for (const json& word : sweep.at("arguments")) {
    if (!word.is_string()) r.fail("sweep.arguments", "expected a list of words");
    s.arguments.push_back(word.get<std::string>());
  }
  s.inputs = r.text(sweep, "sweep", "inputs");
  s.points = static_cast<std::size_t>(r.integer(sweep, "sweep", "points", 0, kMaxPoints));
  file.shards = static_cast<int>(r.integer(root, "", "shards", 1, kMaxShards));
  file.shard = static_cast<int>(r.integer(root, "", "shard", 1, file.shards));
  r.set_again(
      fmt::format("; the file is damaged or was edited: compute the shard again ({} "
                  "--shard {}/{} --shard-output {}) and merge",
                  s.command_line(), file.shard, file.shards, shell_word(name)));
  if (r.text(sweep, "sweep", "id") != s.id()) {
    r.fail("sweep.id",
           "does not match the sweep's fields (epochcast, command, arguments, "
           "inputs, points)");
  }
  const json& outcomes = root.at("outcomes");
  if (!outcomes.is_array()) r.fail("outcomes", "expected a list");
  const std::vector<std::size_t> expected = shard_points(s.points, file.shard, file.shards);
  if (outcomes.size() != expected.size()) {
    r.fail("outcomes",
           fmt::format("holds {} points; shard {} of {} of a sweep of {} points has {}",
                       outcomes.size(), file.shard, file.shards, s.points, expected.size()));
  }
  Digest outcomes_digest;
  for (std::size_t i = 0; i < outcomes.size(); ++i) {
    const std::string where = fmt::format("outcomes[{}]", i);
    r.keys(outcomes[i], where, {"point", "outcome"});
    const std::int64_t point = r.integer(outcomes[i], where, "point", 1, kMaxPoints);
    if (static_cast<std::size_t>(point) != expected[i] + 1) {
      r.fail(where + ".point",
             fmt::format("is {}; shard {} of {} has points {}{}, so this one is {}", point,
                         file.shard, file.shards, file.shard,
                         file.shards < static_cast<int>(s.points)
                             ? fmt::format(", {}, ...", file.shard + file.shards)
                             : "",
                         expected[i] + 1));
    }
    const std::optional<std::string> bytes = from_base64(r.text(outcomes[i], where, "outcome"));
    if (!bytes) r.fail(where + ".outcome", "is not base64");
    outcomes_digest.add(*bytes);
    try {
      file.outcomes.emplace_back(expected[i], decode_outcome(*bytes));
    } catch (const std::exception& e) {
      r.fail(where + ".outcome", fmt::format("cannot be read: {}", e.what()));
    }
  }
  if (r.text(root, "", "outcomes_digest") != outcomes_digest.hex())
    r.fail("outcomes_digest", "does not match the outcomes' bytes");
  return file;
}

}  // namespace epochcast::sim
