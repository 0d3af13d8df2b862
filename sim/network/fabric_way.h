// Which way a transfer with an NVSwitch fabric (NVLink SHARP) crosses a GPU's NVSwitch links.
// Its own header so that plans can name it without the whole topology.
#pragma once

#include <cstdint>

namespace epochcast::sim {

enum class FabricWay : std::uint8_t {
  none,           // not a fabric transfer
  round_trip,     // into the switch and back out, the same bytes each way
  into_switch,    // the GPU's links towards the switch only (data the switch reads or reduces)
  out_of_switch,  // the switch's links towards the GPU only (data it multicasts or returns)
};

}  // namespace epochcast::sim
