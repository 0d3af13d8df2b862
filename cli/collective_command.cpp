// `epochcast collective MACHINE`: one collective over a range of sizes, in nccl-tests' language
// (all_reduce_perf -b 8 -e 128M -f 2 -g 8): size, count, type, redop, time, algbw and busbw.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <numeric>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/terminal.h"
#include "core/format/text_table.h"
#include "core/input_error.h"
#include "core/io/output_file.h"
#include "core/spec/data_paths.h"
#include "core/spec/hardware_spec.h"
#include "core/spec/profile_figures.h"
#include "core/spec/profile_spec.h"
#include "options/command_line.h"
#include "options/scenario_options.h"
#include "sim/collectives/algorithms.h"
#include "sim/collectives/collective_sweep.h"
#include "sim/network/topology.h"

namespace epochcast::cli {

namespace {

// nccl-tests' operations by their -perf binaries' names.
constexpr std::string_view kOperations[] = {"all_reduce", "all_gather", "reduce_scatter",
                                            "broadcast",  "reduce",     "alltoall"};
// nccl-tests' -d types and their sizes in bytes.
struct DataType {
  std::string_view name;
  int bytes;
};
constexpr DataType kDataTypes[] = {{"int8", 1},   {"uint8", 1},   {"int32", 4}, {"uint32", 4},
                                   {"int64", 8},  {"uint64", 8},  {"half", 2},  {"float", 4},
                                   {"double", 8}, {"bfloat16", 2}};

struct CollectiveArgs {
  std::string machine;
  std::vector<std::string> catalogues;
  std::string op = "all_reduce";
  std::string min_bytes = "32M";
  std::string max_bytes = "32M";
  double factor = 0;
  std::string increment;
  int gpus = 0;
  int nodes = 1;
  std::string algorithm = "auto";
  std::string protocol = "auto";
  std::string dtype = "float";
  std::string profile;
  std::vector<std::string> set;
  std::string fidelity = "flows";
  int root = 0;
  std::string json, csv;
};

SourceMark command_line() {
  return SourceMark{"<command line>", 0, 0};
}

std::string_view choice(const std::string& given, std::span<const std::string_view> names,
                        const char* option, const char* what) {
  for (std::string_view name : names) {
    if (name == given) return name;
  }
  throw InputError(command_line(), option,
                   fmt::format("'{}' is not {}; expected one of {}{}", given, what,
                               fmt::join(names, ", "), did_you_mean(given, names)));
}

// The number `text` starts with, and how many characters it takes (0: none); read as the rest
// of the command line is, whatever the locale.
std::pair<double, std::size_t> leading_number(const std::string& text) {
  double value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc()) return {0, 0};
  return {value, static_cast<std::size_t>(end - text.data())};
}

// "8", "64K", "128M", "8G": bytes, the suffixes powers of 1024 as nccl-tests reads them.
std::int64_t parse_size(const std::string& text, const char* option) {
  constexpr std::int64_t kLargest = std::int64_t{1} << 40;  // 1 TiB per rank
  const auto [value, used] = leading_number(text);
  std::string suffix = text.substr(used);
  double scale = 1;
  if (suffix == "K" || suffix == "k") scale = 1024.0;
  if (suffix == "M" || suffix == "m") scale = 1024.0 * 1024;
  if (suffix == "G" || suffix == "g") scale = 1024.0 * 1024 * 1024;
  const bool known_suffix = suffix.empty() || scale > 1;
  const double bytes = value * scale;
  if (used == 0 || !known_suffix || !std::isfinite(bytes) || bytes < 1 ||
      bytes > static_cast<double>(kLargest) || bytes != std::floor(bytes)) {
    throw InputError(command_line(), option,
                     fmt::format("'{}' is not a size; expected a whole number of bytes from 1 to "
                                 "1T, optionally with K, M or G (powers of 1024), e.g. 8, 64K, "
                                 "128M, 8G",
                                 text));
  }
  return static_cast<std::int64_t>(bytes);
}

std::string render_table(const std::vector<sim::CollectiveRow>& rows, std::string_view type,
                         std::string_view redop, std::size_t width) {
  // nccl-tests' columns; on a narrow terminal the type, the reduction, the element count and
  // the channels go (in that order) before the times and bandwidths.
  using Align = TextTable::Align;
  TextTable table;
  table.add_column("size (B)");
  table.add_column("count", Align::right, {0, 2});
  table.add_column("type", Align::left, {0, 4});
  table.add_column("redop", Align::left, {0, 3});
  for (const char* c : {"time (us)", "algbw (GB/s)", "busbw (GB/s)"})
    table.add_column(c);
  table.add_column("algorithm", Align::left);
  table.add_column("protocol", Align::left);
  table.add_column("channels", Align::right, {0, 1});
  for (const sim::CollectiveRow& r : rows) {
    table.add_row({std::to_string(r.bytes), std::to_string(r.count), std::string(type),
                   std::string(redop), fmt::format("{:.2f}", r.seconds * 1e6),
                   fmt::format("{:.2f}", r.algbw / 1e9), fmt::format("{:.2f}", r.busbw / 1e9),
                   r.algorithm, r.protocol, std::to_string(r.channels)});
  }
  return table.render(width);
}

std::string render_csv(const std::vector<sim::CollectiveRow>& rows, std::string_view type,
                       std::string_view redop) {
  std::string out =
      "size_bytes,count,type,redop,time_us,algbw_gb_per_s,busbw_gb_per_s,algorithm,protocol,"
      "channels\n";
  for (const sim::CollectiveRow& r : rows) {
    out += fmt::format("{},{},{},{},{:.6f},{:.6f},{:.6f},{},{},{}\n", r.bytes, r.count, type, redop,
                       r.seconds * 1e6, r.algbw / 1e9, r.busbw / 1e9, r.algorithm, r.protocol,
                       r.channels);
  }
  return out;
}

std::string render_json(const std::vector<sim::CollectiveRow>& rows, nlohmann::ordered_json out) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const sim::CollectiveRow& r : rows) {
    list.push_back({{"size_bytes", r.bytes},
                    {"count", r.count},
                    {"time_us", r.seconds * 1e6},
                    {"algbw_gb_per_s", r.algbw / 1e9},
                    {"busbw_gb_per_s", r.busbw / 1e9},
                    {"algorithm", r.algorithm},
                    {"protocol", r.protocol},
                    {"channels", r.channels}});
  }
  out["rows"] = list;
  return out.dump(2) + "\n";
}

