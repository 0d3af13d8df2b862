// nccl-tests' text log and -J JSON, read and written (nccl_tests_log.h).
#include "core/measure/nccl_tests_log.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/input_error.h"
#include "core/yaml/strict_yaml.h"

namespace epochcast {

namespace {

// The -perf binaries, longest first so that "all_reduce_perf" is not taken for "reduce_perf".
constexpr std::array<std::string_view, 10> kBinaries = {
    "reduce_scatter", "hypercube", "all_reduce", "all_gather", "broadcast",
    "alltoall",       "sendrecv",  "scatter",    "gather",     "reduce"};

// nccl-tests' time column (common.cu before 2.14): two decimals below 100 us, one below 10 ms,
// none above, in seven characters.
std::string time_text(double us) {
  if (us >= 10000.0) return fmt::format("{:7.0f}", us);
  if (us >= 100.0) return fmt::format("{:7.1f}", us);
  return fmt::format("{:7.2f}", us);
}

std::string timing_text(const std::optional<NcclTestsTiming>& t) {
  if (!t) return std::string(32, ' ');  // nccl-tests' blank out-of-place group
  const std::string wrong = t->wrong ? fmt::format("{:5g}", *t->wrong) : "  N/A";
  return fmt::format("  {}  {:6.2f}  {:6.2f}  {}", time_text(t->time_us), t->algbw_gbps,
                     t->busbw_gbps, wrong);
}

std::string header_line(const std::array<std::string_view, 13>& c) {
  return fmt::format(
      "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6} {:>6}  {:>7}  "
      "{:>6}  {:>6} {:>6}\n",
      c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8], c[9], c[10], c[11], c[12]);
}

SourceMark at(const std::string& name, int line, int column = 1) {
  return SourceMark{name, line, column};
}

// Whitespace-separated words and the 1-based column each starts at.
std::vector<std::pair<std::string, int>> words_of(std::string_view line) {
  std::vector<std::pair<std::string, int>> out;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r'))
      ++i;
    const std::size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t' && line[i] != '\r')
      ++i;
    if (i > start)
      out.emplace_back(std::string(line.substr(start, i - start)), static_cast<int>(start) + 1);
  }
  return out;
}

