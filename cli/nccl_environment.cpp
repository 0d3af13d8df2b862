// NCCL's environment variables (nccl_environment.h), after NCCL's own parsing: src/graph/
// tuning.cc (NCCL_ALGO, NCCL_PROTO: comma lists, a leading '^' excludes, names in any case)
// and src/graph/paths.cc (NCCL_P2P_LEVEL: LOC, NVL, PIX, PXB, PHB, SYS, or the legacy
// integers 0 to 5; NCCL_P2P_DISABLE=1).
#include "cli/nccl_environment.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include <fmt/format.h>

#include "core/input_error.h"

namespace epochcast::cli {

namespace {

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string trimmed(std::string_view text) {
  const std::size_t first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) return "";
  const std::size_t last = text.find_last_not_of(" \t");
  return std::string(text.substr(first, last - first + 1));
}

std::vector<std::string> split(std::string_view text, char separator) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find(separator, start);
    if (end == std::string_view::npos) end = text.size();
    out.push_back(trimmed(text.substr(start, end - start)));
    start = end + 1;
  }
  return out;
}

struct Source {
  SourceMark mark;
  std::string key;  // "NCCL_ALGO" or "--algo"
};

// NCCL's function names in NCCL_ALGO's per-collective form, by nccl-tests' names.
std::string_view nccl_function_of(std::string_view collective) {
  if (collective == "all_reduce") return "allreduce";
  if (collective == "all_gather") return "allgather";
  if (collective == "reduce_scatter") return "reducescatter";
  if (collective == "broadcast") return "broadcast";
  if (collective == "reduce") return "reduce";
  return "sendrecv";
}

// The list that applies to `collective`: the whole value, or in NCCL 2.24's per-collective form
// ("allreduce:tree,ring;allgather:ring") the part naming it (none: no restriction).
std::optional<std::string> list_for(const std::string& value, std::string_view collective,
                                    const Source& source) {
  if (value.find(':') == std::string::npos) return value;
  std::optional<std::string> found;
  for (const std::string& part : split(value, ';')) {
    if (part.empty()) continue;
    const std::size_t colon = part.find(':');
    if (colon == std::string::npos) {
      throw InputError(source.mark, source.key,
                       fmt::format("'{}' mixes plain and per-collective lists; expected "
                                   "FUNCTION:LIST;... (e.g. allreduce:tree,ring;allgather:ring)",
                                   value));
    }
    if (lower(trimmed(part.substr(0, colon))) == nccl_function_of(collective))
      found = part.substr(colon + 1);
  }
  return found;
}

// A NCCL_ALGO/NCCL_PROTO list as the set it allows: names from `names` (by index), '^' first
// to exclude them.
std::vector<std::size_t> allowed_by(const std::string& list,
                                    std::span<const std::string_view> names, const Source& source,
                                    const char* what) {
  std::string text = trimmed(list);
  const bool exclude = !text.empty() && text.front() == '^';
  if (exclude) text.erase(0, 1);
  std::vector<bool> named(names.size(), false);
  for (const std::string& item : split(text, ',')) {
    const std::string name = lower(item);
    const auto it = std::find(names.begin(), names.end(), name);
    if (it == names.end()) {
      throw InputError(
          source.mark, source.key,
          fmt::format("'{}' is not an {}; expected a comma-separated list of {} "
                      "(any case; '^' first excludes them){}",
                      item, what, join_alternatives(names), did_you_mean(name, names)));
    }
    named[static_cast<std::size_t>(it - names.begin())] = true;
  }
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < names.size(); ++i)
    if (named[i] != exclude) out.push_back(i);
  if (out.empty()) {
    throw InputError(source.mark, source.key, fmt::format("'{}' leaves no {} to run", list, what));
  }
  return out;
}

// NCCL's algorithm names (tuning.cc's ncclAlgoStr, lower-cased), with "collnet" standing for
// both CollNet variants.
constexpr std::string_view kAlgorithmNames[] = {
    "ring", "tree", "nvls", "nvlstree", "collnetdirect", "collnetchain", "collnet", "pat"};
constexpr CollectiveAlgorithm kAlgorithmOf[] = {
    CollectiveAlgorithm::ring,      CollectiveAlgorithm::tree,     CollectiveAlgorithm::nvls,
    CollectiveAlgorithm::nvls_tree, CollectiveAlgorithm::collnet,  CollectiveAlgorithm::collnet,
    CollectiveAlgorithm::collnet,   CollectiveAlgorithm::automatic};
constexpr std::string_view kProtocolNames[] = {"simple", "ll", "ll128"};

}  // namespace