sim::Collective collective_of(std::string_view op) {
  if (op == "alltoall") return sim::Collective::all_to_all;
  for (std::size_t i = 0; i < std::size(sim::kCollectiveNames); ++i) {
    if (sim::kCollectiveNames[i] == op) return static_cast<sim::Collective>(i);
  }
  return sim::Collective::all_reduce;
}

// --set KEY=VALUE on the profile's figures (profile_figures.h), in the key's unit.
void apply_figure(HardwareProfile& profile, const std::string& assignment) {
  const std::size_t eq = assignment.find('=');
  const std::string key = assignment.substr(0, eq);
  std::vector<std::string_view> keys;
  for (const ProfileFigure& f : profile_figures())
    keys.push_back(f.key);
  const ProfileFigure* figure = find_profile_figure(key);
  if (eq == std::string::npos || !figure) {
    throw InputError(command_line(), "--set",
                     fmt::format("'{}' is not KEY=VALUE with a figure of the profile{}", assignment,
                                 figure ? "" : did_you_mean(key, keys)));
  }
  const std::string text = assignment.substr(eq + 1);
  const auto [value, used] = leading_number(text);
  if (used == 0 || used != text.size() || !(value >= figure->lower && value <= figure->upper)) {
    throw InputError(command_line(), "--set " + key,
                     fmt::format("expected a number from {:g} to {:g}, got '{}'", figure->lower,
                                 figure->upper, text));
  }
  set_profile_figure(profile, key, value);
}

}  // namespace

