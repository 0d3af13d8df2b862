// nvidia-smi's topology matrix and product names, read strictly, and the machine file they
// describe.
#include "core/spec/nvidia_smi_topology.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "core/spec/limits.h"
#include "core/yaml/strict_yaml.h"

namespace epochcast {

namespace {

// ---------------------------------------------------------------------------------------------
// Lines and words

struct Word {
  std::string text;
  int column = 0;       // 1-based byte column of its first character
  std::size_t end = 0;  // byte offset just past it in its line
};

bool is_blank(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

// Past an ANSI escape sequence starting at line[i] (ESC): CSI sequences (ESC [ ... final byte,
// which colours and bold use) whole, any other escape as ESC and one character.
std::size_t past_escape(std::string_view line, std::size_t i) {
  if (i + 1 < line.size() && line[i + 1] == '[') {
    std::size_t j = i + 2;
    while (j < line.size() && !(line[j] >= 0x40 && line[j] <= 0x7e))
      ++j;
    return std::min(j + 1, line.size());
  }
  return std::min(i + 2, line.size());
}

// The blank-separated words of a line, escape sequences left out (a word coloured in the
// middle stays one word).
std::vector<Word> words_of(std::string_view line) {
  std::vector<Word> out;
  std::size_t i = 0;
  while (i < line.size()) {
    if (line[i] == '\x1b') {
      i = past_escape(line, i);
    } else if (is_blank(line[i])) {
      ++i;
    } else {
      Word word;
      word.column = static_cast<int>(i) + 1;
      while (i < line.size() && !is_blank(line[i])) {
        if (line[i] == '\x1b') {
          i = past_escape(line, i);
        } else {
          word.text += line[i++];
        }
      }
      word.end = i;
      out.push_back(std::move(word));
    }
  }
  return out;
}

// The text's lines, without their line ends ("\n" or "\r\n").
std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    out.push_back(line);
    if (end == text.size()) break;
    start = end + 1;
  }
  return out;
}

std::string trimmed(std::string_view text) {
  std::size_t begin = 0, end = text.size();
  while (begin < end && is_blank(text[begin]))
    ++begin;
  while (end > begin && is_blank(text[end - 1]))
    --end;
  return std::string(text.substr(begin, end - begin));
}

bool all_digits(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c)) != 0;
  });
}

// Text from a file, fit for a message or a comment: control characters (an escape, a NUL) as
// '?', at most `most` bytes.
std::string printable(std::string_view text, std::size_t most = 60) {
  std::string out;
  for (char c : text.substr(0, most))
    out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
  if (text.size() > most) out += "...";
  return out;
}

// ---------------------------------------------------------------------------------------------
// The matrix

constexpr std::array<std::string_view, 7> kLegend = {"X",   "NV#",  "PIX", "PXB",
                                                     "PHB", "NODE", "SYS"};
// nvidia-smi topo -p2p's legend: a matrix of these is the wrong one.
constexpr std::array<std::string_view, 7> kP2pLegend = {"OK", "CNS", "GNS", "TNS", "NS", "DR", "U"};
constexpr std::array<std::string_view, 3> kAffinityColumns = {"CPU Affinity", "NUMA Affinity",
                                                              "GPU NUMA ID"};
// Far more NVLinks than any GPU has, and a bound on the number itself.
constexpr int kMaxNvlinks = 1024;
// Devices in a matrix: GPUs (limits::kMaxGpusPerNode) and NICs.
constexpr std::size_t kMaxDevices = 1024;

std::optional<SmiCell> legend_entry(std::string_view word) {
  SmiCell cell;
  if (word == "X") {
    cell.path = SmiPath::self;
  } else if (word == "PIX") {
    cell.path = SmiPath::pix;
  } else if (word == "PXB") {
    cell.path = SmiPath::pxb;
  } else if (word == "PHB") {
    cell.path = SmiPath::phb;
  } else if (word == "NODE") {
    cell.path = SmiPath::node;
  } else if (word == "SYS" || word == "SOC") {
    cell.path = SmiPath::sys;
  } else if (word.size() > 2 && word.substr(0, 2) == "NV" && all_digits(word.substr(2)) &&
             word.size() <= 6) {
    cell.path = SmiPath::nvlink;
    cell.nvlinks = std::stoi(std::string(word.substr(2)));
    if (cell.nvlinks < 1 || cell.nvlinks > kMaxNvlinks) return std::nullopt;
  } else {
    return std::nullopt;
  }
  return cell;
}

// An affinity column's value rather than a link: "0-19,40-59", "3", "N/A".
bool looks_like_affinity(std::string_view word) {
  return word == "N/A" || (!word.empty() && std::isdigit(static_cast<unsigned char>(word[0])));
}

bool is_gpu_name(std::string_view name) {
  return name.size() > 3 && name.substr(0, 3) == "GPU" && all_digits(name.substr(3));
}

bool is_device_name(std::string_view name) {
  return !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-' || c == '.' ||
           c == ':';
  });
}

// "0-19,40-59" as ranges; nullopt when it is not a list of CPU numbers.
std::optional<std::vector<std::pair<long, long>>> cpu_ranges(std::string_view list) {
  std::vector<std::pair<long, long>> out;
  std::size_t start = 0;
  while (start <= list.size()) {
    std::size_t comma = list.find(',', start);
    if (comma == std::string_view::npos) comma = list.size();
    std::string_view item = list.substr(start, comma - start);
    std::size_t dash = item.find('-');
    std::string_view first = item.substr(0, dash);
    std::string_view last = dash == std::string_view::npos ? first : item.substr(dash + 1);
    // Up to 2^20 CPUs: more than any machine, few enough to count in a long.
    if (!all_digits(first) || !all_digits(last) || first.size() > 7 || last.size() > 7) {
      return std::nullopt;
    }
    long a = std::stol(std::string(first)), b = std::stol(std::string(last));
    if (b < a || b >= (1L << 20)) return std::nullopt;
    out.emplace_back(a, b);
    if (comma == list.size()) break;
    start = comma + 1;
  }
  return out;
}

class MatrixReader {
 public:
  MatrixReader(std::string_view text, std::string name)
      : name_(std::move(name)), lines_(lines_of(text)) {}

  SmiTopology read() {
    topology_.file = name_;
    const std::size_t header = find_header();
    read_header(header);
    for (std::size_t row = 0; row < topology_.devices.size(); ++row)
      read_row(header + 1 + row, row);
    check_symmetric();
    read_nic_legend(header + 1 + topology_.devices.size());
    return std::move(topology_);
  }

 private:
  SourceMark mark(std::size_t line, int column) const {
    return SourceMark{name_, static_cast<int>(line) + 1, column};
  }