template <class Number>
std::optional<Number> number_of(std::string_view text) {
  Number value{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// mpirun's "[1,0]<stdout>:" before each line of a process's output.
std::string_view without_launcher_prefix(std::string_view line) {
  if (line.empty() || line.front() != '[') return line;
  const std::size_t end = line.find("]<stdout>:");
  return end == std::string_view::npos ? line : line.substr(end + 10);
}

// The collective a file name or a command's first word names ("./build/all_gather_perf",
// "all_gather_perf.log"), or "".
std::string collective_named_in(std::string_view text) {
  for (std::string_view binary : kBinaries) {
    const std::string word = std::string(binary) + "_perf";
    for (std::size_t at = text.find(word); at != std::string_view::npos;
         at = text.find(word, at + 1)) {
      const bool starts = at == 0 || !(std::isalnum(static_cast<unsigned char>(text[at - 1])) ||
                                       text[at - 1] == '_');
      if (starts) return std::string(binary);
    }
  }
  return "";
}

// The collective the figures show: nccl-tests' busbw/algbw factor (2(n-1)/n, (n-1)/n or 1)
// with the reduction and the root.
std::string collective_from_figures(const NcclTestsRun& run, const std::string& name) {
  const double n = static_cast<double>(run.devices.size());
  const NcclTestsRow* row = nullptr;
  for (const NcclTestsRow& r : run.rows) {
    const auto& t = r.out_of_place ? r.out_of_place : r.in_place;
    if (t && t->algbw_gbps >= 1 && (!row || r.bytes > row->bytes)) row = &r;
  }
  const auto problem = [&](const std::string& why) {
    return InputError(SourceMark{name, 0, 0}, "collective",
                      fmt::format("{}; name the binary in the file name (e.g. "
                                  "all_gather_perf.log) or keep its '# Collective test "
                                  "starting:' line",
                                  why));
  };
  if (n < 2 || row == nullptr) {
    throw problem(
        "the log names no collective, and without its '#  Rank' lines and a row of "
        "1 GB/s or more its figures cannot tell which");
  }
  const NcclTestsTiming& t = row->out_of_place ? *row->out_of_place : *row->in_place;
  const double factor = t.busbw_gbps / t.algbw_gbps;
  const auto near = [&](double f) { return std::abs(factor / f - 1) < 0.02; };
  const bool reduces = row->redop != "none";
  if (row->root >= 0) return reduces ? "reduce" : "broadcast";
  if (reduces && near(2 * (n - 1) / n)) return "all_reduce";
  if (reduces && near((n - 1) / n)) return "reduce_scatter";
  if (!reduces && near(1) && n > 2) return "sendrecv";
  throw problem(fmt::format("busbw/algbw = {:.3f} over {} ranks with reduction '{}' fits {}",
                            factor, run.devices.size(), row->redop,
                            reduces ? "no collective" : "all_gather and alltoall alike"));
}

void parse_config_line(const std::vector<std::pair<std::string, int>>& w, NcclTestsRun& run) {
  for (std::size_t i = 0; i + 1 < w.size(); ++i) {
    const std::string& key = w[i].first;
    const std::string& value = w[i + 1].first;
    const auto integer = [&] { return number_of<std::int64_t>(value).value_or(0); };
    if (key == "nThread") run.threads = static_cast<int>(integer());
    if (key == "nGpus") run.gpus = static_cast<int>(integer());
    if (key == "minBytes") run.min_bytes = integer();
    if (key == "maxBytes") run.max_bytes = integer();
    if (key == "step:") {
      const std::size_t paren = value.find('(');
      run.step = number_of<std::int64_t>(value.substr(0, paren)).value_or(0);
      run.step_is_factor = value.find("factor") != std::string::npos;
    }
    if (key == "warmup" && value == "iters:" && i + 2 < w.size())
      run.warmup_iterations = number_of<int>(w[i + 2].first).value_or(0);
    if (key == "iters:" && (i == 0 || (w[i - 1].first != "warmup" && w[i - 1].first != "agg")))
      run.iterations = static_cast<int>(integer());
    if (key == "agg" && value == "iters:" && i + 2 < w.size())
      run.aggregated_iterations = number_of<int>(w[i + 2].first).value_or(0);
    if (key == "validation:") run.validation = static_cast<int>(integer());
    if (key == "graph:") run.graph = static_cast<int>(integer());
  }
}

// "#  Rank  0 Group  0 Pid 1623025 on host device  0 [0x1b] NVIDIA H100 80GB HBM3" (older
// releases have no Group).
std::optional<NcclTestsDevice> parse_rank_line(std::string_view line) {
  const auto w = words_of(line);
  NcclTestsDevice d;
  std::size_t i = 1;
  const auto take_int = [&](std::string_view label, int& into) {
    if (i + 1 >= w.size() || w[i].first != label) return false;
    const auto value = number_of<int>(w[i + 1].first);
    if (!value) return false;
    into = *value;
    i += 2;
    return true;
  };
  if (!take_int("Rank", d.rank)) return std::nullopt;
  take_int("Group", d.group);
  if (!take_int("Pid", d.pid) || i + 1 >= w.size() || w[i].first != "on") return std::nullopt;
  d.host = w[i + 1].first;
  i += 2;
  if (!take_int("device", d.device) || i >= w.size()) return std::nullopt;
  if (w[i].first.front() == '[') {
    d.bus = w[i].first.substr(1, w[i].first.size() - 2);
    ++i;
  }
  if (i < w.size()) d.name = std::string(line.substr(static_cast<std::size_t>(w[i].second - 1)));
  while (!d.name.empty() && (d.name.back() == ' ' || d.name.back() == '\r'))
    d.name.pop_back();
  return d;
}

// One data row, its words matched to the header's columns.
NcclTestsRow parse_row(const std::vector<std::pair<std::string, int>>& w,
                       const std::vector<std::string>& columns, const std::string& name, int line) {
  const auto column_of = [&](std::string_view label, std::size_t from = 0) {
    for (std::size_t c = from; c < columns.size(); ++c)
      if (columns[c] == label) return c;
    return columns.size();
  };
  const auto bad = [&](std::size_t word, const std::string& what) {
    const int column = word < w.size() ? w[word].second : 1;
    return InputError(
        at(name, line, column), "row",
        fmt::format("{}; expected nccl-tests' columns: {}", what, fmt::join(columns, " ")));
  };
  const auto integer = [&](std::size_t c) {
    if (c >= w.size()) throw bad(c, "the row ends early");
    const auto value = number_of<std::int64_t>(w[c].first);
    if (!value || *value < 0) throw bad(c, fmt::format("'{}' is not a count", w[c].first));
    return *value;
  };
  const auto real = [&](std::size_t c) {
    if (c >= w.size()) throw bad(c, "the row ends early");
    const auto value = number_of<double>(w[c].first);
    if (!value || !std::isfinite(*value) || *value < 0)
      throw bad(c, fmt::format("'{}' is not a figure", w[c].first));
    return *value;
  };
  NcclTestsRow row;
  row.bytes = integer(column_of("size"));
  row.count = integer(column_of("count"));
  const std::size_t type = column_of("type"), redop = column_of("redop");
  if (type >= w.size() || redop >= w.size()) throw bad(std::max(type, redop), "the row ends early");
  row.type = w[type].first;
  row.redop = w[redop].first;
  std::size_t first_time = column_of("time");
  if (first_time == columns.size()) first_time = column_of("cputime");
  if (first_time + 3 > columns.size()) throw bad(0, "the header has no time, algbw and busbw");
  std::size_t offset = 0;  // a row with only the in-place group (nccl-tests' blank first one)
  const std::size_t root = column_of("root");
  if (root < columns.size()) {
    const auto value = number_of<int>(w.size() > root ? w[root].first : "");
    if (!value) throw bad(root, "the root is not a whole number");
    row.root = *value;
  }
  std::size_t second_time = column_of(columns[first_time], first_time + 1);
  if (w.size() + 4 <= columns.size() && second_time < columns.size()) offset = 4;
  const auto group = [&](std::size_t c) {
    NcclTestsTiming t;
    t.time_us = real(c - offset);
    t.algbw_gbps = real(c + 1 - offset);
    t.busbw_gbps = real(c + 2 - offset);
    if (c + 3 - offset < w.size()) {
      std::string wrong = w[c + 3 - offset].first;
      while (!wrong.empty() && wrong.back() == '*')
        wrong.pop_back();
      if (wrong != "N/A") {
        const auto value = number_of<double>(wrong);
        if (!value)
          throw bad(c + 3 - offset, fmt::format("'{}' is not a count of wrong "
                                                "elements",
                                                wrong));
        t.wrong = *value;
      }
    }
    return t;
  };
  if (offset == 0) row.out_of_place = group(first_time);
  if (second_time < columns.size()) row.in_place = group(second_time);
  return row;
}

NcclTestsRun parse_text(const std::string& text, const std::string& name) {
  NcclTestsRun run;
  std::vector<std::string> columns;
  int line_number = 0;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    ++line_number;
    const std::string_view line =
        without_launcher_prefix(std::string_view(text).substr(start, end - start));
    start = end + 1;
    const auto w = words_of(line);
    if (w.empty()) continue;
    if (w[0].first == "#" || w[0].first.front() == '#') {
      if (w.size() > 1 && w[1].first == "nThread") parse_config_line(w, run);
      if (line.find("Collective test starting:") != std::string_view::npos)
        run.collective = collective_named_in(line);
      if (w.size() > 1 && w[1].first == "Rank") {
        if (auto device = parse_rank_line(line)) {
          const bool seen =
              std::any_of(run.devices.begin(), run.devices.end(),
                          [&](const NcclTestsDevice& d) { return d.rank == device->rank; });
          if (!seen) run.devices.push_back(std::move(*device));
        }
      }
      if (w.size() > 3 && w[1].first == "size" && w[2].first == "count") {
        columns.clear();
        for (std::size_t i = 1; i < w.size(); ++i)
          columns.push_back(w[i].first);
      }
      if (line.find("Out of bounds values") != std::string_view::npos && w.size() > 6)
        run.out_of_bounds = number_of<int>(w[6].first).value_or(0);
      if (line.find("Avg bus bandwidth") != std::string_view::npos && w.size() > 5)
        run.average_busbw_gbps = number_of<double>(w[5].first);
      continue;
    }
    // A table row starts with its size; other lines (NCCL INFO, launcher chatter) are skipped.
    if (columns.empty() || !number_of<std::int64_t>(w[0].first)) continue;
    run.rows.push_back(parse_row(w, columns, name, line_number));
  }
  std::sort(run.devices.begin(), run.devices.end(),
            [](const NcclTestsDevice& a, const NcclTestsDevice& b) { return a.rank < b.rank; });
  return run;
}

// A mapping's reader that takes whatever keys it has: nccl-tests adds keys between releases.
struct OpenMap {
  explicit OpenMap(const yaml::Node& node) {
    if (!node.is_map()) node.fail(fmt::format("expected a mapping, got {}", node.describe()));
    for (const auto& entry : node.raw()) {
      if (!entry.first.IsScalar()) node.fail("expected keys that are strings");
      keys.push_back(entry.first.Scalar());
    }
    views.assign(keys.begin(), keys.end());
    reader.emplace(node, std::span<const std::string_view>(views));
  }
  std::vector<std::string> keys;
  std::vector<std::string_view> views;
  std::optional<yaml::MapReader> reader;
};

// Whether `key` is absent or null (-J writes null for what it did not measure).
bool absent(const yaml::MapReader& map, std::string_view key) {
  if (!map.has(key)) return true;
  return map.node().raw()[std::string(key)].IsNull();
}

std::optional<NcclTestsTiming> json_timing(const yaml::MapReader& row, std::string_view key) {
  if (absent(row, key)) return std::nullopt;
  const std::optional<yaml::Node> node = row.optional(key);
  OpenMap map(*node);
  NcclTestsTiming t;
  const yaml::MapReader& r = *map.reader;
  t.time_us = (r.has("time") ? r.required("time") : r.required("cpu_time")).as_number_in(0, 1e18);
  t.algbw_gbps = r.required("alg_bw").as_number_in(0, 1e18);
  t.busbw_gbps = r.required("bus_bw").as_number_in(0, 1e18);
  if (!absent(r, "nwrong")) t.wrong = r.required("nwrong").as_number_in(0, 1e18);
  return t;
}

NcclTestsRun parse_json(const std::string& text, const std::string& name) {
  const yaml::Document document = yaml::Document::load_string(text, name);
  OpenMap top(document.root());
  const yaml::MapReader& r = *top.reader;
  NcclTestsRun run;
  if (const auto args = r.optional("args")) {
    for (const yaml::Node& a : args->items())
      run.arguments.push_back(a.as_string());
  }
  if (const auto env = r.optional("env")) {
    for (const yaml::Node& e : env->items())
      run.environment.push_back(e.as_string());
  }
  if (const auto version = r.optional("nccl_version"))
    run.nccl_version = version->as_int32_in(0, 1'000'000'000);
  if (const auto config_node = r.optional("config")) {
    OpenMap config(*config_node);
    const yaml::MapReader& c = *config.reader;
    const auto integer = [&](std::string_view key, auto& into) {
      if (const auto n = c.optional(key))
        into = static_cast<std::decay_t<decltype(into)>>(n->as_int());
    };
    integer("nthreads", run.threads);
    integer("ngpus", run.gpus);
    integer("minimum_bytes", run.min_bytes);
    integer("maximum_bytes", run.max_bytes);
    if (c.has("step_bytes")) {
      run.step_is_factor = false;
      integer("step_bytes", run.step);
    } else {
      integer("step_factor", run.step);
    }
    integer("warmup_iters", run.warmup_iterations);
    integer("iterations", run.iterations);
    integer("aggregated_iterations", run.aggregated_iterations);
    integer("validation", run.validation);
    integer("graph", run.graph);
    if (const auto devices = c.optional("devices")) {
      for (const yaml::Node& d : devices->items()) {
        OpenMap device(d);
        const yaml::MapReader& m = *device.reader;
        NcclTestsDevice out;
        out.rank = m.required("rank").as_int32_in(0, 1 << 24);
        if (m.has("group")) out.group = m.required("group").as_int32_in(0, 1 << 24);
        if (m.has("pid")) out.pid = m.required("pid").as_int32_in(0, 1 << 30);
        if (m.has("hostname")) out.host = m.required("hostname").as_string();
        if (m.has("device")) out.device = m.required("device").as_int32_in(0, 1 << 20);
        if (m.has("device_hex")) out.bus = m.required("device_hex").as_string();
        if (m.has("device_info")) out.name = m.required("device_info").as_string();
        run.devices.push_back(std::move(out));
      }
    }
  }
  for (const yaml::Node& row_node : r.required("results").items()) {
    OpenMap row_map(row_node);
    const yaml::MapReader& row = *row_map.reader;
    NcclTestsRow out;
    out.bytes = row.required("size").as_int_in(0, std::int64_t{1} << 50);
    out.count = row.required("count").as_int_in(0, std::int64_t{1} << 50);
    out.type = row.required("type").as_string();
    out.redop = row.required("redop").as_string();
    if (const auto root = row.optional("root")) {
      // A string in -J ("    -1"), as printed.
      std::string text_root = root->as_string();
      text_root.erase(0, text_root.find_first_not_of(' '));
      const auto value = number_of<int>(text_root);
      if (!value) root->fail("expected the root rank, a whole number (-1: none)");
      out.root = *value;
    }
    out.out_of_place = json_timing(row, "out_of_place");
    out.in_place = json_timing(row, "in_place");
    if (!out.out_of_place && !out.in_place) row_node.fail("a result with neither timing group");
    run.rows.push_back(std::move(out));
  }
  if (const auto bounds = r.optional("out_of_bounds")) {
    OpenMap map(*bounds);
    if (map.reader->has("count"))
      run.out_of_bounds = map.reader->required("count").as_int32_in(0, 1 << 30);
  }
  if (const auto average = r.optional("average_bus_bandwidth")) {
    OpenMap map(*average);
    if (map.reader->has("bandwidth"))
      run.average_busbw_gbps = map.reader->required("bandwidth").as_number();
  }
  if (!run.arguments.empty()) run.collective = collective_named_in(run.arguments.front());
  return run;
}

bool is_json(const std::string& text) {
  const std::size_t first = text.find_first_not_of(" \t\r\n");
  return first != std::string::npos && text[first] == '{';
}

}  // namespace

std::string render_nccl_tests_text(const NcclTestsRun& run) {
  std::string out = fmt::format(
      "# nThread {} nGpus {} minBytes {} maxBytes {} step: {}({}) warmup iters: {} iters: {} agg "
      "iters: {} validation: {} graph: {}\n#\n# Using devices\n",
      run.threads, run.gpus, run.min_bytes, run.max_bytes, run.step,
      run.step_is_factor ? "factor" : "bytes", run.warmup_iterations, run.iterations,
      run.aggregated_iterations, run.validation, run.graph);
  for (const NcclTestsDevice& d : run.devices) {
    out += fmt::format("#  Rank {:2} Group {:2} Pid {:6} on {:>10} device {:2} [{}] {}\n", d.rank,
                       d.group, d.pid, d.host, d.device, d.bus, d.name);
  }
  out += "#\n";
  out += fmt::format("# {:61}out-of-place{:23}in-place{:10}\n", "", "", "");
  out += header_line({"size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong",
                      "time", "algbw", "busbw", "#wrong"});
  out += header_line({"(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)",
                      "(GB/s)", "(GB/s)", ""});
  double busbw_sum = 0;
  int busbw_count = 0;
  for (const NcclTestsRow& r : run.rows) {
    out += fmt::format("{:12}  {:12}  {:>8}  {:>6}  {:6}{}{}\n", r.bytes, r.count, r.type, r.redop,
                       r.root, timing_text(r.out_of_place), timing_text(r.in_place));
    for (const auto* t : {&r.out_of_place, &r.in_place}) {
      if (!*t) continue;
      busbw_sum += (*t)->busbw_gbps;
      ++busbw_count;
    }
  }
  const double average =
      run.average_busbw_gbps.value_or(busbw_count > 0 ? busbw_sum / busbw_count : 0);
  out += fmt::format("# Out of bounds values : {} {}\n", run.out_of_bounds,
                     run.out_of_bounds > 0 ? "FAILED" : "OK");
  out += fmt::format("# Avg bus bandwidth    : {:g} \n#\n", average);
  return out;
}

std::string render_nccl_tests_json(const NcclTestsRun& run) {
  using Json = nlohmann::ordered_json;
  Json devices = Json::array();
  for (const NcclTestsDevice& d : run.devices) {
    devices.push_back({{"rank", d.rank},
                       {"group", d.group},
                       {"pid", d.pid},
                       {"hostname", d.host},
                       {"device", d.device},
                       {"device_hex", d.bus},
                       {"device_info", d.name}});
  }
  Json config = {{"nthreads", run.threads},
                 {"ngpus", run.gpus},
                 {"minimum_bytes", run.min_bytes},
                 {"maximum_bytes", run.max_bytes}};
  config[run.step_is_factor ? "step_factor" : "step_bytes"] = run.step;
  config["warmup_iters"] = run.warmup_iterations;
  config["iterations"] = run.iterations;
  config["aggregated_iterations"] = run.aggregated_iterations;
  config["validation"] = run.validation;
  config["graph"] = run.graph;
  config["blocking_collectives"] = "false";
  config["devices"] = devices;
  const auto timing = [](const std::optional<NcclTestsTiming>& t) {
    if (!t) return Json(nullptr);
    return Json{{"time", t->time_us},
                {"alg_bw", t->algbw_gbps},
                {"bus_bw", t->busbw_gbps},
                {"nwrong", t->wrong ? Json(*t->wrong) : Json(nullptr)}};
  };
  Json results = Json::array();
  double busbw_sum = 0;
  int busbw_count = 0;
  for (const NcclTestsRow& r : run.rows) {
    results.push_back({{"size", r.bytes},
                       {"count", r.count},
                       {"type", r.type},
                       {"redop", r.redop},
                       {"root", fmt::format("{:6}", r.root)},
                       {"out_of_place", timing(r.out_of_place)},
                       {"in_place", timing(r.in_place)},
                       {"actual_iterations", run.iterations},
                       {"experiment_name", ""}});
    for (const auto* t : {&r.out_of_place, &r.in_place}) {
      if (!*t) continue;
      busbw_sum += (*t)->busbw_gbps;
      ++busbw_count;
    }
  }
  const Json top = {
      {"version", 2},
      {"args", run.arguments},
      {"env", run.environment},
      {"nccl_version", run.nccl_version},
      {"config", config},
      {"results", results},
      {"out_of_bounds",
       {{"count", run.out_of_bounds}, {"okay", run.out_of_bounds == 0 ? "true" : "false"}}},
      {"average_bus_bandwidth",
       {{"bandwidth",
         run.average_busbw_gbps.value_or(busbw_count > 0 ? busbw_sum / busbw_count : 0)},
        {"okay", "unchecked"}}},
      {"errors", Json::array()}};
  return top.dump(2) + "\n";
}

bool looks_like_nccl_tests_log(const std::string& text) {
  if (is_json(text)) {
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    return j.is_object() && j.contains("results") && j.contains("config") && !j.contains("format");
  }
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const auto w =
        words_of(without_launcher_prefix(std::string_view(text).substr(start, end - start)));
    start = end + 1;
    if (w.size() > 1 && w[0].first == "#" && w[1].first == "nThread") return true;
    if (w.size() > 3 && w[0].first == "#" && w[1].first == "size" && w[2].first == "count")
      return true;
  }
  return false;
}

