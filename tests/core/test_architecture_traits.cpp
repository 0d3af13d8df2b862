// The architecture table: every name once, the traits the models read as their sources give
// them, and an unknown name an input error rather than some default.
#include <set>
#include <string>

#include <catch2/catch.hpp>

#include "core/input_error.h"
#include "core/spec/architecture_traits.h"

using namespace epochcast;

TEST_CASE("the architecture table names each architecture once and in catalogue spelling") {
  std::set<std::string_view> seen;
  for (const ArchitectureTraits& traits : kArchitectures) {
    INFO(traits.name);
    CHECK(seen.insert(traits.name).second);
    CHECK(find_architecture(traits.name) == &traits);
    CHECK(&architecture_traits(traits.name) == &traits);
  }
  CHECK(kArchitectureNames.size() == std::size(kArchitectures));
  CHECK(kArchitectureNames.front() == "maxwell");
}

TEST_CASE("an unknown architecture is an input error that lists the known ones") {
  CHECK(find_architecture("rubin") == nullptr);
  CHECK(find_architecture("") == nullptr);
  try {
    (void)architecture_traits("hoper");
    FAIL("no error for an unknown architecture");
  } catch (const InputError& e) {
    CHECK(e.key() == "gpu.architecture");
    const std::string what = e.what();
    CHECK(what.find("'hoper'") != std::string::npos);
    CHECK(what.find("blackwell") != std::string::npos);
    CHECK(what.find("did you mean 'hopper'") != std::string::npos);
  }
  CHECK_THROWS_AS(is_cpu_architecture("z80"), InputError);
}

TEST_CASE("NCCL's LL128 is on by default at compute capability 7.0 8.0 and 9.0 only") {
  // NCCL src/graph/tuning.cc enables LL128 for sm70, sm80 and sm90 (Volta, A100, Hopper).
  std::set<std::string_view> ll128;
  for (const ArchitectureTraits& traits : kArchitectures) {
    if (traits.nccl_ll128) ll128.insert(traits.name);
  }
  CHECK(ll128 == std::set<std::string_view>{"volta", "ampere", "hopper"});
}

TEST_CASE("only Hopper and later switches reduce in the fabric and only CPUs are CPUs") {
  for (const ArchitectureTraits& traits : kArchitectures) {
    INFO(traits.name);
    CHECK(traits.nvlink_sharp == (traits.name == "hopper" || traits.name == "blackwell"));
    CHECK(traits.cpu == (traits.name == "x86-64" || traits.name == "aarch64"));
    CHECK(is_cpu_architecture(traits.name) == traits.cpu);
    CHECK((traits.gemm_tiles == GemmTiles::cpu_blas) == traits.cpu);
  }
}

TEST_CASE("resident threads per SM follow the CUDA guide's table") {
  // CUDA C++ Programming Guide, compute capability table: 2048 at 5.x 6.x 7.0 8.0 9.0 10.0,
  // 1024 at 7.5 (Turing), 1536 at 8.9 (Ada).
  CHECK(architecture_traits("turing").max_threads_per_sm == 1024);
  CHECK(architecture_traits("ada").max_threads_per_sm == 1536);
  for (std::string_view name : {"maxwell", "pascal", "volta", "ampere", "hopper", "blackwell"}) {
    CHECK(architecture_traits(name).max_threads_per_sm == 2048);
  }
}