  // The first line naming GPU0 that is not GPU0's row (whose next word is X).
  std::size_t find_header() const {
    for (std::size_t i = 0; i < lines_.size(); ++i) {
      std::vector<Word> words = words_of(lines_[i]);
      if (!words.empty() && words[0].text == "GPU0" &&
          (words.size() == 1 || !legend_entry(words[1].text))) {
        return i;
      }
    }
    throw InputError(mark(0, 1), "",
                     "no matrix of nvidia-smi topo -m here: expected a header line naming GPU0, "
                     "GPU1, ... (and NICs), then a row for each; save the output of `nvidia-smi "
                     "topo -m` on the machine (`nvidia-smi -q` goes to --smi-query)");
  }

  void read_header(std::size_t line) {
    std::vector<Word> words = words_of(lines_[line]);
    // The affinity columns' names are several words.
    for (std::size_t i = 0; i < words.size(); ++i) {
      std::string column;
      for (std::string_view name : kAffinityColumns) {
        std::vector<Word> parts = words_of(name);
        if (i + parts.size() > words.size()) continue;
        bool same = true;
        for (std::size_t k = 0; k < parts.size(); ++k)
          same = same && words[i + k].text == parts[k].text;
        if (same) {
          column = name;
          affinity_columns_.push_back(column);
          i += parts.size() - 1;
          break;
        }
      }
      if (!column.empty()) continue;
      const Word& word = words[i];
      if (!affinity_columns_.empty()) {
        throw InputError(mark(line, word.column), word.text,
                         fmt::format("a column after the affinity columns; expected {}",
                                     join_alternatives(kAffinityColumns)));
      }
      add_device(word, line);
    }
  }

  void add_device(const Word& word, std::size_t line) {
    std::vector<SmiDevice>& devices = topology_.devices;
    if (!is_device_name(word.text)) {
      throw InputError(mark(line, word.column), printable(word.text),
                       "expected a device name of the header (GPU0, NIC0, mlx5_0, ...: letters, "
                       "digits, '_', '-', '.' or ':')");
    }
    for (const SmiDevice& earlier : devices) {
      if (earlier.name == word.text) {
        throw InputError(mark(line, word.column), word.text, "the header names this device twice");
      }
    }
    SmiDevice device;
    device.name = word.text;
    device.is_gpu = is_gpu_name(word.text);
    device.mark = mark(line, word.column);
    if (device.is_gpu) {
      const std::string expected = fmt::format("GPU{}", topology_.gpus);
      if (static_cast<int>(devices.size()) != topology_.gpus || word.text != expected) {
        throw InputError(
            mark(line, word.column), word.text,
            fmt::format("expected {} here: nvidia-smi names the GPUs GPU0, GPU1, "
                        "... in order, before the NICs",
                        static_cast<int>(devices.size()) == topology_.gpus ? expected
                                                                           : "no GPU after a NIC"));
      }
      if (topology_.gpus == limits::kMaxGpusPerNode) {
        throw InputError(mark(line, word.column), word.text,
                         fmt::format("more than {} GPUs in one node", limits::kMaxGpusPerNode));
      }
      ++topology_.gpus;
    }
    if (devices.size() == kMaxDevices) {
      throw InputError(mark(line, word.column), word.text,
                       fmt::format("more than {} devices in one matrix", kMaxDevices));
    }
    devices.push_back(std::move(device));
  }

  std::string header_devices() const {
    const std::vector<SmiDevice>& devices = topology_.devices;
    return devices.size() == 1
               ? devices.front().name
               : fmt::format("{} ... {}", devices.front().name, devices.back().name);
  }

  [[noreturn]] void cut_short(std::size_t line, std::size_t row) const {
    const std::size_t count = topology_.devices.size();
    throw InputError(
        mark(std::min(line, lines_.size() - 1), 1), topology_.devices[row].name,
        fmt::format("the matrix ends after {} of its {} rows ({} in the header): this row is "
                    "missing; give the whole output of nvidia-smi topo -m, as saved on the "
                    "machine (`nvidia-smi topo -m > topo.txt`)",
                    row, count, header_devices()));
  }

  [[noreturn]] void not_square(std::size_t line, int column, std::size_t row,
                               std::size_t entries) const {
    const std::size_t count = topology_.devices.size();
    throw InputError(mark(line, column), topology_.devices[row].name,
                     fmt::format("the row has {} {} entries where the header names {} devices "
                                 "({}): the matrix must be square; a cut or edited line?",
                                 entries < count ? "only" : "more than", std::min(entries, count),
                                 count, header_devices()));
  }

  void read_row(std::size_t line, std::size_t row) {
    SmiDevice& device = topology_.devices[row];
    if (line >= lines_.size()) cut_short(line, row);
    std::string_view text = lines_[line];
    std::vector<Word> words = words_of(text);
    if (words.empty() || words[0].text == "Legend:") cut_short(line, row);
    if (words[0].text != device.name) {
      for (const SmiDevice& other : topology_.devices) {
        if (other.name == words[0].text) {
          throw InputError(mark(line, words[0].column), device.name,
                           fmt::format("expected this device's row here, got {}'s: the rows "
                                       "follow the header's order",
                                       other.name));
        }
      }
      throw InputError(mark(line, words[0].column), device.name,
                       fmt::format("expected this device's row here (row {} of the {} the header "
                                   "names), got '{}'",
                                   row + 1, topology_.devices.size(), printable(words[0].text)));
    }
    device.mark = mark(line, words[0].column);
    const std::size_t count = topology_.devices.size();
    std::vector<SmiCell> cells;
    for (std::size_t c = 0; c < count; ++c) {
      if (c + 1 >= words.size()) {
        not_square(line, static_cast<int>(text.size()) + 1, row, c);
      }
      const Word& word = words[c + 1];
      std::optional<SmiCell> cell = legend_entry(word.text);
      if (!cell) {
        if (looks_like_affinity(word.text)) not_square(line, word.column, row, c);
        throw InputError(mark(line, word.column),
                         fmt::format("{}.{}", device.name, topology_.devices[c].name),
                         unknown_entry(word.text));
      }
      cell->mark = mark(line, word.column);
      cells.push_back(*cell);
    }
    std::size_t next = count + 1;
    if (next < words.size() && legend_entry(words[next].text)) {
      not_square(line, words[next].column, row, count + 1);
    }
    topology_.cells.push_back(std::move(cells));
    read_affinity(line, row, words, next);
  }

  static std::string unknown_entry(std::string_view word) {
    std::string hint;
    if (std::find(kP2pLegend.begin(), kP2pLegend.end(), word) != kP2pLegend.end()) {
      hint = "; this looks like nvidia-smi topo -p2p's matrix, give topo -m's";
    } else {
      hint = did_you_mean(word, kLegend);
    }
    return fmt::format(
        "expected an entry of nvidia-smi topo -m's legend: {} (NV1, NV2, ...); "
        "got '{}'{}",
        join_alternatives(kLegend), printable(word), hint);
  }