Command add_collective_command(CLI::App& app) {
  auto args = std::make_shared<CollectiveArgs>();
  CLI::App* command = app.add_subcommand(
      "collective",
      "Time one collective over a range of sizes on a machine, as nccl-tests' *_perf binaries "
      "do (size, count, time, algbw, busbw)");
  command->add_option("machine", args->machine, "A bundled machine name (e.g. dgx-h100) or a path")
      ->required();
  options::add_catalogue_option(*command, args->catalogues);
  command->add_option("--op", args->op,
                      "all_reduce, all_gather, reduce_scatter, broadcast, reduce or alltoall");
  command->add_option("-b,--minbytes", args->min_bytes,
                      "Smallest size per rank in bytes (K, M, G: powers of 1024)");
  command->add_option("-e,--maxbytes", args->max_bytes, "Largest size per rank");
  command->add_option("-f,--stepfactor", args->factor, "Multiply the size by this each step")
      ->check(options::number_within(1, 1024))
      ->default_str("2");
  command->add_option("-i,--stepbytes", args->increment, "Add this many bytes each step instead");
  command->add_option("-g,--ngpus", args->gpus, "GPUs per node")
      ->check(options::integer_within(1, 64))
      ->default_str("all of a node");
  command->add_option("--nodes", args->nodes, "Nodes (identical, over the machine's network)")
      ->check(options::integer_within(1, 65536));
  command->add_option("--algo", args->algorithm,
                      "auto, ring, tree, nvls, nvlstree or collnet (as NCCL_ALGO; trees, "
                      "NVLSTree and CollNet across nodes, NVLS inside one NVSwitch node)");
  command->add_option("--proto", args->protocol, "auto, ll, ll128 or simple (as NCCL_PROTO)");
  command->add_option("-d,--dtype", args->dtype,
                      "Data type: float, half, bfloat16, double, int8, uint8, int32, uint32, "
                      "int64, uint64");
  command->add_option("-r,--root", args->root, "Root rank of broadcast and reduce")
      ->check(options::integer_within(0, 65535));
  command->add_option("--profile", args->profile, "A profile instead of the machine's own");
  command->add_option("--set", args->set,
                      "KEY=VALUE: a profile figure (e.g. links.efficiency.nvswitch=0.7)");
  command->add_option("--fidelity", args->fidelity,
                      "flows (transfers share links, max-min fair) or analytic (alpha-beta)");
  command->add_option("--json", args->json, "Write the rows as JSON to this file ('-': stdout)");
  command->add_option("--csv", args->csv, "Write the rows as CSV to this file ('-': stdout)");
  return [args, command] {
    OutputFiles outputs;
    std::optional<OutputFile> csv, json;
    if (!args->csv.empty()) csv = outputs.add(args->csv, "--csv");
    if (!args->json.empty()) json = outputs.add(args->json, "--json");
    std::FILE* out = outputs.to_standard_output() ? stderr : stdout;

    sim::CollectiveSweep sweep;
    const std::string_view op = choice(args->op, kOperations, "--op", "an operation");
    std::vector<std::string_view> type_names;
    for (const DataType& t : kDataTypes)
      type_names.push_back(t.name);
    const std::string_view type = choice(args->dtype, type_names, "--dtype", "a data type");
    const int element_bytes =
        std::find_if(std::begin(kDataTypes), std::end(kDataTypes), [&](const DataType& t) {
          return t.name == type;
        })->bytes;
    // NCCL_PROTO and NCCL_ALGO take any case.
    for (std::string* name : {&args->protocol, &args->algorithm}) {
      std::transform(name->begin(), name->end(), name->begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    }
    constexpr std::string_view kAlgorithms[] = {"auto", "ring",     "tree",
                                                "nvls", "nvlstree", "collnet"};
    const std::string_view algorithm =
        choice(args->algorithm, kAlgorithms, "--algo", "an algorithm");
    constexpr std::string_view kProtocols[] = {"auto", "simple", "ll", "ll128"};
    const std::string_view protocol = choice(args->protocol, kProtocols, "--proto", "a protocol");
    if (protocol != "auto") {
      for (std::size_t p = 0; p < sim::kProtocolCount; ++p) {
        if (sim::kProtocolNames[p] == protocol) sweep.protocol = static_cast<sim::Protocol>(p);
      }
    }
    constexpr std::string_view kFidelities[] = {"flows", "analytic"};
    const bool flows = choice(args->fidelity, kFidelities, "--fidelity", "a fidelity") == "flows";

    sweep.collective = collective_of(op);
    sweep.min_bytes = parse_size(args->min_bytes, "-b");
    sweep.max_bytes = parse_size(args->max_bytes, "-e");
    if (sweep.max_bytes < sweep.min_bytes) {
      throw InputError(command_line(), "-e",
                       fmt::format("the largest size ({} B) is below the smallest (-b, {} B)",
                                   sweep.max_bytes, sweep.min_bytes));
    }
    const bool has_factor = command->get_option("-f")->count() > 0;
    if (has_factor && !args->increment.empty()) {
      throw InputError(command_line(), "-i", "give -f (a factor) or -i (an increment), not both");
    }
    sweep.factor = has_factor ? args->factor : 2;
    if (!args->increment.empty()) sweep.increment = parse_size(args->increment, "-i");
    if (sweep_sizes(sweep, sim::kMaxCollectiveSizes + 1).size() > sim::kMaxCollectiveSizes) {
      throw InputError(
          command_line(), sweep.increment > 0 ? "-i" : "-f",
          fmt::format("the sweep would visit more than {} sizes; take a larger step", "10,000"));
    }
    sweep.element_bytes = element_bytes;
    sweep.flows = flows;
    sweep.algorithm = algorithm == "ring"       ? CollectiveAlgorithm::ring
                      : algorithm == "tree"     ? CollectiveAlgorithm::tree
                      : algorithm == "nvls"     ? CollectiveAlgorithm::nvls
                      : algorithm == "nvlstree" ? CollectiveAlgorithm::nvls_tree
                      : algorithm == "collnet"  ? CollectiveAlgorithm::collnet
                                                : CollectiveAlgorithm::automatic;

    const std::filesystem::path file = resolve_data_file(
        args->machine, std::filesystem::current_path(), "topologies", command_line(), "machine");
    options::extend_catalogue(args->catalogues);
    MachineSpec machine = load_machine(file, bundled_gpu_catalogue());
    HardwareProfile profile =
        args->profile.empty()
            ? load_profile(machine.profile_file)
            : load_profile(resolve_data_file(args->profile, std::filesystem::current_path(),
                                             "topologies/profiles", command_line(), "--profile"));
    resolve_for_device(profile, machine.gpu, "fp32");
    for (const std::string& assignment : args->set)
      apply_figure(profile, assignment);

    sweep.gpus_per_node = args->gpus > 0 ? args->gpus : machine.gpus_per_node;
    if (sweep.gpus_per_node > machine.gpus_per_node) {
      throw InputError(command_line(), "-g",
                       fmt::format("the machine '{}' has {} GPUs per node; expected 1 to {}",
                                   machine.name, machine.gpus_per_node, machine.gpus_per_node));
    }
    sweep.nodes = args->nodes;
    const int ranks = sweep.gpus_per_node * sweep.nodes;
    if (ranks < 2) {
      throw InputError(command_line(), "-g",
                       "a collective needs at least 2 GPUs (-g, or --nodes 2 or more)");
    }
    if (sweep.nodes > 1 && !machine.topology.network) {
      throw InputError(command_line(), "--nodes",
                       fmt::format("the machine '{}' has no network section to join several "
                                   "nodes",
                                   machine.name));
    }
    if (args->root >= ranks) {
      throw InputError(
          command_line(), "-r",
          fmt::format("the root must be one of the {} ranks: 0 to {}", ranks, ranks - 1));
    }
    sweep.root = args->root;
    if (sweep.algorithm == CollectiveAlgorithm::collnet) {
      // As NCCL_ALGO=CollNet with NCCL_COLLNET_ENABLE=1 and the SHARP plugin: an all-reduce
      // across nodes whose switches reduce.
      if (sweep.protocol && *sweep.protocol != sim::Protocol::simple) {
        throw InputError(command_line(), "--proto", "collnet runs only NCCL's Simple protocol");
      }
      if (sweep.nodes < 2 || sweep.collective != sim::Collective::all_reduce) {
        throw InputError(command_line(), "--algo",
                         "CollNet is an all_reduce across nodes (--nodes 2 or more)");
      }
      if (!machine.topology.network->in_network_reduction) {
        throw InputError(command_line(), "--algo",
                         fmt::format("CollNet needs switches that reduce in the network (SHARP); "
                                     "the machine '{}' does not say so (its network section's "
                                     "in_network_reduction: true)",
                                     machine.name));
      }
    }
    const bool nvls_family = sweep.algorithm == CollectiveAlgorithm::nvls ||
                             sweep.algorithm == CollectiveAlgorithm::nvls_tree;
    if (nvls_family) {
      // As NCCL_ALGO=NVLS or NVLSTree, which fail where NCCL cannot run them.
      if (sweep.protocol && *sweep.protocol != sim::Protocol::simple) {
        throw InputError(command_line(), "--proto",
                         fmt::format("{} runs only NCCL's Simple protocol", algorithm));
      }
      if (sweep.algorithm == CollectiveAlgorithm::nvls && sweep.nodes > 1 &&
          sweep.collective != sim::Collective::all_reduce) {
        throw InputError(
            command_line(), "--algo",
            fmt::format("NVLS across nodes is modelled for all_reduce only, not {}", op));
      }
      if (sweep.algorithm == CollectiveAlgorithm::nvls && sweep.nodes > 1 &&
          !machine.topology.network->in_network_reduction) {
        throw InputError(command_line(), "--algo",
                         fmt::format("NVLS across nodes needs switches that reduce in the network "
                                     "(SHARP, with NCCL's CollNet), which the machine '{}' does "
                                     "not say it has; NVLS inside the nodes with trees across "
                                     "them is --algo nvlstree",
                                     machine.name));
      }
      if (sweep.algorithm == CollectiveAlgorithm::nvls_tree &&
          (sweep.nodes < 2 || sweep.collective != sim::Collective::all_reduce)) {
        throw InputError(command_line(), "--algo",
                         "NVLSTree is an all_reduce across nodes (--nodes 2 or more); inside "
                         "one node, --algo nvls");
      }
      std::vector<int> local(static_cast<std::size_t>(sweep.gpus_per_node));
      std::iota(local.begin(), local.end(), 0);
      if (!sim::nvls_available(sim::Topology::build(machine, 1), machine.gpu.architecture, local, 1,
                               sweep.collective)) {
        throw InputError(
            command_line(), "--algo",
            fmt::format("{} needs an all_reduce, all_gather or reduce_scatter over 3 GPUs or "
                        "more of one NVSwitch node of Hopper or later GPUs; '{}' has {} {} GPUs "
                        "({}), and this is {} over {}",
                        algorithm == "nvls" ? "NVLS" : "NVLSTree", machine.name,
                        machine.gpus_per_node, machine.gpu.architecture,
                        machine.topology.nvlink.shape == NvlinkShape::nvswitch ? "on NVSwitch"
                                                                               : "without NVSwitch",
                        op, sweep.gpus_per_node));
      }
    }

    const std::vector<sim::CollectiveRow> rows = run_collective_sweep(machine, profile, sweep);
    const bool reduces = sweep.collective == sim::Collective::all_reduce ||
                         sweep.collective == sim::Collective::reduce ||
                         sweep.collective == sim::Collective::reduce_scatter;
    const std::string_view redop = reduces ? "sum" : "none";
    // Comment lines as nccl-tests prints them (scripts skip lines starting with '#'), each
    // piece of a long one a comment too; the table fits the terminal.
    print_prose(
        out, fmt::format("# {} on {}: {} GPU{} ({} node{} x {}), {}, profile {}, {}\n", op,
                         machine.name, ranks, ranks > 1 ? "s" : "", sweep.nodes,
                         sweep.nodes > 1 ? "s" : "", sweep.gpus_per_node, machine.gpu.name,
                         profile.name, flows ? "flows on the network" : "analytic (alpha-beta)"));
    fmt::print(out, "{}", render_table(rows, type, redop, output_width(out)));
    print_prose(out,
                fmt::format("# busbw = algbw x {:.4g} (nccl-tests' factor for {} over {} ranks); "
                            "GB/s = 1e9 B/s. Protocols, NVLS and CollNet as NCCL's tuning model "
                            "costs them.\n",
                            sim::bus_bandwidth_factor(sweep.collective, ranks), op, ranks));
    std::fflush(out);
    if (csv) csv->write(render_csv(rows, type, redop));
    if (json) {
      json->write(
          render_json(rows, nlohmann::ordered_json{{"schema", "epochcast.collective/1"},
                                                   {"machine", machine.name},
                                                   {"gpu", machine.gpu.id},
                                                   {"op", op},
                                                   {"type", type},
                                                   {"redop", redop},
                                                   {"gpus_per_node", sweep.gpus_per_node},
                                                   {"nodes", sweep.nodes},
                                                   {"profile", profile.name},
                                                   {"fidelity", flows ? "flows" : "analytic"}}));
    }
    return 0;
  };
}

}  // namespace epochcast::cli
