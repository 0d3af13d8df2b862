// `epochcast topo MACHINE`: the machine's graph, and for every GPU pair the path type and
// bottleneck bandwidth, in the spirit of `nvidia-smi topo -m`.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <map>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/terminal.h"
#include "core/format/text_table.h"
#include "core/spec/data_paths.h"
#include "core/spec/hardware_spec.h"
#include "options/command_line.h"
#include "options/scenario_options.h"
#include "sim/network/topology.h"

namespace epochcast::cli {

namespace {

struct TopoArgs {
  std::string machine;
  std::vector<std::string> catalogues;
  int nodes = 0;
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
                          kP2pLevelNames[static_cast<int>(m.topology.pcie.nccl_p2p_level)])
            : std::string("the machine allows no peer-to-peer")));
  }
  say(fmt::format("\nSources:\n"));
  for (std::size_t i = 0; i < sources.size(); ++i)
    say(fmt::format("[{}] {}\n", i + 1, sources[i]));
  return out;
}

}  // namespace

Command add_topo_command(CLI::App& app) {
  auto args = std::make_shared<TopoArgs>();
  CLI::App* command = app.add_subcommand(
      "topo",
      "Show a machine's topology: its links, and for every GPU pair the path type and "
      "bottleneck bandwidth (like nvidia-smi topo -m)");
  command->add_option("machine", args->machine, "A bundled machine name (e.g. dgx-a100) or a path")
      ->required();
  command->add_option("--nodes", args->nodes, "Number of nodes, for clusters")
      ->check(options::integer_within(1, 65536))
      ->default_str("the machine's");
  options::add_catalogue_option(*command, args->catalogues);
  return [args] {
    options::extend_catalogue(args->catalogues);
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