  // The values after a row's entries: with tabs, one field per column (an empty CPU Affinity
  // stays empty); with spaces, the words in the header's order.
  void read_affinity(std::size_t line, std::size_t row, const std::vector<Word>& words,
                     std::size_t next) {
    SmiDevice& device = topology_.devices[row];
    std::string_view text = lines_[line];
    std::vector<std::pair<std::string, int>> values;  // text, column
    const std::size_t after_cells = words[next - 1].end;
    if (text.find('\t', after_cells) != std::string_view::npos) {
      std::size_t start = text.find('\t', after_cells);
      while (start != std::string_view::npos) {
        std::size_t end = text.find('\t', start + 1);
        std::string_view field =
            text.substr(start + 1, (end == std::string_view::npos ? text.size() : end) - start - 1);
        values.emplace_back(trimmed(field), static_cast<int>(start) + 2);
        start = end;
      }
      // Trailing empty fields carry nothing (a NIC row ends with a tab).
      while (!values.empty() && values.back().first.empty())
        values.pop_back();
    } else {
      for (std::size_t i = next; i < words.size(); ++i)
        values.emplace_back(words[i].text, words[i].column);
    }
    if (!device.is_gpu) {
      if (!values.empty()) {
        throw InputError(mark(line, values.front().second), device.name,
                         fmt::format("unexpected '{}' after the row's {} entries (only GPU rows "
                                     "have affinity columns)",
                                     printable(values.front().first), topology_.devices.size()));
      }
      return;
    }
    // nvidia-smi puts an empty field before GPU NUMA ID; with tabs, skip empty fields past the
    // first two columns, which are the ones read.
    std::vector<std::pair<std::string, int>> kept;
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (i >= 2 && values[i].first.empty()) continue;
      kept.push_back(values[i]);
    }
    if (kept.size() > affinity_columns_.size()) {
      const auto& extra = kept[affinity_columns_.size()];
      throw InputError(mark(line, extra.second), device.name,
                       fmt::format("unexpected '{}': the header names {} column{} after the "
                                   "devices",
                                   printable(extra.first), affinity_columns_.size(),
                                   affinity_columns_.size() == 1 ? "" : "s"));
    }
    for (std::size_t i = 0; i < kept.size(); ++i) {
      const auto& [value, column] = kept[i];
      if (value.empty() || value == "N/A") continue;
      const std::string key = fmt::format("{}.{}", device.name, affinity_columns_[i]);
      if (affinity_columns_[i] == "CPU Affinity") {
        if (!cpu_ranges(value)) {
          throw InputError(mark(line, column), key,
                           fmt::format("expected CPU numbers such as 0-19,40-59, or N/A; got '{}'",
                                       printable(value)));
        }
        device.cpu_affinity = value;
      } else if (affinity_columns_[i] == "NUMA Affinity") {
        if (!cpu_ranges(value)) {
          throw InputError(mark(line, column), key,
                           fmt::format("expected a NUMA node number such as 0 (or a list, 0-1), "
                                       "or N/A; got '{}'",
                                       printable(value)));
        }
        device.numa_affinity = value;
      }
    }
  }

  void check_symmetric() const {
    const std::size_t count = topology_.devices.size();
    for (std::size_t a = 0; a < count; ++a) {
      for (std::size_t b = 0; b < count; ++b) {
        const SmiCell& cell = topology_.cells[a][b];
        const std::string key =
            fmt::format("{}.{}", topology_.devices[a].name, topology_.devices[b].name);
        if ((a == b) != (cell.path == SmiPath::self)) {
          throw InputError(cell.mark, key,
                           a == b ? "expected X, the device itself, on the diagonal"
                                  : "X is the device itself; two devices cannot be one");
        }
        const SmiCell& mirror = topology_.cells[b][a];
        if (a > b && (cell.path != mirror.path || cell.nvlinks != mirror.nvlinks)) {
          throw InputError(
              cell.mark, key,
              fmt::format("{} here but {} at {}.{} ({}): nvidia-smi prints a symmetric matrix; "
                          "was it edited?",
                          topology_.label(static_cast<int>(a), static_cast<int>(b)),
                          topology_.label(static_cast<int>(b), static_cast<int>(a)),
                          topology_.devices[b].name, topology_.devices[a].name, mirror.mark.str()));
        }
      }
    }
  }

  // "NIC Legend:" then "  NIC0: mlx5_0" lines.
  void read_nic_legend(std::size_t from) {
    bool in_legend = false;
    for (std::size_t i = from; i < lines_.size(); ++i) {
      std::vector<Word> words = words_of(lines_[i]);
      if (words.size() == 2 && words[0].text == "NIC" && words[1].text == "Legend:") {
        in_legend = true;
      } else if (in_legend && words.size() == 2 && words[0].text.size() > 1 &&
                 words[0].text.back() == ':' && is_device_name(words[1].text)) {
        std::string nic = words[0].text.substr(0, words[0].text.size() - 1);
        for (const SmiDevice& device : topology_.devices) {
          if (device.name == nic) topology_.nic_names[nic] = words[1].text;
        }
      }
    }
  }

  std::string name_;
  std::vector<std::string_view> lines_;
  std::vector<std::string> affinity_columns_;
  SmiTopology topology_;
};

// ---------------------------------------------------------------------------------------------
// Product names

// The lower-case letters-and-digits words of a name, "NVIDIA" left out: "NVIDIA A100-SXM4-80GB"
// -> a100, sxm4, 80gb.
std::vector<std::string> name_words(std::string_view name) {
  std::vector<std::string> out;
  std::string word;
  for (char c : std::string(name) + " ") {
    if (std::isalnum(static_cast<unsigned char>(c)) != 0) {
      word += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else if (!word.empty()) {
      if (word != "nvidia") out.push_back(word);
      word.clear();
    }
  }
  return out;
}

// Product names nvidia-smi prints that no catalogue name spells. The H100 SXM5 80 GB calls
// itself "NVIDIA H100 80GB HBM3" (the runtime's device name on the H100 SXM that
// validate/data/h100-sxm-1gpu was measured on; the PCIe board is "NVIDIA H100 PCIe").
constexpr std::array<std::pair<std::string_view, std::string_view>, 1> kKnownProducts = {{
    {"NVIDIA H100 80GB HBM3", "h100-sxm"},
}};

// ---------------------------------------------------------------------------------------------
// The machine

class UnionFind {
 public:
  explicit UnionFind(std::size_t size) : parent_(size) {
    std::iota(parent_.begin(), parent_.end(), 0);
  }
  int find(int v) {
    while (parent_[static_cast<std::size_t>(v)] != v) {
      int& p = parent_[static_cast<std::size_t>(v)];
      p = parent_[static_cast<std::size_t>(p)];
      v = p;
    }
    return v;
  }
  void unite(int a, int b) {
    a = find(a);
    b = find(b);
    // The lower index stays the root, so roots are the components' first devices.
    if (a != b) parent_[static_cast<std::size_t>(std::max(a, b))] = std::min(a, b);
  }

 private:
  std::vector<int> parent_;
};

// "a, b and c".
std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += i + 1 == items.size() ? " and " : ", ";
    out += items[i];
  }
  return out;
}

