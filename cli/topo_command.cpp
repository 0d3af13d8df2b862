// `epochcast topo MACHINE`: the machine's graph, and for every GPU pair the path type and
// bottleneck bandwidth, in the spirit of `nvidia-smi topo -m`; and `epochcast topo
// --from-nvidia-smi FILE`, the other way: a machine file from `nvidia-smi topo -m`'s matrix.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <map>
#include <set>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/terminal.h"
#include "core/format/text_table.h"
#include "core/io/output_file.h"
#include "core/spec/data_paths.h"
#include "core/spec/hardware_spec.h"
#include "core/spec/nvidia_smi_topology.h"
#include "options/command_line.h"
#include "options/scenario_options.h"
#include "sim/network/topology.h"

namespace epochcast::cli {

namespace {

struct TopoArgs {
  std::string machine;
  std::vector<std::string> catalogues;
  int nodes = 0;
  // --from-nvidia-smi and its companions.
  std::string from_smi;
  std::string smi_query;
  std::string gpu;
  std::string output;
};

// The whole description: prose wrapped to `width` (0: no limit), tables fitted to it.
std::string describe_topology(const MachineSpec& m, const sim::Topology& t, std::size_t width) {
  std::string out;
  auto say = [&](const std::string& text) { out += wrap_lines(text, width, 4); };
  say(fmt::format("Machine {}: {} x {} per node, {} node{}\n", m.name, m.gpus_per_node, m.gpu.name,
                  t.nodes(), t.nodes() > 1 ? "s" : ""));
  if (!m.description.empty()) say(fmt::format("  {}\n", m.description));
  std::map<sim::VertexKind, int> counts;
  for (const sim::Vertex& v : t.vertices())
    counts[v.kind]++;
  // One node is built without its NICs (nothing crosses them), but it has them.
  const std::string nics =
      counts[sim::VertexKind::nic] == 0 && m.topology.network
          ? fmt::format("{} NIC(s) (used across nodes)", m.topology.network->nics_per_node)
          : fmt::format("{} NIC(s)", counts[sim::VertexKind::nic]);
  say(
      fmt::format("  {} CPU socket(s), {} PCIe switch(es), {} NVSwitch fabric(s), {}, {} network "
                  "switch(es); peer-to-peer {}\n\n",
                  counts[sim::VertexKind::cpu], counts[sim::VertexKind::pcie_switch],
                  counts[sim::VertexKind::nvswitch], nics,
                  counts[sim::VertexKind::leaf_switch] + counts[sim::VertexKind::spine_switch],
                  t.peer_to_peer() ? "on" : "off (peer traffic is staged through host memory)"));
  if (t.in_network_reduction()) {
    say(
        fmt::format("  The network's switches reduce (SHARP): NCCL's CollNet with --algo collnet, "
                    "or collective_algorithm: collnet.\n\n"));
  }

  // Links grouped by what they are.
  std::map<std::string, std::pair<int, const sim::TopologyLink*>> groups;
  for (const sim::TopologyLink& link : t.links()) {
    auto& group = groups[link.label];
    group.first++;
    group.second = &link;
  }
  TextTable links;
  links.add_column("link", TextTable::Align::left);
  links.add_column("count");
  links.add_column("GB/s each way");
  links.add_column("latency (us)");
  links.add_column("source");
  // Sources are long: the table refers to them by number, listed below it.
  std::vector<std::string> sources;
  for (const auto& [label, group] : groups) {
    const std::string& source = group.second->source;
    auto known = std::find(sources.begin(), sources.end(), source);
    if (known == sources.end()) known = sources.insert(sources.end(), source);
    links.add_row({label, std::to_string(group.first),
                   fmt::format("{:.1f}", group.second->bandwidth.value() / 1e9),
                   fmt::format("{:.2f}", group.second->latency.value() * 1e6),
                   fmt::format("[{}]", known - sources.begin() + 1)});
  }
  out += links.render(width) + "\n";
  if (t.nodes() == 1 && m.topology.network) {
    const NetworkTopology& n = *m.topology.network;
    say(fmt::format(
        "Network (used with --nodes 2 or more): {} NIC(s) per node at {:.0f} Gb/s{}\n\n",
        n.nics_per_node, n.nic_bandwidth.value() * 8 / 1e9,
        n.in_network_reduction ? "; its switches reduce (SHARP, NCCL's CollNet)" : ""));
  }

  // The matrices cover the first node; across nodes, one pair stands for all.
  int shown = t.gpus_per_node();
  TextTable kinds, bandwidth;
  kinds.add_column("", TextTable::Align::left);
  bandwidth.add_column("GB/s", TextTable::Align::left);
  for (int b = 0; b < shown; ++b) {
    kinds.add_column(fmt::format("GPU{}", b));
    bandwidth.add_column(fmt::format("GPU{}", b));
  }
  bool any_staged = false;
  for (int a = 0; a < shown; ++a) {
    std::vector<std::string> kind_row = {fmt::format("GPU{}", a)};
    std::vector<std::string> bw_row = {fmt::format("GPU{}", a)};
    for (int b = 0; b < shown; ++b) {
      const bool staged = !t.nccl_peer_to_peer(a, b);
      any_staged = any_staged || staged;
      kind_row.push_back(t.path_label(a, b) + (staged ? "*" : ""));
      bw_row.push_back(a == b ? "-" : fmt::format("{:.1f}", t.path(a, b).bottleneck.value() / 1e9));
    }
    kinds.add_row(std::move(kind_row));
    bandwidth.add_row(std::move(bw_row));
  }
  say(fmt::format("Path between GPUs{}:\n", t.nodes() > 1 ? " (node 0)" : ""));
  out += kinds.render(width) + "\n";
  say(fmt::format("Bottleneck bandwidth per direction{}:\n", t.nodes() > 1 ? " (node 0)" : ""));
  out += bandwidth.render(width) + "\n";
  if (t.nodes() > 1) {
    int other = t.gpus_per_node();
    const sim::Path& p = t.path(0, other);
    say(fmt::format(
        "Across nodes: GPU0 of node 0 to GPU0 of node 1: {}, {:.1f} GB/s, {:.2f} us over {} "
        "hops\n\n",
        t.path_label(0, other), p.bottleneck.value() / 1e9, p.latency.value() * 1e6,
        p.hops.size()));
  }
  say(fmt::format(
      "Legend: X itself; NV# NVLink (# links, directly or through NVSwitch); PIX through one PCIe\n"
      "switch; PXB through several PCIe switches; PHB through a CPU's PCIe host bridge; SYS\n"
      "across the link between sockets; NET across the network.\n"));
  if (any_staged) {
    say(fmt::format(
        "* NCCL stages collective traffic between these GPUs through host memory (its "
        "shared-memory\n  transport): {}.\n",
        m.topology.pcie.peer_to_peer
            ? fmt::format("farther apart than its P2P level, {} (topology.pcie.nccl_p2p_level)",
                          name_of(m.topology.pcie.nccl_p2p_level))
            : std::string("the machine allows no peer-to-peer")));
  }
  say(fmt::format("\nSources:\n"));
  for (std::size_t i = 0; i < sources.size(); ++i)
    say(fmt::format("[{}] {}\n", i + 1, sources[i]));
  return out;
}

const SourceMark kCommandLine{"<command line>", 0, 0};

// Up to `most` items, then how many more.
std::string some_of(const std::vector<std::string>& items, std::size_t most) {
  std::string out;
  for (std::size_t i = 0; i < items.size() && i < most; ++i)
    out += (i > 0 ? ", " : "") + items[i];
  if (items.size() > most) out += fmt::format(" and {} more", items.size() - most);
  return out;
}

// Catalogue GPUs whose NVLinks could give the matrix's NV# entries (all GPUs without NVLink
// where it has none): the ids to suggest when nothing names the model.
std::vector<std::string> fitting_gpu_ids(const SmiTopology& topology,
                                         const GpuCatalogue& catalogue) {
  std::vector<int> per_gpu(static_cast<std::size_t>(topology.gpus), 0);
  std::set<int> counts;
  for (int a = 0; a < topology.gpus; ++a) {
    for (int b = 0; b < topology.gpus; ++b) {
      const SmiCell& cell = topology.cell(a, b);
      if (cell.path != SmiPath::nvlink) continue;
      per_gpu[static_cast<std::size_t>(a)] += cell.nvlinks;
      counts.insert(cell.nvlinks);
    }
  }
  const int most = *std::max_element(per_gpu.begin(), per_gpu.end());
  std::vector<std::string> ids;
  for (const GpuSpec& gpu : catalogue.gpus) {
    if (is_cpu_architecture(gpu.architecture)) continue;
    const bool fits =
        counts.empty()
            ? !gpu.nvlink
            : gpu.nvlink && (gpu.nvlink->links >= most ||
                             (counts.size() == 1 && gpu.nvlink->links == *counts.begin()));
    if (fits) ids.push_back(gpu.id);
  }
  return ids;
}

// The GPU the machine has: --gpu, or --smi-query's product name.
const GpuSpec& smi_gpu(const TopoArgs& a, const SmiTopology& topology) {
  const GpuCatalogue& catalogue = bundled_gpu_catalogue();
  std::vector<std::string_view> ids;
  for (const GpuSpec& g : catalogue.gpus)
    if (!is_cpu_architecture(g.architecture)) ids.push_back(g.id);
  if (!a.gpu.empty() && !a.smi_query.empty()) {
    throw InputError(kCommandLine, "--gpu",
                     "names the GPU, and so does --smi-query's Product Name: give one of them");
  }
  if (!a.gpu.empty()) {
    const GpuSpec* gpu = catalogue.find(a.gpu);
    if (gpu == nullptr || is_cpu_architecture(gpu->architecture)) {
      throw InputError(
          kCommandLine, "--gpu",
          fmt::format("'{}' is not a GPU of the catalogue ({}){}; its ids: {}; a GPU it lacks "
                      "goes in a catalogue of your own, given with --catalogue FILE",
                      a.gpu, catalogue.source_file, did_you_mean(a.gpu, ids),
                      some_of(std::vector<std::string>(ids.begin(), ids.end()), 100)));
    }
    return *gpu;
  }
  if (!a.smi_query.empty()) {
    const SmiQuery query = read_smi_query(a.smi_query);
    if (query.attached_gpus && *query.attached_gpus != topology.gpus) {
      throw InputError(query.attached_mark, "Attached GPUs",
                       fmt::format("{} here, but the matrix ({}) has {}: are both files from "
                                   "the same machine?",
                                   *query.attached_gpus, topology.file, topology.gpus));
    }
    const SmiQuery::Product& first = query.products.front();
    for (const SmiQuery::Product& product : query.products) {
      if (product.name != first.name) {
        throw InputError(product.mark, "Product Name",
                         fmt::format("'{}' here but '{}' at {}: a machine file has one GPU "
                                     "model; give --gpu ID for the one to simulate",
                                     product.name, first.name, first.mark.str()));
      }
    }
    const GpuSpec* gpu = gpu_for_product_name(first.name, catalogue);
    if (gpu == nullptr) {
      const std::vector<std::string> similar = similar_gpu_ids(first.name, catalogue, 5);
      throw InputError(
          first.mark, "Product Name",
          fmt::format("'{}' is not one GPU of the catalogue ({}){}; give its id with --gpu ID "
                      "instead of --smi-query, or describe the GPU in a catalogue of your own "
                      "given with --catalogue FILE (docs/formats.md)",
                      first.name, catalogue.source_file,
                      similar.empty() ? std::string()
                                      : fmt::format(": the closest are {}", some_of(similar, 5))));
    }
    return *gpu;
  }
  const std::vector<std::string> fitting = fitting_gpu_ids(topology, catalogue);
  throw InputError(
      kCommandLine, "--gpu",
      fmt::format("the matrix ({}) does not name the GPU model: give --gpu ID, a catalogue id "
                  "({}), or --smi-query FILE, the output of `nvidia-smi -q` on the machine",
                  topology.file,
                  fitting.empty()
                      ? std::string("none of the bundled ones has the NVLinks the matrix shows: "
                                    "describe the GPU in a catalogue of your own, --catalogue "
                                    "FILE")
                      : "the ones whose NVLinks fit the matrix: " + some_of(fitting, 12)));
}

// `epochcast topo --from-nvidia-smi FILE`: the machine file, and what it could not say.
int write_machine_from_smi(const TopoArgs& a) {
  if (!a.machine.empty()) {
    throw InputError(kCommandLine, "--from-nvidia-smi",
                     fmt::format("writes a machine file; give it or a machine to show ('{}'), "
                                 "not both",
                                 a.machine));
  }
  if (a.nodes > 0) {
    throw InputError(kCommandLine, "--nodes",
                     "a matrix of nvidia-smi topo -m describes one node; --nodes goes with a "
                     "machine to show");
  }
  OutputFiles outputs;
  const OutputFile output = outputs.add(a.output.empty() ? "-" : a.output, "-o");
  for (const auto& [file, option] :
       {std::pair{a.from_smi, "--from-nvidia-smi"}, std::pair{a.smi_query, "--smi-query"}}) {
    if (!file.empty() && OutputFile::resolve(file, option).same_as(output)) {
      throw InputError(
          kCommandLine, "-o",
          fmt::format("'{}' is the file {} reads; write the machine to another", a.output, option));
    }
  }
  std::FILE* out = output.kind() == OutputFile::Kind::standard_output ? stderr : stdout;

  const SmiTopology topology = read_smi_topology(a.from_smi);
  const GpuSpec& gpu = smi_gpu(a, topology);
  const std::filesystem::path named =
      output.kind() == OutputFile::Kind::standard_output ? a.from_smi : a.output;
  SmiMachine draft = smi_machine(topology, gpu, named.stem().string());
  if (gpu.mark.file != bundled_gpu_catalogue().source_file) {
    draft.placeholders.push_back(fmt::format(
        "gpu: '{}' is described in {}, not the bundled catalogue: give that --catalogue to "
        "every command that reads this machine.",
        gpu.id, gpu.mark.file));
  }

  // The machine as the simulator builds it, pair by pair against the matrix.
  const std::string shown_as = output.kind() == OutputFile::Kind::standard_output
                                   ? std::string("<standard output>")
                                   : output.target().string();
  MachineSpec machine;
  try {
    machine = load_machine_from_string(draft.yaml(), shown_as, bundled_gpu_catalogue());
  } catch (const InputError& error) {
    throw std::logic_error(
        fmt::format("the machine written from {} does not load: {}", a.from_smi, error.what()));
  }
  const sim::Topology built = sim::Topology::build(machine, 1);
  std::vector<std::string> differ;
  int pairs = 0;
  bool redrawn = false;  // some pair's PXB or NODE, which topo shows as PIX or PHB
  for (int x = 0; x < topology.gpus; ++x) {
    for (int y = x + 1; y < topology.gpus; ++y) {
      ++pairs;
      const SmiPath path = topology.cell(x, y).path;
      redrawn = redrawn || path == SmiPath::pxb || path == SmiPath::node;
      const std::string expected = epochcast_path_label(topology.cell(x, y));
      const std::string got = built.path_label(x, y);
      if (got != expected) {
        differ.push_back(fmt::format("GPU{}-GPU{} {} in the matrix, {} in the machine", x, y,
                                     topology.label(x, y), got));
      }
    }
  }
  if (!differ.empty()) {
    draft.not_expressed.push_back(
        fmt::format("{} of the {} GPU pairs take another path than the matrix's: {}.",
                    differ.size(), pairs, some_of(differ, 16)));
  }
  output.write(draft.yaml());

  const std::size_t width = output_width(out);
  std::string text = fmt::format(
      "{} from {}: {}x {} ({}), {} socket{}, {} PCIe switch{} per socket, NVLink {}.\n",
      output.kind() == OutputFile::Kind::standard_output ? "Machine file" : "Wrote " + a.output,
      a.from_smi, topology.gpus, gpu.name, gpu.id, draft.sockets, draft.sockets == 1 ? "" : "s",
      draft.switches_per_socket, draft.switches_per_socket == 1 ? "" : "es", name_of(draft.nvlink));
  if (pairs == 0) {
    text += "One GPU: no pair of GPUs to compare with the matrix.\n";
  } else if (differ.empty()) {
    text += fmt::format(
        "Every GPU pair's path in `epochcast topo` is the matrix's entry ({} "
        "pair{}{}).\n",
        pairs, pairs == 1 ? "" : "s", redrawn ? "; PXB is shown as PIX, NODE as PHB" : "");
  } else {
    text +=
        fmt::format("{} of the {} GPU pairs take another path than the matrix's (listed below).\n",
                    differ.size(), pairs);
  }
  const auto list = [&](std::string_view title, const std::vector<std::string>& notes) {
    if (notes.empty()) return;
    text += std::string(title) + "\n";
    for (const std::string& note : notes)
      text += "  - " + note + "\n";
  };
  list("Read from the matrix:", draft.from_matrix);
  list("Not in the matrix (edit these in the file before trusting a prediction):",
       draft.placeholders);
  list("What the machine format cannot say as the matrix does (the file's comments say it too):",
       draft.not_expressed);
  std::fputs(wrap_lines(text, width, 4).c_str(), out);
  return 0;
}

}  // namespace

Command add_topo_command(CLI::App& app) {
  auto args = std::make_shared<TopoArgs>();
  CLI::App* command = app.add_subcommand(
      "topo",
      "Show a machine's topology: its links, and for every GPU pair the path type and "
      "bottleneck bandwidth (like nvidia-smi topo -m); or write a machine file from nvidia-smi "
      "topo -m's matrix (--from-nvidia-smi)");
  command->add_option("machine", args->machine, "A bundled machine name (e.g. dgx-a100) or a path");
  command->add_option("--nodes", args->nodes, "Number of nodes, for clusters")
      ->check(options::integer_within(1, 65536))
      ->default_str("the machine's");
  command
      ->add_option("--from-nvidia-smi", args->from_smi,
                   "Write a machine file from FILE, the output of `nvidia-smi topo -m` on the "
                   "machine, instead of showing one: every GPU pair's path as the matrix gives "
                   "it, where the format can say so (it says where not)")
      ->type_name("FILE");
  command
      ->add_option("--smi-query", args->smi_query,
                   "With --from-nvidia-smi: FILE, the output of `nvidia-smi -q`, whose Product "
                   "Name is the GPU (a catalogue entry)")
      ->type_name("FILE");
  command->add_option("--gpu", args->gpu,
                      "With --from-nvidia-smi: the GPU's catalogue id (topologies/gpus.yaml), "
                      "instead of --smi-query");
  command
      ->add_option("-o,--output", args->output,
                   "With --from-nvidia-smi: the machine file to write ('-': standard output)")
      ->default_str("standard output");
  options::add_catalogue_option(*command, args->catalogues);
  return [args] {
    options::extend_catalogue(args->catalogues);
    if (!args->from_smi.empty()) return write_machine_from_smi(*args);
    for (const auto& [value, option] :
         {std::pair{args->smi_query, "--smi-query"}, std::pair{args->gpu, "--gpu"},
          std::pair{args->output, "-o"}}) {
      if (!value.empty()) {
        throw InputError(kCommandLine, option,
                         "goes with --from-nvidia-smi FILE (a machine file written from "
                         "nvidia-smi topo -m)");
      }
    }
    if (args->machine.empty()) {
      throw InputError(kCommandLine, "machine",
                       "missing: give a machine to show (a bundled name such as dgx-a100, or a "
                       "path), or --from-nvidia-smi FILE to write one from nvidia-smi topo -m");
    }
    std::filesystem::path file =
        resolve_data_file(args->machine, std::filesystem::current_path(), "topologies",
                          SourceMark{"<command line>", 0, 0}, "machine");
    MachineSpec machine = load_machine(file, bundled_gpu_catalogue());
    int nodes = args->nodes > 0 ? args->nodes : machine.nodes;
    if (nodes > 1 && !machine.topology.network) {
      throw InputError(SourceMark{fmt::format("--nodes {}", nodes), 0, 0}, "",
                       fmt::format("the machine '{}' ({}) has no network section to join several "
                                   "nodes",
                                   machine.name, file.string()));
    }
    fmt::print("{}", describe_topology(machine, sim::Topology::build(machine, nodes),
                                       output_width(stdout)));
    return 0;
  };
}

}  // namespace epochcast::cli