NcclTestsRun parse_nccl_tests_log(const std::string& text, const std::string& name) {
  NcclTestsRun run = is_json(text) ? parse_json(text, name) : parse_text(text, name);
  if (run.rows.empty()) {
    throw InputError(SourceMark{name, 0, 0}, "results",
                     "no rows of nccl-tests' table (size, count, type, redop, root, time, algbw, "
                     "busbw, ...) after its header: is this the output of an *_perf binary?");
  }
  if (run.collective.empty()) run.collective = collective_named_in(name);
  if (run.collective.empty()) run.collective = collective_from_figures(run, name);
  return run;
}

MeasurementFile measurements_from_nccl_tests(const NcclTestsRun& run) {
  MeasurementFile file;
  const int ranks = static_cast<int>(run.devices.size());
  file.environment.device_kind = "cuda";
  file.environment.ranks = ranks;
  file.environment.device_count = run.threads * run.gpus;
  if (!run.devices.empty()) {
    file.environment.host = run.devices.front().host;
    file.environment.device_name = run.devices.front().name;
  }
  if (run.nccl_version > 0) {
    // NCCL_VERSION_CODE: major * 10000 + minor * 100 + patch (since 2.9).
    file.environment.nccl_version = fmt::format(
        "{}.{}.{}", run.nccl_version / 10000, run.nccl_version / 100 % 100, run.nccl_version % 100);
  }
  for (const std::string& variable : run.environment) {
    if (variable.rfind("NCCL_", 0) == 0) file.environment.nccl_settings.push_back(variable);
  }
  std::sort(file.environment.nccl_settings.begin(), file.environment.nccl_settings.end());
  file.settings.warmup_iterations = run.warmup_iterations;
  file.settings.timed_iterations = run.iterations;
  for (const NcclTestsRow& r : run.rows) {
    const NcclTestsTiming& t = r.out_of_place ? *r.out_of_place : *r.in_place;
    CollectiveMeasurement c;
    c.operation = run.collective;
    c.ranks = ranks;
    c.bytes = r.bytes;
    c.time_s = t.time_us * 1e-6;
    c.algbw_gbps = t.algbw_gbps;
    c.busbw_gbps = t.busbw_gbps;
    c.correct = !(t.wrong && *t.wrong > 0);
    c.launches_per_iteration = run.graph > 0 ? 0 : run.gpus;
    file.benchmarks.collectives.push_back(std::move(c));
  }
  return file;
}

}  // namespace epochcast