// "GPUs 0-3", "GPUs 0, 2 and 5", "GPU 4".
std::string gpu_list(std::vector<int> gpus) {
  std::sort(gpus.begin(), gpus.end());
  std::vector<std::string> parts;
  for (std::size_t i = 0; i < gpus.size();) {
    std::size_t j = i;
    while (j + 1 < gpus.size() && gpus[j + 1] == gpus[j] + 1)
      ++j;
    parts.push_back(j > i + 1 ? fmt::format("{}-{}", gpus[i], gpus[j])
                              : fmt::format("{}", gpus[i]));
    if (j == i + 1) parts.push_back(fmt::format("{}", gpus[j]));
    i = j + 1;
  }
  return fmt::format("{} {}", gpus.size() == 1 ? "GPU" : "GPUs", joined(parts));
}

// Up to `most` items, then how many more.
std::string some_of(const std::vector<std::string>& items, std::size_t most,
                    std::string_view separator = ", ") {
  std::string out;
  for (std::size_t i = 0; i < items.size() && i < most; ++i)
    out += (i > 0 ? std::string(separator) : "") + items[i];
  if (items.size() > most) out += fmt::format(" and {} more", items.size() - most);
  return out;
}

std::string pair_name(int a, int b) {
  return fmt::format("GPU{}-GPU{}", a, b);
}

// Words of a note wrapped into comment lines of at most `width` characters.
std::string comment_lines(std::string_view first, std::string_view rest, std::string_view text,
                          std::size_t width) {
  std::string out, line(first);
  bool empty = true;
  for (const Word& word : words_of(text)) {
    if (!empty && line.size() + 1 + word.text.size() > width) {
      out += line + "\n";
      line = std::string(rest);
      empty = true;
    }
    line += (empty ? "" : " ") + printable(word.text, word.text.size());
    empty = false;
  }
  return out + line + "\n";
}

// A rate as the bundled machine files write it: one decimal.
std::string number(double value) {
  return fmt::format("{:.1f}", value);
}

}  // namespace

std::string SmiTopology::label(int a, int b) const {
  const SmiCell& c = cell(a, b);
  switch (c.path) {
    case SmiPath::self:
      return "X";
    case SmiPath::nvlink:
      return fmt::format("NV{}", c.nvlinks);
    case SmiPath::pix:
      return "PIX";
    case SmiPath::pxb:
      return "PXB";
    case SmiPath::phb:
      return "PHB";
    case SmiPath::node:
      return "NODE";
    case SmiPath::sys:
      return "SYS";
  }
  return "?";
}

std::string SmiTopology::device_name(int device) const {
  const std::string& name = devices[static_cast<std::size_t>(device)].name;
  auto legend = nic_names.find(name);
  return legend == nic_names.end() ? name : fmt::format("{} ({})", name, legend->second);
}

SmiTopology parse_smi_topology(std::string_view text, const std::string& name) {
  return MatrixReader(text, name).read();
}

SmiTopology read_smi_topology(const std::filesystem::path& file) {
  return parse_smi_topology(yaml::read_input_file(file), file.string());
}

SmiQuery parse_smi_query(std::string_view text, const std::string& name) {
  SmiQuery query;
  query.file = name;
  std::vector<std::string_view> lines = lines_of(text);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    std::string_view line = lines[i];
    std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string key = trimmed(line.substr(0, colon));
    std::size_t start = colon + 1;
    while (start < line.size() && is_blank(line[start]))
      ++start;
    const std::string value = trimmed(line.substr(colon + 1));
    const SourceMark mark{name, static_cast<int>(i) + 1, static_cast<int>(start) + 1};
    if (key == "Product Name") {
      // Names are printed in messages: no control character reaches a terminal.
      query.products.push_back({printable(value, 200), mark});
    } else if (key == "Attached GPUs") {
      if (!all_digits(value) || value.size() > 4) {
        throw InputError(mark, key,
                         fmt::format("expected a number of GPUs; got '{}'", printable(value)));
      }
      query.attached_gpus = std::stoi(value);
      query.attached_mark = mark;
    }
  }
  if (query.products.empty()) {
    throw InputError(SourceMark{name, 1, 1}, "Product Name",
                     "no 'Product Name : ...' line here: expected the output of `nvidia-smi -q` "
                     "(the topology matrix, `nvidia-smi topo -m`, goes to --from-nvidia-smi)");
  }
  return query;
}

SmiQuery read_smi_query(const std::filesystem::path& file) {
  return parse_smi_query(yaml::read_input_file(file), file.string());
}

const GpuSpec* gpu_for_product_name(std::string_view product, const GpuCatalogue& catalogue) {
  const std::vector<std::string> words = name_words(product);
  if (words.empty()) return nullptr;
  for (const auto& [known, id] : kKnownProducts) {
    if (name_words(known) == words) {
      if (const GpuSpec* gpu = catalogue.find(id)) return gpu;
    }
  }
  const std::set<std::string> wanted(words.begin(), words.end());
  const GpuSpec* exact = nullptr;
  std::vector<const GpuSpec*> containing;
  for (const GpuSpec& gpu : catalogue.gpus) {
    if (is_cpu_architecture(gpu.architecture)) continue;
    const std::vector<std::string> own_words = name_words(gpu.name);
    const std::set<std::string> own(own_words.begin(), own_words.end());
    if (own == wanted) {
      if (exact != nullptr) return nullptr;
      exact = &gpu;
    } else if (std::includes(own.begin(), own.end(), wanted.begin(), wanted.end())) {
      containing.push_back(&gpu);
    }
  }
  if (exact != nullptr) return exact;
  return containing.size() == 1 ? containing.front() : nullptr;
}

std::vector<std::string> similar_gpu_ids(std::string_view product, const GpuCatalogue& catalogue,
                                         std::size_t most) {
  const std::vector<std::string> words = name_words(product);
  const std::set<std::string> wanted(words.begin(), words.end());
  std::vector<std::pair<int, std::string>> scored;  // (-shared words, id)
  for (const GpuSpec& gpu : catalogue.gpus) {
    if (is_cpu_architecture(gpu.architecture)) continue;
    const std::vector<std::string> own_words = name_words(gpu.name);
    const std::set<std::string> own(own_words.begin(), own_words.end());
    int shared = 0;
    for (const std::string& word : wanted)
      shared += own.count(word) > 0 ? 1 : 0;
    if (shared > 0) scored.emplace_back(-shared, gpu.id);
  }
  std::sort(scored.begin(), scored.end());
  std::vector<std::string> out;
  for (std::size_t i = 0; i < scored.size() && i < most; ++i)
    out.push_back(scored[i].second);
  return out;
}

