// `epochcast collective MACHINE [BINARY] [nccl-tests options]`: one collective over a range of
// sizes as an nccl-tests binary times it (all_reduce_perf -b 8 -e 128M -f 2 -g 8): size, count,
// type, redop, root, time, algbw and busbw, as epochcast's table or in nccl-tests' own layout.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <numeric>
#include <optional>
#include <span>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/nccl_environment.h"
#include "cli/terminal.h"
#include "core/format/text_table.h"
#include "core/input_error.h"
#include "core/io/output_file.h"
#include "core/measure/nccl_tests_log.h"
#include "core/spec/data_paths.h"
#include "core/spec/hardware_spec.h"
#include "core/spec/profile_figures.h"
#include "core/spec/profile_spec.h"
#include "options/command_line.h"
#include "options/scenario_options.h"
#include "sim/collectives/algorithms.h"
#include "sim/collectives/collective_sweep.h"
#include "sim/collectives/protocols.h"
#include "sim/network/topology.h"

namespace epochcast::cli {

namespace {

// nccl-tests' collectives by their -perf binaries' names.
constexpr std::string_view kOperations[] = {"all_reduce", "all_gather", "reduce_scatter",
                                            "broadcast",  "reduce",     "alltoall"};
// nccl-tests' -o reductions ("all": each in turn).
constexpr std::string_view kReductions[] = {"sum", "prod", "min", "max", "avg", "mulsum", "all"};
// nccl-tests' -d types and their sizes in bytes.
struct DataType {
  std::string_view name;
  int bytes;
};
constexpr DataType kDataTypes[] = {{"int8", 1},   {"uint8", 1},    {"int32", 4},  {"uint32", 4},
                                   {"int64", 8},  {"uint64", 8},   {"half", 2},   {"float", 4},
                                   {"double", 8}, {"bfloat16", 2}, {"f8e4m3", 1}, {"f8e5m2", 1}};

struct CollectiveArgs {
  std::string machine;
  std::string binary;  // an nccl-tests binary ("all_reduce_perf", "./build/all_gather_perf")
  std::vector<std::string> catalogues;
  std::string collective;
  std::string redop = "sum";
  std::string min_bytes = "32M";
  std::string max_bytes = "32M";
  double factor = 0;
  std::string increment;
  int threads = 1;
  int gpus = 0;
  int nodes = 1;
  int processes = 0;           // mpirun -np
  int processes_per_node = 0;  // mpirun -npernode / -N
  std::string algorithm;
  std::string protocol;
  std::string dtype = "float";
  std::string profile;
  std::vector<std::string> set;
  std::string fidelity = "flows";
  int root = 0;
  std::string format;
  std::string json, csv, nccl_json;
  // nccl-tests' options that time or check a real run: accepted, shown, and noted as ignored.
  std::vector<std::pair<std::string, std::string>> measurement_only;
  int iterations = 20, warmup = 5, aggregated = 1, graph = 0;
};

// nccl-tests' options that only a real run can honour (src/common.cu's getopt list).
struct MeasurementOnlyOption {
  const char* flags;
  const char* what;
};
constexpr MeasurementOnlyOption kMeasurementOnly[] = {
    {"-N,--run_cycles", "cycles of the sweep"},
    {"-p,--parallel_init", "threads initialise NCCL in parallel"},
    {"-c,--check", "iterations checked for correctness"},
    {"-z,--blocking", "wait for each collective"},
    {"-y,--stream_null", "the default stream"},
    {"-T,--timeout", "seconds before a hung test aborts"},
    {"-C,--report_cputime", "CPU time instead of GPU time"},
    {"-S,--report_timestamps", "a timestamp per row"},
    {"-a,--average", "which rank's time is reported"},
    {"-R,--local_register", "buffer registration"},
    {"-x,--cta_policy", "NCCL's CTA policy"},
    {"-D,--device_implementation", "a device-side implementation"},
    {"-V,--device_cta_count", "CTAs of the device implementation"},
    {"-M,--memory_report", "a GPU memory report"},
    {"-u,--unalign", "unaligned buffers"},
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

// "8", "64K", "128M", "8G", "1T": bytes, the suffixes powers of 1024 as nccl-tests reads them
// (it knows K, M and G; T is ours).
std::int64_t parse_size(const std::string& text, const char* option) {
  constexpr std::int64_t kLargest = std::int64_t{1} << 40;  // 1 TiB per rank
  const auto [value, used] = leading_number(text);
  std::string suffix = text.substr(used);
  double scale = 1;
  if (suffix == "K" || suffix == "k") scale = 1024.0;
  if (suffix == "M" || suffix == "m") scale = 1024.0 * 1024;
  if (suffix == "G" || suffix == "g") scale = 1024.0 * 1024 * 1024;
  if (suffix == "T" || suffix == "t") scale = 1024.0 * 1024 * 1024 * 1024;
  const bool known_suffix = suffix.empty() || scale > 1;
  const double bytes = value * scale;
  if (used == 0 || !known_suffix || !std::isfinite(bytes) || bytes < 1 ||
      bytes > static_cast<double>(kLargest) || bytes != std::floor(bytes)) {
    throw InputError(command_line(), option,
                     fmt::format("'{}' is not a size; expected a whole number of bytes from 1 to "
                                 "1T, optionally with K, M, G or T (powers of 1024), e.g. 8, 64K, "
                                 "128M, 8G",
                                 text));
  }
  return static_cast<std::int64_t>(bytes);
}

// The collective an nccl-tests binary's name or path names ("./build/all_gather_perf").
std::string_view collective_of_binary(const std::string& binary) {
  std::string name = std::filesystem::path(binary).filename().string();
  const std::size_t suffix = name.rfind("_perf");
  if (suffix == std::string::npos || suffix + 5 != name.size()) {
    throw InputError(command_line(), "binary",
                     fmt::format("'{}' is not an nccl-tests binary; expected one of "
                                 "all_reduce_perf, all_gather_perf, reduce_scatter_perf, "
                                 "broadcast_perf, reduce_perf or alltoall_perf",
                                 binary));
  }
  name.resize(suffix);
  return choice(name, kOperations, "binary", "a collective this simulator times");
}

std::string render_table(const std::vector<sim::CollectiveRow>& rows, const std::string& type,
                         const std::string& redop, int root, std::size_t width) {
  // nccl-tests' columns; on a narrow terminal the type, the reduction, the root, the element
  // count and the channels go (in that order) before the times and bandwidths.
  using Align = TextTable::Align;
  TextTable table;
  table.add_column("size (B)");
  table.add_column("count", Align::right, {0, 2});
  table.add_column("type", Align::left, {0, 5});
  table.add_column("redop", Align::left, {0, 4});
  table.add_column("root", Align::right, {0, 3});
  for (const char* c : {"time (us)", "algbw (GB/s)", "busbw (GB/s)"})
    table.add_column(c);
  table.add_column("algorithm", Align::left);
  table.add_column("protocol", Align::left);
  table.add_column("channels", Align::right, {0, 1});
  for (const sim::CollectiveRow& r : rows) {
    // One word per field, so that awk's fields never shift: "nvls tree" is "nvls_tree".
    std::string algorithm = r.algorithm;
    std::replace(algorithm.begin(), algorithm.end(), ' ', '_');
    table.add_row({std::to_string(r.bytes), std::to_string(r.count), type, redop,
                   std::to_string(root), fmt::format("{:.2f}", r.seconds * 1e6),
                   fmt::format("{:.2f}", r.algbw / 1e9), fmt::format("{:.2f}", r.busbw / 1e9),
                   algorithm, r.protocol, std::to_string(r.channels)});
  }
  return table.render(width);
}

struct Series {  // the rows of one data type and reduction
  std::string type, redop;
  std::vector<sim::CollectiveRow> rows;
};

std::string render_csv(const std::vector<Series>& all, int root) {
  std::string out =
      "size_bytes,count,type,redop,root,time_us,algbw_gb_per_s,busbw_gb_per_s,algorithm,"
      "protocol,channels\n";
  for (const Series& s : all) {
    for (const sim::CollectiveRow& r : s.rows) {
      out += fmt::format("{},{},{},{},{},{:.6f},{:.6f},{:.6f},{},{},{}\n", r.bytes, r.count, s.type,
                         s.redop, root, r.seconds * 1e6, r.algbw / 1e9, r.busbw / 1e9, r.algorithm,
                         r.protocol, r.channels);
    }
  }
  return out;
}

std::string render_json(const std::vector<Series>& all, int root, nlohmann::ordered_json out) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const Series& s : all) {
    for (const sim::CollectiveRow& r : s.rows) {
      list.push_back({{"size_bytes", r.bytes},
                      {"count", r.count},
                      {"type", s.type},
                      {"redop", s.redop},
                      {"root", root},
                      {"time_us", r.seconds * 1e6},
                      {"algbw_gb_per_s", r.algbw / 1e9},
                      {"busbw_gb_per_s", r.busbw / 1e9},
                      {"algorithm", r.algorithm},
                      {"protocol", r.protocol},
                      {"channels", r.channels}});
    }
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

// Why NCCL could not run `algorithm` under `protocol` for this sweep on `machine`, as the
// option `key` says it (NCCL_ALGO=NVLS fails where NVLS cannot run); nullopt where it can.
struct Refusal {
  std::string key, problem;
};
std::optional<Refusal> refusal(CollectiveAlgorithm algorithm, std::optional<sim::Protocol> protocol,
                               const sim::CollectiveSweep& sweep, const MachineSpec& machine,
                               std::string_view op, const std::string& algo_key,
                               const std::string& proto_key) {
  const bool simple_only = !protocol || *protocol == sim::Protocol::simple;
  if (algorithm == CollectiveAlgorithm::collnet) {
    // As NCCL_ALGO=CollNet with NCCL_COLLNET_ENABLE=1 and the SHARP plugin: an all-reduce
    // across nodes whose switches reduce.
    if (!simple_only) return Refusal{proto_key, "collnet runs only NCCL's Simple protocol"};
    if (sweep.nodes < 2 || sweep.collective != sim::Collective::all_reduce)
      return Refusal{algo_key, "CollNet is an all_reduce across nodes (--nodes 2 or more)"};
    if (!machine.topology.network->in_network_reduction) {
      return Refusal{algo_key,
                     fmt::format("CollNet needs switches that reduce in the network (SHARP); "
                                 "the machine '{}' does not say so (its network section's "
                                 "in_network_reduction: true)",
                                 machine.name)};
    }
  }
  if (algorithm != CollectiveAlgorithm::nvls && algorithm != CollectiveAlgorithm::nvls_tree)
    return std::nullopt;
  const char* name = algorithm == CollectiveAlgorithm::nvls ? "nvls" : "nvlstree";
  if (!simple_only)
    return Refusal{proto_key, fmt::format("{} runs only NCCL's Simple protocol", name)};
  if (algorithm == CollectiveAlgorithm::nvls && sweep.nodes > 1) {
    if (sweep.collective != sim::Collective::all_reduce) {
      return Refusal{algo_key,
                     fmt::format("NVLS across nodes is modelled for all_reduce only, not {}", op)};
    }
    if (!machine.topology.network->in_network_reduction) {
      return Refusal{algo_key,
                     fmt::format("NVLS across nodes needs switches that reduce in the network "
                                 "(SHARP, with NCCL's CollNet), which the machine '{}' does not "
                                 "say it has; NVLS inside the nodes with trees across them is "
                                 "--algo nvlstree",
                                 machine.name)};
    }
  }
  if (algorithm == CollectiveAlgorithm::nvls_tree &&
      (sweep.nodes < 2 || sweep.collective != sim::Collective::all_reduce)) {
    return Refusal{algo_key,
                   "NVLSTree is an all_reduce across nodes (--nodes 2 or more); inside one "
                   "node, --algo nvls"};
  }
  std::vector<int> local(static_cast<std::size_t>(sweep.gpus_per_node));
  std::iota(local.begin(), local.end(), 0);
  if (!sim::nvls_available(sim::Topology::build(machine, 1), machine.gpu.architecture, local, 1,
                           sweep.collective)) {
    return Refusal{
        algo_key,
        fmt::format("{} needs an all_reduce, all_gather or reduce_scatter over 3 GPUs or more of "
                    "one NVSwitch node of Hopper or later GPUs; '{}' has {} {} GPUs ({}), and "
                    "this is {} over {}",
                    algorithm == CollectiveAlgorithm::nvls ? "NVLS" : "NVLSTree", machine.name,
                    machine.gpus_per_node, machine.gpu.architecture,
                    machine.topology.nvlink.shape == NvlinkShape::nvswitch ? "on NVSwitch"
                                                                           : "without NVSwitch",
                    op, sweep.gpus_per_node)};
  }
  return std::nullopt;
}

// The rows NCCL's tuner would give when it may pick among `choices`: each candidate algorithm
// and protocol swept, the fastest kept at each size.
std::vector<sim::CollectiveRow> fastest_rows(const MachineSpec& machine,
                                             const HardwareProfile& profile,
                                             sim::CollectiveSweep sweep, const NcclChoices& choices,
                                             std::string_view op, const std::string& algo_key,
                                             const std::string& proto_key) {
  std::vector<CollectiveAlgorithm> algorithms = choices.algorithms;
  if (algorithms.empty()) algorithms = {CollectiveAlgorithm::automatic};
  std::vector<std::optional<sim::Protocol>> protocols(choices.protocols.begin(),
                                                      choices.protocols.end());
  if (protocols.empty()) protocols = {std::nullopt};
  const bool one = algorithms.size() == 1 && protocols.size() == 1;
  std::vector<sim::CollectiveRow> best;
  std::vector<std::string> refused;
  for (CollectiveAlgorithm algorithm : algorithms) {
    for (const std::optional<sim::Protocol>& protocol : protocols) {
      if (auto why = refusal(algorithm, protocol, sweep, machine, op, algo_key, proto_key)) {
        if (one) throw InputError(command_line(), why->key, why->problem);
        refused.push_back(why->problem);
        continue;
      }
      sweep.algorithm = algorithm;
      sweep.protocol = protocol;
      std::vector<sim::CollectiveRow> rows = run_collective_sweep(machine, profile, sweep);
      if (best.empty()) {
        best = std::move(rows);
        continue;
      }
      for (std::size_t i = 0; i < rows.size(); ++i) {
        // NCCL's tuner picks by the collective's own time, whatever the loop around it costs.
        if (rows[i].collective_seconds < best[i].collective_seconds) best[i] = std::move(rows[i]);
      }
    }
  }
  if (best.empty()) {
    throw InputError(command_line(), algo_key,
                     fmt::format("none of the algorithms and protocols allowed can run here: {}",
                                 fmt::join(refused, "; ")));
  }
  return best;
}

}  // namespace

Command add_collective_command(CLI::App& app) {
  auto args = std::make_shared<CollectiveArgs>();
  CLI::App* command = app.add_subcommand(
      "collective",
      "Time one collective over a range of sizes on a machine, as nccl-tests' *_perf binaries "
      "do (size, count, time, algbw, busbw). A pasted nccl-tests command line runs after the "
      "machine: epochcast collective dgx-h100 all_reduce_perf -b 8 -e 128M -f 2 -g 8");
  command->add_option("machine", args->machine, "A bundled machine name (e.g. dgx-h100) or a path")
      ->required();
  command->add_option("binary", args->binary,
                      "An nccl-tests binary (all_reduce_perf, ./build/all_gather_perf, ...): its "
                      "collective, and its output layout (--format nccl-tests)");
  options::add_catalogue_option(*command, args->catalogues);
  command->add_option("--collective", args->collective,
                      "all_reduce, all_gather, reduce_scatter, broadcast, reduce or alltoall "
                      "(default: the binary's, else all_reduce)");
  command->add_option("-o,--op", args->redop,
                      "The reduction, as nccl-tests' -o: sum, prod, min, max, avg, mulsum or all "
                      "(the time does not depend on it)");
  command->add_option("-b,--minbytes", args->min_bytes,
                      "Smallest size in bytes (K, M, G, T: powers of 1024), rounded down to whole "
                      "elements as nccl-tests does");
  command->add_option("-e,--maxbytes", args->max_bytes, "Largest size");
  command->add_option("-f,--stepfactor", args->factor, "Multiply the size by this each step")
      ->check(options::number_within(1, 1024))
      ->default_str("2");
  command->add_option("-i,--stepbytes", args->increment, "Add this many bytes each step instead");
  command
      ->add_option("-t,--nthreads", args->threads,
                   "Threads per process, as nccl-tests: each drives -g GPUs")
      ->check(options::integer_within(1, 64));
  command
      ->add_option("-g,--ngpus", args->gpus,
                   "GPUs per thread, as nccl-tests (one process: the GPUs of the node used)")
      ->check(options::integer_within(1, 64))
      ->default_str("all of a node");
  command
      ->add_option("--np", args->processes,
                   "Processes in all, as mpirun -np gives them to nccl-tests (each -t x -g "
                   "GPUs); nodes follow from the machine's GPUs per node or --npernode")
      ->check(options::integer_within(1, 1 << 20));
  command
      ->add_option("--npernode", args->processes_per_node,
                   "Processes per node, as mpirun's -npernode")
      ->check(options::integer_within(1, 64));
  command->add_option("--nodes", args->nodes, "Nodes (identical, over the machine's network)")
      ->check(options::integer_within(1, 65536));
  command
      ->add_option("-n,--iters", args->iterations,
                   "Timed iterations of a real run (shown; a simulation has one answer)")
      ->check(options::integer_within(0, 1 << 30));
  command
      ->add_option("-w,--warmup_iters", args->warmup,
                   "Warm-up iterations of a real run (shown, not simulated)")
      ->check(options::integer_within(0, 1 << 30));
  command
      ->add_option("-m,--agg_iters", args->aggregated,
                   "Collectives aggregated per iteration (shown, not simulated)")
      ->check(options::integer_within(0, 1 << 30));
  command
      ->add_option("-G,--cudagraph", args->graph,
                   "CUDA graph launches: the iterations replay a graph, so no thread launches "
                   "them one by one")
      ->check(options::integer_within(0, 1 << 30));
  for (const MeasurementOnlyOption& o : kMeasurementOnly) {
    CLI::Option* option = command->add_option_function<std::string>(
        o.flags,
        [args, name = std::string(o.flags)](const std::string& value) {
          args->measurement_only.emplace_back(name.substr(0, 2), value);
        },
        fmt::format("nccl-tests' {} (accepted; a simulation ignores it)", o.what));
    option->group("nccl-tests options a simulation ignores");
  }
  command->add_option("--algo", args->algorithm,
                      "As NCCL_ALGO, which it overrides: auto, or a list of ring, tree, nvls, "
                      "nvlstree, collnet ('^' first excludes them); NCCL's tuner takes the "
                      "fastest allowed");
  command->add_option("--proto", args->protocol,
                      "As NCCL_PROTO, which it overrides: auto, or a list of ll, ll128, simple");
  command->add_option("-d,--datatype,--dtype", args->dtype,
                      "Data type: float, half, bfloat16, double, int8, uint8, int32, uint32, "
                      "int64, uint64, f8e4m3, f8e5m2, or all");
  command->add_option("-r,--root", args->root, "Root rank of broadcast and reduce")
      ->check(options::integer_within(0, 65535));
  command->add_option("--profile", args->profile, "A profile instead of the machine's own");
  command->add_option("--set", args->set,
                      "KEY=VALUE: a profile figure (e.g. links.efficiency.nvswitch=0.7)");
  command->add_option("--fidelity", args->fidelity,
                      "flows (transfers share links, max-min fair) or analytic (alpha-beta)");
  command->add_option("--format", args->format,
                      "table (epochcast's, the default) or nccl-tests (what the binary prints, "
                      "the default when a binary is named)");
  command->add_option("-J,--output_file", args->nccl_json,
                      "Write the run as nccl-tests' -J JSON to this file ('-': stdout)");
  command->add_option("--json", args->json, "Write the rows as JSON to this file ('-': stdout)");
  command->add_option("--csv", args->csv, "Write the rows as CSV to this file ('-': stdout)");
  return [args, command] {
    OutputFiles outputs;
    std::optional<OutputFile> csv, json, nccl_json;
    if (!args->csv.empty()) csv = outputs.add(args->csv, "--csv");
    if (!args->json.empty()) json = outputs.add(args->json, "--json");
    if (!args->nccl_json.empty()) nccl_json = outputs.add(args->nccl_json, "-J");
    std::FILE* out = outputs.to_standard_output() ? stderr : stdout;

    // The collective: --collective, else the binary's, else all_reduce; -o is the reduction.
    if (std::find(std::begin(kOperations), std::end(kOperations), args->redop) !=
        std::end(kOperations)) {
      throw InputError(command_line(), "--op",
                       fmt::format("'{}' is a collective; -o/--op is the reduction, as in "
                                   "nccl-tests (sum, prod, ...): say --collective {}",
                                   args->redop, args->redop));
    }
    const std::string_view reduction = choice(args->redop, kReductions, "--op", "a reduction");
    std::string_view op = "all_reduce";
    if (!args->binary.empty()) op = collective_of_binary(args->binary);
    if (!args->collective.empty())
      op = choice(args->collective, kOperations, "--collective", "a collective");
    const bool nccl_layout =
        args->format.empty() ? !args->binary.empty() : args->format == "nccl-tests";
    if (!args->format.empty()) {
      constexpr std::string_view kFormats[] = {"table", "nccl-tests"};
      choice(args->format, kFormats, "--format", "an output format");
    }

    std::vector<std::string_view> type_names;
    for (const DataType& t : kDataTypes)
      type_names.push_back(t.name);
    type_names.push_back("all");
    const std::string_view type_choice =
        choice(args->dtype, type_names, "--datatype", "a data type");
    std::vector<DataType> types;
    for (const DataType& t : kDataTypes)
      if (type_choice == "all" || t.name == type_choice) types.push_back(t);
    constexpr std::string_view kFidelities[] = {"flows", "analytic"};
    const bool flows = choice(args->fidelity, kFidelities, "--fidelity", "a fidelity") == "flows";

    sim::CollectiveSweep sweep;
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
    sweep.flows = flows;

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

    // Ranks as nccl-tests counts them: processes x threads x GPUs; with none of -g, -t and
    // mpirun's --np, a whole node of processes with a GPU each.
    const bool gpus_given = command->get_option("-g")->count() > 0;
    const int per_process = args->threads * (gpus_given ? args->gpus : 1);
    if (args->processes > 0) {
      const std::int64_t ranks = std::int64_t{args->processes} * per_process;
      const std::int64_t per_node = args->processes_per_node > 0
                                        ? std::int64_t{args->processes_per_node} * per_process
                                        : std::min<std::int64_t>(ranks, machine.gpus_per_node);
      if (per_node > machine.gpus_per_node || ranks % per_node != 0 ||
          command->get_option("--nodes")->count() > 0) {
        throw InputError(command_line(), "--np",
                         fmt::format("{} processes of {} GPU{} ({} per node) do not fill whole "
                                     "nodes of '{}' ({} GPUs each){}",
                                     args->processes, per_process, per_process > 1 ? "s" : "",
                                     per_node, machine.name, machine.gpus_per_node,
                                     command->get_option("--nodes")->count() > 0
                                         ? "; give --np or --nodes, not both"
                                         : ""));
      }
      sweep.gpus_per_node = static_cast<int>(per_node);
      sweep.nodes = static_cast<int>(ranks / per_node);
    } else {
      sweep.gpus_per_node = gpus_given || args->threads > 1 ? per_process : machine.gpus_per_node;
      sweep.nodes = args->nodes;
    }
    if (sweep.gpus_per_node > machine.gpus_per_node) {
      throw InputError(command_line(), "-g",
                       fmt::format("the machine '{}' has {} GPUs per node; expected 1 to {}",
                                   machine.name, machine.gpus_per_node, machine.gpus_per_node));
    }
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
    // nccl-tests' thread launches its GPUs' kernels in turn every iteration, unless the
    // iterations replay a CUDA graph.
    sweep.launches_per_iteration = args->graph > 0 ? 0 : gpus_given ? args->gpus : 1;
    // Collectives nccl-tests splits in equal parts per rank round their sizes to that.
    const bool per_rank_parts = sweep.collective == sim::Collective::all_gather ||
                                sweep.collective == sim::Collective::reduce_scatter ||
                                sweep.collective == sim::Collective::all_to_all;
    sweep.parts = per_rank_parts ? ranks : 1;

    const NcclChoices choices = read_nccl_choices(op, args->algorithm, args->protocol);
    if (choices.p2p_level) machine.topology.pcie.nccl_p2p_level = *choices.p2p_level;
    const std::string algo_key = args->algorithm.empty() ? "NCCL_ALGO" : "--algo";
    const std::string proto_key = args->protocol.empty() ? "NCCL_PROTO" : "--proto";

    const bool reduces = sweep.collective == sim::Collective::all_reduce ||
                         sweep.collective == sim::Collective::reduce ||
                         sweep.collective == sim::Collective::reduce_scatter;
    std::vector<std::string> reductions;
    if (!reduces) {
      reductions = {"none"};
    } else if (reduction == "all") {
      reductions = {"sum", "prod", "max", "min", "avg", "mulsum"};
    } else {
      reductions = {std::string(reduction)};
    }
    const bool rooted = sweep.collective == sim::Collective::broadcast ||
                        sweep.collective == sim::Collective::reduce;
    const int root = rooted ? sweep.root : -1;

    std::vector<Series> all;
    for (const DataType& type : types) {
      sweep.element_bytes = type.bytes;
      const std::vector<sim::CollectiveRow> rows =
          fastest_rows(machine, profile, sweep, choices, op, algo_key, proto_key);
      for (const std::string& redop : reductions)
        all.push_back({std::string(type.name), redop, rows});
    }

    // What the simulation assumed and what it could not honour, for people (stderr in
    // nccl-tests' layout, whose stdout is the binary's alone).
    std::vector<std::string> notes;
    for (const auto& [flag, value] : args->measurement_only)
      notes.push_back(
          fmt::format("{} {}: measures a real run; a simulation ignores it", flag, value));
    for (const std::string& ignored : choices.ignored)
      notes.push_back(ignored);
    if (sweep.launches_per_iteration > 1) {
      // Where the thread's launches, not the collective, set the pace (collective_sweep.h).
      std::vector<std::int64_t> bound;
      for (const Series& s : all) {
        for (const sim::CollectiveRow& r : s.rows)
          if (r.launch_bound) bound.push_back(r.bytes);
      }
      notes.push_back(fmt::format(
          "-g {}: one thread launches the {} GPUs' kernels in turn, {:g} us each, so an "
          "iteration takes at least {:g} us{}",
          args->gpus, args->gpus, profile.links.nccl_launch_or_default().value() * 1e6,
          args->gpus * profile.links.nccl_launch_or_default().value() * 1e6,
          bound.empty()
              ? ": every size here takes longer on the GPUs"
              : fmt::format("; that sets the time from {} B to {} B (mpirun with a process per "
                            "GPU would time the collective alone)",
                            *std::min_element(bound.begin(), bound.end()),
                            *std::max_element(bound.begin(), bound.end()))));
    }
    if (const double scale = sim::ll_clock_scale(machine.gpu);
        scale != 1.0 && machine.topology.nvlink.shape != NvlinkShape::none) {
      // LL's work a step is the SMs' (protocols.h): at this GPU's clock, as many cycles.
      const double nccl_step_us =
          LinkCosts::kNcclLlStepLatencyUs[static_cast<std::size_t>(sim::LinkKind::nvlink)];
      notes.push_back(fmt::format(
          "LL over NVLink at the {}'s {:g} MHz boost: {:.2f} us a step and {:.2f} us a thread's "
          "line, as many cycles as NCCL's {:g} and the {:g} fitted on an H100 at {:g} MHz take "
          "(a profile's links.ll_step_latency_us replaces the step)",
          machine.gpu.name, machine.gpu.clocks->boost_mhz, nccl_step_us * scale,
          sim::kLlLinePaceUs * scale, nccl_step_us, sim::kLlLinePaceUs, sim::kLlReferenceClockMhz));
    }
    if (profile.links.own_protocol_figures()) {
      // The times take the profile's LL and LL128; the choice of protocol, NCCL's tuner's.
      const LinkCosts& links = profile.links;
      std::vector<std::string> given;
      for (std::size_t k = 0; k < kLinkKinds; ++k) {
        if (links.ll_step_latency[k])
          given.push_back(fmt::format("an LL step over {} {:.3g} us (NCCL's {:g})",
                                      kLinkKindKeys[k], links.ll_step_latency[k]->value() * 1e6,
                                      LinkCosts::kNcclLlStepLatencyUs[k]));
      }
      if (links.ll_rate) given.push_back(fmt::format("LL at {:.3g} of its rates", *links.ll_rate));
      if (links.ll128_rate)
        given.push_back(fmt::format("LL128 at {:.3g} of its rates", *links.ll128_rate));
      notes.push_back(fmt::format(
          "profile {} says how its GPUs run NCCL's protocols: {}; NCCL still picks each size's "
          "protocol by its tuner's figures",
          profile.name, fmt::join(given, ", ")));
    }
    if (sweep_sizes(sweep).front() != sweep.min_bytes) {
      notes.push_back(fmt::format(
          "-b {} is not a whole number of {}-byte {} elements{}: rounded "
          "down to {} B as nccl-tests does",
          sweep.min_bytes, sweep.element_bytes, types.front().name,
          per_rank_parts ? fmt::format(" x {} ranks", ranks) : "", sweep_sizes(sweep).front()));
    }
    const std::string summary = fmt::format(
        "{} on {}: {} GPU{} ({} node{} x {}), {}, profile {}, {}{}", op, machine.name, ranks,
        ranks > 1 ? "s" : "", sweep.nodes, sweep.nodes > 1 ? "s" : "", sweep.gpus_per_node,
        machine.gpu.name, profile.name, flows ? "flows on the network" : "analytic (alpha-beta)",
        choices.applied.empty() ? "" : fmt::format(", {}", fmt::join(choices.applied, " ")));

    NcclTestsRun run;
    run.collective = std::string(op);
    run.threads = args->threads;
    // Without -g, -t or --np a whole node is timed with a process per GPU (as mpirun -np 8 runs
    // nccl-tests, and DDP its ranks), and printed so.
    run.gpus = gpus_given ? args->gpus : 1;
    run.min_bytes = sweep.min_bytes;
    run.max_bytes = sweep.max_bytes;
    run.step_is_factor = sweep.increment == 0;
    run.step = run.step_is_factor ? static_cast<std::int64_t>(sweep.factor) : sweep.increment;
    run.warmup_iterations = args->warmup;
    run.iterations = args->iterations;
    run.aggregated_iterations = args->aggregated;
    run.validation = 0;  // a simulation checks no data: #wrong is N/A
    run.graph = args->graph;
    for (int r = 0; r < ranks; ++r) {
      const int node = r / sweep.gpus_per_node;
      run.devices.push_back(
          {r, 0, r / per_process,
           sweep.nodes > 1 ? fmt::format("{}-{}", machine.name, node) : machine.name,
           r % sweep.gpus_per_node, "0x00", machine.gpu.name});
    }
    for (const Series& s : all) {
      for (const sim::CollectiveRow& r : s.rows) {
        const NcclTestsTiming timing{r.seconds * 1e6, r.algbw / 1e9, r.busbw / 1e9, std::nullopt};
        run.rows.push_back({r.bytes, r.count, s.type, s.redop, root, timing, timing});
      }
    }
    run.arguments = {args->binary.empty() ? fmt::format("{}_perf", op) : args->binary, "-b",
                     std::to_string(sweep.min_bytes), "-e", std::to_string(sweep.max_bytes)};
    run.arguments.insert(run.arguments.end(),
                         {run.step_is_factor ? "-f" : "-i", std::to_string(run.step), "-t",
                          std::to_string(run.threads), "-g", std::to_string(run.gpus), "-d",
                          std::string(type_choice), "-o", std::string(reduction)});
    run.environment = choices.applied;

    if (nccl_layout) {
      // The binary's stdout, byte for byte in its layout; what a simulation adds goes to stderr.
      fmt::print(out, "{}", render_nccl_tests_text(run));
      std::fflush(out);
      fmt::print(stderr, "# epochcast collective: simulated, not measured: {}\n", summary);
      for (const std::string& note : notes)
        fmt::print(stderr, "# {}\n", note);
    } else {
      // Comment lines as nccl-tests prints them (scripts skip lines starting with '#'), each
      // piece of a long one a comment too; the table fits a terminal, and keeps every column
      // when it is not on one.
      print_prose(out, fmt::format("# {}\n", summary));
      for (const Series& s : all) {
        fmt::print(
            out, "{}",
            render_table(s.rows, s.type, s.redop, root, is_terminal(out) ? output_width(out) : 0));
      }
      print_prose(out, fmt::format("# busbw = algbw x {:.4g} (nccl-tests' factor for {} over {} "
                                   "ranks); GB/s = 1e9 B/s. How each algorithm and protocol is "
                                   "timed: docs/models.md, \"Collectives\".\n",
                                   sim::bus_bandwidth_factor(sweep.collective, ranks), op, ranks));
      for (const std::string& note : notes)
        print_prose(out, fmt::format("# {}\n", note));
      std::fflush(out);
    }
    if (csv) csv->write(render_csv(all, root));
    if (json) {
      json->write(render_json(all, root,
                              nlohmann::ordered_json{{"schema", "epochcast.collective/1"},
                                                     {"machine", machine.name},
                                                     {"gpu", machine.gpu.id},
                                                     {"op", op},
                                                     {"type", type_choice},
                                                     {"redop", reduces ? reduction : "none"},
                                                     {"gpus_per_node", sweep.gpus_per_node},
                                                     {"nodes", sweep.nodes},
                                                     {"profile", profile.name},
                                                     {"fidelity", flows ? "flows" : "analytic"},
                                                     {"nccl_environment", choices.applied}}));
    }
    if (nccl_json) nccl_json->write(render_nccl_tests_json(run));
    return 0;
  };
}

}  // namespace epochcast::cli