NcclChoices read_nccl_choices(std::string_view collective, const std::string& algo_option,
                              const std::string& proto_option, const EnvironmentLookup& lookup) {
  const auto get = [&](const char* name) -> std::optional<std::string> {
    const char* value = lookup ? lookup(name) : std::getenv(name);
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
  const SourceMark environment{"<environment>", 0, 0};
  const SourceMark command_line{"<command line>", 0, 0};
  NcclChoices out;

  // NCCL_ALGO, or --algo over it.
  const bool algo_given = !algo_option.empty() && lower(algo_option) != "auto";
  std::optional<std::string> algo = algo_given ? std::optional(algo_option) : get("NCCL_ALGO");
  if (algo) {
    const Source source{algo_given ? command_line : environment,
                        algo_given ? "--algo" : "NCCL_ALGO"};
    if (!algo_given) out.applied.push_back("NCCL_ALGO=" + *algo);
    if (const auto list = list_for(*algo, collective, source)) {
      for (std::size_t i : allowed_by(*list, kAlgorithmNames, source, "NCCL algorithm")) {
        if (kAlgorithmOf[i] == CollectiveAlgorithm::automatic) {
          out.ignored.push_back("PAT (NCCL_ALGO): not modelled; the other algorithms named run");
          continue;
        }
        if (std::find(out.algorithms.begin(), out.algorithms.end(), kAlgorithmOf[i]) ==
            out.algorithms.end())
          out.algorithms.push_back(kAlgorithmOf[i]);
      }
      if (out.algorithms.empty()) {
        throw InputError(source.mark, source.key,
                         "PAT alone is not modelled; name another algorithm (ring, tree, ...)");
      }
    }
  }
  // NCCL_NVLS_ENABLE=0 takes NVLS and NVLSTree away.
  if (const auto nvls = get("NCCL_NVLS_ENABLE")) {
    out.applied.push_back("NCCL_NVLS_ENABLE=" + *nvls);
    if (trimmed(*nvls) == "0") {
      if (out.algorithms.empty()) {
        out.algorithms = {CollectiveAlgorithm::ring, CollectiveAlgorithm::tree,
                          CollectiveAlgorithm::collnet};
      }
      std::erase_if(out.algorithms, [](CollectiveAlgorithm a) {
        return a == CollectiveAlgorithm::nvls || a == CollectiveAlgorithm::nvls_tree;
      });
      if (out.algorithms.empty()) {
        throw InputError(environment, "NCCL_NVLS_ENABLE",
                         "0 with NCCL_ALGO naming only NVLS algorithms leaves none to run");
      }
    }
  }

  // NCCL_PROTO, or --proto over it.
  const bool proto_given = !proto_option.empty() && lower(proto_option) != "auto";
  std::optional<std::string> proto = proto_given ? std::optional(proto_option) : get("NCCL_PROTO");
  if (proto) {
    const Source source{proto_given ? command_line : environment,
                        proto_given ? "--proto" : "NCCL_PROTO"};
    if (!proto_given) out.applied.push_back("NCCL_PROTO=" + *proto);
    if (const auto list = list_for(*proto, collective, source)) {
      for (std::size_t i : allowed_by(*list, kProtocolNames, source, "NCCL protocol"))
        out.protocols.push_back(static_cast<sim::Protocol>(i));
    }
  }

  // NCCL_P2P_DISABLE=1, else NCCL_P2P_LEVEL.
  if (const auto disable = get("NCCL_P2P_DISABLE")) {
    out.applied.push_back("NCCL_P2P_DISABLE=" + *disable);
    if (trimmed(*disable) == "1") out.p2p_level = P2pLevel::loc;
  }
  if (const auto level = get("NCCL_P2P_LEVEL"); level && !out.p2p_level) {
    out.applied.push_back("NCCL_P2P_LEVEL=" + *level);
    const std::string name = lower(trimmed(*level));
    // NVL: P2P over NVLink only, which for PCIe pairs is LOC. Legacy integers as NCCL's
    // documentation lists them.
    constexpr std::string_view kNames[] = {"loc", "nvl", "pix", "pxb", "phb", "sys",
                                           "0",   "1",   "2",   "3",   "4",   "5"};
    constexpr P2pLevel kLevels[] = {P2pLevel::loc, P2pLevel::loc, P2pLevel::pix, P2pLevel::pxb,
                                    P2pLevel::phb, P2pLevel::sys, P2pLevel::loc, P2pLevel::pix,
                                    P2pLevel::pxb, P2pLevel::phb, P2pLevel::sys, P2pLevel::sys};
    const auto it = std::find(std::begin(kNames), std::end(kNames), name);
    if (it == std::end(kNames)) {
      throw InputError(environment, "NCCL_P2P_LEVEL",
                       fmt::format("'{}' is not a P2P level; expected LOC, NVL, PIX, PXB, PHB or "
                                   "SYS (or the legacy 0 to 5)",
                                   *level));
    }
    out.p2p_level = kLevels[it - std::begin(kNames)];
  }

  // Read by NCCL, not modelled here: said so rather than dropped.
  for (const char* name :
       {"NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS", "NCCL_MIN_CTAS", "NCCL_MAX_CTAS",
        "NCCL_BUFFSIZE", "NCCL_NTHREADS", "NCCL_IB_DISABLE", "NCCL_SHM_DISABLE",
        "NCCL_NET_GDR_LEVEL", "NCCL_CROSS_NIC", "NCCL_COLLNET_ENABLE", "NCCL_CUMEM_ENABLE"}) {
    if (const auto value = get(name)) {
      out.ignored.push_back(
          fmt::format("{}={}: read by NCCL, not modelled by this simulator", name, *value));
    }
  }
  return out;
}

}  // namespace epochcast::cli