std::string epochcast_path_label(const SmiCell& cell) {
  switch (cell.path) {
    case SmiPath::self:
      return "X";
    case SmiPath::nvlink:
      return fmt::format("NV{}", cell.nvlinks);
    case SmiPath::pix:
    case SmiPath::pxb:
      return "PIX";
    case SmiPath::phb:
    case SmiPath::node:
      return "PHB";
    case SmiPath::sys:
      return "SYS";
  }
  return "?";
}

namespace {

constexpr int kMaxSockets = 8;  // the machine format's host.sockets

// A set of GPUs the matrix keeps together: a NUMA node (PCIe paths short of SYS join devices
// into one; SYS parts two), with the affinity its GPUs agree on ("" when they differ or say
// nothing).
struct GpuGroup {
  std::vector<int> roots;  // the NUMA components (first devices) it joins
  std::vector<int> gpus;
  std::string numa, cpu;
};

// How the matrix groups its devices: behind PCIe switches (PIX or PXB apart, NICs included)
// and into NUMA nodes.
struct DeviceGroups {
  std::vector<int> switch_of;        // device -> its switch component's first device
  std::vector<GpuGroup> nodes;       // in the order of their first GPU
  std::vector<int> node_of;          // GPU -> its index in nodes
  std::vector<std::string> guessed;  // nodes joined on no evidence
  bool any_switch = false;           // some GPU shares a switch with another device
};

DeviceGroups group_devices(const SmiTopology& topology) {
  const int gpus = topology.gpus;
  const int devices = static_cast<int>(topology.devices.size());
  UnionFind same_switch(static_cast<std::size_t>(devices));
  UnionFind same_node(static_cast<std::size_t>(devices));
  for (int a = 0; a < devices; ++a) {
    for (int b = a + 1; b < devices; ++b) {
      const SmiPath path = topology.cell(a, b).path;
      if (path == SmiPath::pix || path == SmiPath::pxb) same_switch.unite(a, b);
      if (path != SmiPath::nvlink && path != SmiPath::sys) same_node.unite(a, b);
    }
  }
  std::set<std::pair<int, int>> apart;  // NUMA components some SYS entry parts
  for (int a = 0; a < devices; ++a) {
    for (int b = a + 1; b < devices; ++b) {
      const int ra = same_node.find(a), rb = same_node.find(b);
      if (topology.cell(a, b).path == SmiPath::sys && ra != rb) apart.insert(std::minmax(ra, rb));
    }
  }

  DeviceGroups out;
  for (int d = 0; d < devices; ++d) {
    out.switch_of.push_back(same_switch.find(d));
    if (d < gpus && d != out.switch_of.back()) out.any_switch = true;
  }
  for (int d = gpus; d < devices; ++d)
    out.any_switch = out.any_switch || out.switch_of[static_cast<std::size_t>(d)] < gpus;

  // The GPUs' NUMA components, in the order of their first GPU.
  std::vector<GpuGroup> components;
  for (int g = 0; g < gpus; ++g) {
    const SmiDevice& gpu = topology.devices[static_cast<std::size_t>(g)];
    const int root = same_node.find(g);
    auto found = std::find_if(components.begin(), components.end(),
                              [&](const GpuGroup& c) { return c.roots.front() == root; });
    if (found == components.end()) {
      components.push_back({{root}, {g}, gpu.numa_affinity, gpu.cpu_affinity});
    } else {
      found->gpus.push_back(g);
      if (found->numa != gpu.numa_affinity) found->numa.clear();
      if (found->cpu != gpu.cpu_affinity) found->cpu.clear();
    }
  }
  // Components nothing parts join the first node they fit: NVLink hides the PCIe path between
  // GPUs, so only NICs and the affinity columns can tell whether two share a NUMA node.
  for (const GpuGroup& c : components) {
    bool placed = false;
    for (GpuGroup& node : out.nodes) {
      bool parted = false;
      for (int root : node.roots)
        parted = parted || apart.count(std::minmax(root, c.roots.front())) > 0;
      if (parted) continue;
      const bool numa_known = !c.numa.empty() && !node.numa.empty();
      const bool cpu_known = !c.cpu.empty() && !node.cpu.empty();
      if (numa_known ? c.numa != node.numa : cpu_known && c.cpu != node.cpu) continue;
      if (!numa_known && !cpu_known) {
        out.guessed.push_back(fmt::format("{} and {}", gpu_list(node.gpus), gpu_list(c.gpus)));
      }
      node.roots.push_back(c.roots.front());
      node.gpus.insert(node.gpus.end(), c.gpus.begin(), c.gpus.end());
      if (node.numa != c.numa) node.numa.clear();
      if (node.cpu != c.cpu) node.cpu.clear();
      placed = true;
      break;
    }
    if (!placed) out.nodes.push_back(c);
  }
  out.node_of.assign(static_cast<std::size_t>(gpus), 0);
  for (std::size_t i = 0; i < out.nodes.size(); ++i) {
    for (int g : out.nodes[i].gpus)
      out.node_of[static_cast<std::size_t>(g)] = static_cast<int>(i);
  }
  return out;
}

// Each switch's devices, "GPUs 0 and 1 with mlx5_0", for the switches GPUs are behind.
std::vector<std::string> switch_texts(const SmiTopology& topology, const DeviceGroups& groups) {
  std::vector<std::string> out;
  std::set<int> seen;
  for (int g = 0; g < topology.gpus; ++g) {
    const int root = groups.switch_of[static_cast<std::size_t>(g)];
    if (!seen.insert(root).second) continue;
    std::vector<int> members;
    std::vector<std::string> others;
    for (int d = 0; d < static_cast<int>(topology.devices.size()); ++d) {
      if (groups.switch_of[static_cast<std::size_t>(d)] != root) continue;
      if (d < topology.gpus) {
        members.push_back(d);
      } else {
        others.push_back(topology.device_name(d));
      }
    }
    out.push_back(others.empty()
                      ? gpu_list(members)
                      : fmt::format("{} with {}", gpu_list(members), some_of(others, 4)));
  }
  return out;
}

// The from_matrix notes of the grouping: devices, sockets, switches.
void describe_groups(SmiMachine& m, const SmiTopology& topology, const DeviceGroups& groups) {
  std::vector<std::string> nics;
  for (int d = topology.gpus; d < static_cast<int>(topology.devices.size()); ++d)
    nics.push_back(topology.device_name(d));
  m.from_matrix.push_back(
      fmt::format("{} GPU{}{}.", topology.gpus, topology.gpus == 1 ? "" : "s",
                  nics.empty() ? std::string()
                               : fmt::format(" and {} NIC{}: {}", nics.size(),
                                             nics.size() == 1 ? "" : "s", some_of(nics, 6))));
  std::vector<std::string> node_texts;
  for (const GpuGroup& node : groups.nodes)
    node_texts.push_back(gpu_list(node.gpus));
  if (groups.nodes.size() == 1) {
    m.from_matrix.push_back(
        fmt::format("One socket: no SYS entry parts the GPUs ({}).", node_texts.front()));
  } else {
    m.from_matrix.push_back(fmt::format(
        "{} sockets, the NUMA nodes that SYS entries part: {}. A socket of the machine format "
        "is a NUMA node of the matrix (a CPU's root complex; the link between sockets is what "
        "SYS crosses).",
        groups.nodes.size(), some_of(node_texts, 8, "; ")));
  }
  for (const std::string& text : groups.guessed) {
    m.from_matrix.push_back(fmt::format(
        "Nothing in the matrix says whether {} share a NUMA node (NVLink hides the PCIe path "
        "between GPUs, and no NIC or affinity column tells): taken as one.",
        text));
  }
  // NUMA Affinity values several nodes share: SYS parts GPUs the column puts together.
  std::map<std::string, std::vector<int>> by_numa;
  std::map<std::string, int> nodes_of_numa;
  for (const GpuGroup& node : groups.nodes) {
    if (node.numa.empty()) continue;
    by_numa[node.numa].insert(by_numa[node.numa].end(), node.gpus.begin(), node.gpus.end());
    ++nodes_of_numa[node.numa];
  }
  std::vector<std::string> shared;
  for (const auto& [numa, members] : by_numa) {
    if (nodes_of_numa[numa] > 1) {
      shared.push_back(
          fmt::format("node {}: {} in {} sockets", numa, gpu_list(members), nodes_of_numa[numa]));
    }
  }
  if (!shared.empty()) {
    m.from_matrix.push_back(fmt::format(
        "SYS entries part GPUs of one NUMA Affinity ({}): the machine follows the entries, not "
        "the affinity column.",
        joined(shared)));
  }
  if (m.switches_per_socket == 0) {
    m.from_matrix.push_back(
        "No PCIe switch under a GPU: no GPU is PIX or PXB from another device, so the GPUs "
        "hang off their socket's root complex.");
  } else {
    m.from_matrix.push_back(
        fmt::format("{} PCIe switch{} per socket: the devices PIX or PXB apart share one ({}).",
                    m.switches_per_socket, m.switches_per_socket == 1 ? "" : "es",
                    some_of(switch_texts(topology, groups), 8, "; ")));
  }
}

// GPU pairs whose PCIe path, in the format's layout of `sockets` sockets with `switches`
// switches each (GPUs filled in order, equal shares), is not the matrix's. Pairs joined by
// NVLink show NV# in any layout and are not counted.
int differing_pairs(const SmiTopology& topology, int sockets, int switches) {
  const int gpus = topology.gpus;
  const int per_socket = std::max(1, switches);
  const int places = sockets * per_socket;
  int count = 0;
  for (int a = 0; a < gpus; ++a) {
    for (int b = a + 1; b < gpus; ++b) {
      const SmiCell& cell = topology.cell(a, b);
      if (cell.path == SmiPath::nvlink) continue;
      const int pa = a * places / gpus, pb = b * places / gpus;
      const char* drawn = switches > 0 && pa == pb             ? "PIX"
                          : pa / per_socket == pb / per_socket ? "PHB"
                                                               : "SYS";
      count += epochcast_path_label(cell) != drawn ? 1 : 0;
    }
  }
  return count;
}

// Sockets and switches: the matrix's own grouping where the format can draw it; else, of every
// layout the format draws, the one whose GPU pairs take the matrix's path most often (the
// matrix's grouping wins a tie). Says where the format's placement cannot follow the matrix.
void choose_layout(SmiMachine& m, const SmiTopology& topology, const DeviceGroups& groups) {
  const int gpus = topology.gpus;
  const int nodes = static_cast<int>(groups.nodes.size());
  const int derived_sockets = std::min(nodes, kMaxSockets);
  int derived_switches = 0;
  if (groups.any_switch) {
    for (const GpuGroup& node : groups.nodes) {
      std::set<int> switches;
      for (int g : node.gpus)
        switches.insert(groups.switch_of[static_cast<std::size_t>(g)]);
      derived_switches = std::max(derived_switches, static_cast<int>(switches.size()));
    }
    derived_switches = std::min(derived_switches, gpus / derived_sockets);
  }
  m.sockets = derived_sockets;
  m.switches_per_socket = derived_switches;
  int fewest = differing_pairs(topology, m.sockets, m.switches_per_socket);
  for (int sockets = 1; sockets <= std::min(gpus, kMaxSockets) && fewest > 0; ++sockets) {
    for (int switches = 0; switches <= gpus / sockets; ++switches) {
      const int differing = differing_pairs(topology, sockets, switches);
      if (differing < fewest) {
        fewest = differing;
        m.sockets = sockets;
        m.switches_per_socket = switches;
      }
    }
  }
  if (nodes > kMaxSockets) {
    m.not_expressed.push_back(fmt::format(
        "The matrix parts the GPUs into {} NUMA nodes; the format has at most {} sockets.", nodes,
        kMaxSockets));
  }
  if (m.sockets != derived_sockets || m.switches_per_socket != derived_switches) {
    m.not_expressed.push_back(fmt::format(
        "Drawn as the matrix groups them ({} socket{}, {} PCIe switch{} per socket), {} GPU "
        "pairs would take another path than the matrix's; {} socket{} with {} switch{} each, "
        "the format's closest layout, leave {}.",
        derived_sockets, derived_sockets == 1 ? "" : "s", derived_switches,
        derived_switches == 1 ? "" : "es",
        differing_pairs(topology, derived_sockets, derived_switches), m.sockets,
        m.sockets == 1 ? "" : "s", m.switches_per_socket, m.switches_per_socket == 1 ? "" : "es",
        fewest));
  }

  // The format's places against the matrix's groups.
  const int per_socket = std::max(1, m.switches_per_socket);
  const int places = m.sockets * per_socket;
  const auto place = [&](int g) { return g * places / gpus; };
  bool socket_differs = false, switch_differs = false;
  for (int a = 0; a < gpus; ++a) {
    for (int b = a + 1; b < gpus; ++b) {
      const bool same_node = groups.node_of[static_cast<std::size_t>(a)] ==
                             groups.node_of[static_cast<std::size_t>(b)];
      socket_differs =
          socket_differs || same_node != (place(a) / per_socket == place(b) / per_socket);
      if (m.switches_per_socket > 0) {
        const bool together = groups.switch_of[static_cast<std::size_t>(a)] ==
                              groups.switch_of[static_cast<std::size_t>(b)];
        switch_differs = switch_differs || together != (place(a) == place(b));
      }
    }
  }
  if (!socket_differs && !switch_differs) return;
  std::vector<std::string> format_places, node_texts;
  for (int p = 0; p < places; ++p) {
    std::vector<int> members;
    for (int g = 0; g < gpus; ++g)
      if (place(g) == p) members.push_back(g);
    if (!members.empty()) format_places.push_back(gpu_list(members));
  }
  for (const GpuGroup& node : groups.nodes)
    node_texts.push_back(gpu_list(node.gpus));
  m.not_expressed.push_back(fmt::format(
      "The format fills {} with consecutive, equal shares of the GPUs ({}); the matrix groups "
      "them otherwise ({}), and is drawn the format's way (between GPUs joined by NVLink the "
      "path shows NV# either way).",
      m.switches_per_socket > 0 ? "sockets and PCIe switches" : "sockets",
      some_of(format_places, 8, "; "),
      switch_differs ? "switches: " + some_of(switch_texts(topology, groups), 8, "; ")
                     : "sockets: " + some_of(node_texts, 8, "; ")));
}

// PXB and NODE, which the format draws as PIX and PHB.
void note_drawn_paths(SmiMachine& m, const SmiTopology& topology) {
  bool any_pxb = false;
  std::vector<std::string> node_pairs, pxb_pairs;
  for (int a = 0; a < static_cast<int>(topology.devices.size()); ++a) {
    for (int b = a + 1; b < static_cast<int>(topology.devices.size()); ++b) {
      const SmiPath path = topology.cell(a, b).path;
      any_pxb = any_pxb || path == SmiPath::pxb;
      if (b >= topology.gpus) continue;
      if (path == SmiPath::node) node_pairs.push_back(pair_name(a, b));
      if (path == SmiPath::pxb) pxb_pairs.push_back(pair_name(a, b));
    }
  }
  if (!pxb_pairs.empty() || (any_pxb && m.switches_per_socket > 0)) {
    m.not_expressed.push_back(fmt::format(
        "PXB (several PCIe switches, no host bridge) is drawn as one switch, which `epochcast "
        "topo` shows as PIX: the format has one level of PCIe switches{}.",
        pxb_pairs.empty() ? std::string(" (here between GPUs and NICs)")
                          : fmt::format(" ({})", some_of(pxb_pairs, 8))));
  }
  if (!node_pairs.empty()) {
    m.not_expressed.push_back(fmt::format(
        "NODE (across the host bridges of one NUMA node) is drawn as PHB, through the socket's "
        "one root complex: the format has one per socket ({}).",
        some_of(node_pairs, 8)));
  }
}

// NVLink: an NVSwitch fabric where every pair shows the same NV# and no direct wiring of the
// GPU's links could give it; else the pairs as the matrix gives them (shape pairs where they
// are GPUs 0-1, 2-3, ... with all their links).
void choose_nvlink(SmiMachine& m, const SmiTopology& topology, const GpuSpec& gpu) {
  const int gpus = topology.gpus;
  std::vector<NvlinkTopology::Pair> pairs;
  bool every_pair_same = gpus >= 2;
  const SmiCell* first = nullptr;
  std::string first_key;
  for (int a = 0; a < gpus; ++a) {
    for (int b = a + 1; b < gpus; ++b) {
      const SmiCell& cell = topology.cell(a, b);
      if (cell.path != SmiPath::nvlink) {
        every_pair_same = false;
        continue;
      }
      if (first == nullptr) {
        first = &cell;
        first_key = fmt::format("GPU{}.GPU{}", a, b);
      }
      every_pair_same = every_pair_same && cell.nvlinks == first->nvlinks;
      pairs.push_back({a, b, cell.nvlinks});
    }
  }
  if (first == nullptr) {
    m.from_matrix.push_back("No NVLink: no NV# entry between GPUs.");
    return;
  }
  if (!gpu.nvlink) {
    throw InputError(first->mark, first_key,
                     fmt::format("NV{}: the matrix joins GPUs by NVLink, but the catalogue's {} "
                                 "({}) has none; give the GPU's catalogue id with --gpu",
                                 first->nvlinks, gpu.name, gpu.id));
  }
  const int links = gpu.nvlink->links;
  const int each = first->nvlinks;
  if (every_pair_same && each * (gpus - 1) > links) {
    m.nvlink = NvlinkShape::nvswitch;
    m.from_matrix.push_back(fmt::format(
        "NV{} between every GPU pair, more than the {} NVLinks of a {} could wire directly: an "
        "NVSwitch fabric, which each GPU reaches with all its links.",
        each, links, gpu.name));
    if (each != links) {
      m.not_expressed.push_back(fmt::format(
          "The NVSwitch fabric joins every pair with all {} NVLinks of the catalogue's {} (NV{}); "
          "the matrix shows NV{}.",
          links, gpu.name, links, each));
    }
    return;
  }
  std::vector<int> per_gpu(static_cast<std::size_t>(gpus), 0);
  for (const NvlinkTopology::Pair& p : pairs) {
    per_gpu[static_cast<std::size_t>(p.a)] += p.links;
    per_gpu[static_cast<std::size_t>(p.b)] += p.links;
  }
  for (int g = 0; g < gpus; ++g) {
    const SmiDevice& row = topology.devices[static_cast<std::size_t>(g)];
    if (per_gpu[static_cast<std::size_t>(g)] > links) {
      throw InputError(
          row.mark, row.name,
          fmt::format("the row's NV# entries add up to {} NVLinks, more than the {} of the "
                      "catalogue's {} ({}): the matrix is of another GPU; give its catalogue id "
                      "with --gpu",
                      per_gpu[static_cast<std::size_t>(g)], links, gpu.name, gpu.id));
    }
  }
  bool bridged_pairs = gpus % 2 == 0 && static_cast<int>(pairs.size()) == gpus / 2;
  for (const NvlinkTopology::Pair& p : pairs)
    bridged_pairs = bridged_pairs && p.a % 2 == 0 && p.b == p.a + 1 && p.links == links;
  m.nvlink = bridged_pairs ? NvlinkShape::pairs : NvlinkShape::explicit_links;
  m.nvlink_pairs = pairs;
  std::set<int> counts;
  for (const NvlinkTopology::Pair& p : pairs)
    counts.insert(p.links);
  std::vector<std::string> count_texts;
  for (int c : counts)
    count_texts.push_back(fmt::format("NV{}", c));
  m.from_matrix.push_back(
      fmt::format("{} GPU pair{} joined directly by NVLink ({}), as the matrix gives them{}.",
                  pairs.size(), pairs.size() == 1 ? "" : "s", some_of(count_texts, 8),
                  bridged_pairs ? ": GPUs 0-1, 2-3, ... with all their links (shape pairs)" : ""));
}

// The host's figures, which the matrix gives only in part (the CPUs the affinity column names)
// or not at all, and the other placeholders.
void host_figures(SmiMachine& m, const SmiTopology& topology, const GpuSpec& gpu) {
  m.placeholders.push_back("host.cpu: the matrix does not name the CPU.");
  std::vector<std::pair<long, long>> cpus;
  std::set<std::string> lists;
  for (int g = 0; g < topology.gpus; ++g) {
    const std::string& affinity = topology.devices[static_cast<std::size_t>(g)].cpu_affinity;
    if (affinity.empty()) continue;
    lists.insert(affinity);
    const std::vector<std::pair<long, long>> ranges =
        cpu_ranges(affinity).value_or(std::vector<std::pair<long, long>>{});
    cpus.insert(cpus.end(), ranges.begin(), ranges.end());
  }
  if (!cpus.empty()) {
    std::sort(cpus.begin(), cpus.end());
    long count = 0, covered_to = -1;
    for (const auto& [first, last] : cpus) {
      if (last > covered_to) {
        count += last - std::max(first, covered_to + 1) + 1;
        covered_to = last;
      }
    }
    m.cores = static_cast<int>(count);
    m.placeholders.push_back(fmt::format(
        "host.cores: {}, the logical CPUs the CPU Affinity column names ({}); cores counts "
        "physical cores, so halve it where each core runs two threads.",
        count, some_of(std::vector<std::string>(lists.begin(), lists.end()), 8)));
  } else {
    m.cores = std::max(topology.gpus, 1);
    m.placeholders.push_back(fmt::format(
        "host.cores: {}, one a GPU: the matrix has no CPU Affinity column to count.", m.cores));
  }
  m.cores = std::max(m.cores, m.sockets);
  if (m.sockets > 1) {
    m.socket_gb_per_s =
        std::round(pcie_link_bandwidth(gpu.pcie_generation, gpu.pcie_lanes).value() / 1e8) / 10;
    m.placeholders.push_back(fmt::format(
        "topology.sockets: the matrix has no rate for the link between sockets: {} GB/s per "
        "direction, one GPU's own PCIe link (PCIe {}.0 x{}), and 0.3 us, the bundled machines' "
        "estimate; put the link's figures here (QPI/UPI/xGMI links x their rate).",
        number(m.socket_gb_per_s), gpu.pcie_generation, gpu.pcie_lanes));
  }
  m.placeholders.push_back(
      "topology.pcie.peer_to_peer: true; the matrix does not say whether the driver allows GPU "
      "peer-to-peer (`nvidia-smi topo -p2p r` does: set false where it shows anything but OK, "
      "as GeForce boards without NVLink do).");
  const std::size_t nics = topology.devices.size() - static_cast<std::size_t>(topology.gpus);
  if (nics > 0) {
    m.placeholders.push_back(fmt::format(
        "topology.network: not written; the matrix shows {} NIC{} but not their rate: add the "
        "section (docs/formats.md) to simulate more than one node.",
        nics, nics == 1 ? "" : "s"));
  }
}

}  // namespace

