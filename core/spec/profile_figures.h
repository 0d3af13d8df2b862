// Every free figure of a hardware profile by its key ("gpu.efficiency.conv",
// "links.efficiency.host_bridge", "host.step_overhead_us", ...), read and written in the unit
// its key names: what calibration fits, what a profile's uncertainty block names, and what
// `predict` varies to turn that uncertainty into an interval.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/spec/profile_spec.h"

namespace epochcast {

enum class FigureKind {
  fraction,      // an efficiency: of a peak, from 1e-4 to 1
  microseconds,  // a time per operation, step or sample: from 1e-3 us to 1e9 us
  ratio,         // a bandwidth relative to another: from 0.001 to 4
  tile_cost,     // a GEMM tile's cost beyond its multiply-adds: from 0 to its own bound
  nanoseconds,   // a kernel's time per element of serial work: within its own bounds
};

struct ProfileFigure {
  std::string key;
  FigureKind kind = FigureKind::fraction;
  double lower = 0, upper = 0;  // physical bounds, in the key's unit
  // Set from kernel or layer times (or the loaders' own clocks) only: epoch times cannot tell it
  // from the figures around it, so the end-to-end fit leaves it as calibrated.
  bool kernel_level = false;
};

// The range a figure can physically take on a GPU, narrower than ProfileFigure's bounds (which
// any device, a CPU's included, may need): a fit that wants to leave it is not finding a figure
// but absorbing a mechanism the model lacks, and calibration names that gap instead. `why` says
// where the range comes from.
struct PhysicalRange {
  double lower = 0, upper = 0;  // in the key's unit
  std::string_view why;
};
// The GPU range of the GPU figures that have one (gpu.efficiency.*, gpu.memory_efficiency,
// gpu.optimizer_memory_efficiency, gpu.bandwidth_relative.*, gpu.min_kernel_us); none for the
// others, whose ProfileFigure bounds stand.
std::optional<PhysicalRange> gpu_physical_range(std::string_view key);

// Every figure calibration may move, in a fixed order.
const std::vector<ProfileFigure>& profile_figures();
const ProfileFigure* find_profile_figure(std::string_view key);

// The value in the key's unit; the input.* figures are absent unless the profile gives them.
std::optional<double> profile_figure_value(const HardwareProfile& profile, std::string_view key);
void set_profile_figure(HardwareProfile& profile, std::string_view key, double value);
// Gives `to` the figure as `from` has it: unset where `from` leaves an optional figure unset (so
// that its default, not a copy of it, stands).
void copy_profile_figure(HardwareProfile& to, const HardwareProfile& from, std::string_view key);

}  // namespace epochcast
