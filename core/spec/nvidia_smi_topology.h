// What `nvidia-smi topo -m` says of a machine (how every pair of its GPUs and NICs is
// connected) and what `nvidia-smi -q` says of its GPU (the product name), read strictly; and the
// machine file (kind: machine, docs/formats.md) that describes the matrix with the format's
// shorthands, as closely as they can, saying where they cannot.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/input_error.h"
#include "core/spec/hardware_spec.h"

namespace epochcast {

// nvidia-smi topo -m's legend, nearest first: X (the device itself), NV# (# bonded NVLinks),
// PIX (at most one PCIe bridge), PXB (several PCIe bridges, no host bridge), PHB (through a
// PCIe host bridge, typically the CPU), NODE (across host bridges within a NUMA node), SYS
// (across the SMP interconnect between NUMA nodes, QPI/UPI). Drivers before NODE existed
// printed SOC for SYS; it is read as SYS.
enum class SmiPath { self, nvlink, pix, pxb, phb, node, sys };

struct SmiCell {
  SmiPath path = SmiPath::sys;
  int nvlinks = 0;  // NV#'s #; 0 for the other paths
  SourceMark mark;
};

struct SmiDevice {
  std::string name;  // as the header names it: "GPU0", "NIC3", "mlx5_0"
  bool is_gpu = false;
  // The row's CPU Affinity and NUMA Affinity as printed ("0-19,40-59", "1"); empty where the
  // column is absent, empty or N/A (NIC rows have none).
  std::string cpu_affinity;
  std::string numa_affinity;
  SourceMark mark;  // the row's first cell
};

struct SmiTopology {
  std::string file;
  int gpus = 0;                                  // devices[0..gpus) are GPU0, GPU1, ...
  std::vector<SmiDevice> devices;                // the header's order: GPUs, then NICs
  std::vector<std::vector<SmiCell>> cells;       // [row][column]; square and symmetric
  std::map<std::string, std::string> nic_names;  // the NIC Legend: "NIC0" -> "mlx5_0"

  const SmiCell& cell(int a, int b) const {
    return cells[static_cast<std::size_t>(a)][static_cast<std::size_t>(b)];
  }
  // "X", "NV12", "PIX", ...: the cell as nvidia-smi prints it.
  std::string label(int a, int b) const;
  // A NIC's name with its NIC Legend name, "NIC0 (mlx5_2)", or the name alone.
  std::string device_name(int device) const;
};

// Reads the output of `nvidia-smi topo -m` (also `--matrix`): text around the matrix (a shell
// prompt, the legend) is allowed; tabs or spaces; ANSI colour codes are skipped. Raises
// InputError at file:line:col for a file without a matrix, a header naming GPUs out of order, a
// missing or cut row, an entry outside the legend, a row with more or fewer entries than the
// header has devices, and a matrix that is not symmetric with X on its diagonal.
SmiTopology read_smi_topology(const std::filesystem::path& file);
SmiTopology parse_smi_topology(std::string_view text, const std::string& name);

// The product names of `nvidia-smi -q` ("Product Name : NVIDIA H100 80GB HBM3"), one per GPU
// section, and its "Attached GPUs" count.
struct SmiQuery {
  std::string file;
  struct Product {
    std::string name;
    SourceMark mark;  // the name's place
  };
  std::vector<Product> products;
  std::optional<int> attached_gpus;
  SourceMark attached_mark;
};
// Raises InputError when the file has no Product Name line.
SmiQuery read_smi_query(const std::filesystem::path& file);
SmiQuery parse_smi_query(std::string_view text, const std::string& name);

// The catalogue's GPU that nvidia-smi calls `product`: the entry whose name has every word of
// it (letters and digits, case aside, "NVIDIA" aside), when exactly one has; an entry with all
// of its words and no others wins over those. Product names that no catalogue name spells, such
// as the H100 SXM5's "NVIDIA H100 80GB HBM3", are known by name. Null when none, or several,
// fit ("NVIDIA H200" is the SXM board and the NVL's name without its "NVL").
const GpuSpec* gpu_for_product_name(std::string_view product, const GpuCatalogue& catalogue);
// Catalogue ids whose names share the most words with `product`, best first (at most `most`).
std::vector<std::string> similar_gpu_ids(std::string_view product, const GpuCatalogue& catalogue,
                                         std::size_t most);

// What `epochcast topo MACHINE` prints for a pair whose nvidia-smi entry is `cell`: the same
// label, except PXB, drawn as PIX (the format has one level of PCIe switches), and NODE, drawn
// as PHB (it has one root complex per socket).
std::string epochcast_path_label(const SmiCell& cell);

// The machine file a matrix becomes with one GPU model (the choices, and the notes its comments
// and the command print). The matrix fixes sockets (groups of devices SYS apart: NUMA nodes),
// PCIe switches (devices PIX or PXB apart, NICs included), and NVLink (NV# entries: an
// NVSwitch fabric when every pair shows the same count and no direct wiring could give it,
// else the pairs as they are). The format fills sockets and switches with consecutive, equal
// shares of the GPUs; a matrix that groups them otherwise is drawn that way anyway, and said.
struct SmiMachine {
  std::string name;
  std::string description;
  std::string gpu_id;
  int gpus = 0;
  int sockets = 1;
  int switches_per_socket = 0;
  int cores = 1;
  double socket_gb_per_s = 0;  // sockets > 1: a placeholder (the matrix has no rate)
  NvlinkShape nvlink = NvlinkShape::none;
  std::vector<NvlinkTopology::Pair> nvlink_pairs;  // explicit and pairs
  std::string input;                               // the matrix's file, as given

  std::vector<std::string> from_matrix;    // what was read, and how it was placed
  std::vector<std::string> placeholders;   // values the matrix does not give
  std::vector<std::string> not_expressed;  // where the format cannot say what the matrix says

  // The machine file: the notes above as comments, then the YAML. Deterministic.
  std::string yaml() const;
};

// Raises InputError (at the matrix's cell or row) when its NVLinks do not fit `gpu`: NV# with
// a GPU without NVLink, or more links on a GPU than it has.
SmiMachine smi_machine(const SmiTopology& topology, const GpuSpec& gpu, const std::string& name);

}  // namespace epochcast