SmiMachine smi_machine(const SmiTopology& topology, const GpuSpec& gpu, const std::string& name) {
  SmiMachine m;
  m.name = name;
  m.gpu_id = gpu.id;
  m.gpus = topology.gpus;
  m.input = topology.file;
  const DeviceGroups groups = group_devices(topology);
  choose_layout(m, topology, groups);
  describe_groups(m, topology, groups);
  choose_nvlink(m, topology, gpu);
  note_drawn_paths(m, topology);
  host_figures(m, topology, gpu);
  const std::string file_name = printable(std::filesystem::path(topology.file).filename().string());
  m.description = fmt::format(
      "{}x {} as nvidia-smi topo -m shows them in {}: {} socket{}, {} PCIe switch{} per "
      "socket, NVLink {}.",
      m.gpus, gpu.name, file_name, m.sockets, m.sockets == 1 ? "" : "s", m.switches_per_socket,
      m.switches_per_socket == 1 ? "" : "es", name_of(m.nvlink));
  return m;
}

std::string SmiMachine::yaml() const {
  constexpr std::size_t kWidth = 99;
  std::string out;
  out += comment_lines("# ", "# ",
                       fmt::format("Machine written by `epochcast topo --from-nvidia-smi` from "
                                   "the matrix in {}. docs/formats.md describes the format.",
                                   yaml::quoted(input)),
                       kWidth);
  const auto section = [&](std::string_view title, const std::vector<std::string>& notes) {
    if (notes.empty()) return;
    out += "#\n# " + std::string(title) + "\n";
    for (const std::string& note : notes)
      out += comment_lines("#   - ", "#     ", note, kWidth);
  };
  section("Read from the matrix:", from_matrix);
  section("Not in the matrix (edit these before trusting a prediction):", placeholders);
  section(
      "What the machine format cannot say as the matrix does (the closest description is "
      "written):",
      not_expressed);
  out += "kind: machine\n";
  out += "name: " + yaml::quoted(name) + "\n";
  out += "description: " + yaml::quoted(description) + "\n";
  out += "gpu: " + yaml::quoted(gpu_id) + "\n";
  out += fmt::format("gpus_per_node: {}\n", gpus);
  out += "host:\n";
  out += "  cpu: \"not in nvidia-smi topo -m\"\n";
  out += fmt::format("  sockets: {}\n", sockets);
  out += fmt::format("  cores: {}\n", cores);
  out += "topology:\n";
  out += "  pcie:\n";
  out += fmt::format("    switches_per_socket: {}\n", switches_per_socket);
  out += "    peer_to_peer: true\n";
  if (sockets > 1) {
    out += "  sockets:\n";
    out += fmt::format("    bandwidth_gb_per_s: {}\n", number(socket_gb_per_s));
    out += "    latency_us: 0.3\n";
  }
  out += "  nvlink:\n";
  out += fmt::format("    shape: {}\n", name_of(nvlink));
  if (nvlink == NvlinkShape::explicit_links) {
    out += "    links:\n";
    for (const NvlinkTopology::Pair& p : nvlink_pairs)
      out += fmt::format("      - [{}, {}, {}]\n", p.a, p.b, p.links);
  }
  const std::string from = fmt::format("nvidia-smi topo -m in {}", input);
  out += "  sources:\n";
  out += "    pcie: " +
         yaml::quoted(fmt::format("{}: sockets are the NUMA nodes SYS entries part; switches "
                                  "join the devices PIX or PXB apart",
                                  from)) +
         "\n";
  if (sockets > 1) {
    out += "    sockets: " +
           yaml::quoted(
               "placeholder: one GPU's PCIe link rate (GPU catalogue); the matrix has "
               "no figure for the link between sockets") +
           "\n";
  }
  out += "    nvlink: " +
         yaml::quoted(nvlink == NvlinkShape::none
                          ? fmt::format("{}: no NV# entry between GPUs", from)
                          : fmt::format("{}: the NV# entries between GPUs", from)) +
         "\n";
  return out;
}

}  // namespace epochcast
