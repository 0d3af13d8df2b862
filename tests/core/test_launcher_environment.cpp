// The launcher's variables: each launcher recognised by what it sets, MPI before torchrun before
// Slurm, and malformed values refused naming the variable.
#include <map>
#include <string>

#include <catch2/catch.hpp>

#include "core/input_error.h"
#include "core/io/launcher_environment.h"

namespace epochcast {
namespace {

LaunchEnvironment read(const std::map<std::string, std::string>& variables) {
  return read_launch_environment([&](const char* name) -> const char* {
    const auto it = variables.find(name);
    return it == variables.end() ? nullptr : it->second.c_str();
  });
}

TEST_CASE("a process started alone is rank 0 of 1") {
  const LaunchEnvironment e = read({});
  CHECK(e.launcher == Launcher::none);
  CHECK(e.rank == 0);
  CHECK(e.size == 1);
}

TEST_CASE("Open MPI's mpirun is read from OMPI_COMM_WORLD variables") {
  const LaunchEnvironment e = read({{"OMPI_COMM_WORLD_RANK", "3"},
                                    {"OMPI_COMM_WORLD_SIZE", "8"},
                                    {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}});
  CHECK(e.launcher == Launcher::mpi);
  CHECK(e.rank == 3);
  CHECK(e.size == 8);
  CHECK(e.local_rank == 1);
}

TEST_CASE("srun with PMIx is an MPI launch sized by SLURM_NTASKS") {
  const LaunchEnvironment e = read(
      {{"PMIX_RANK", "5"}, {"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "16"}, {"SLURM_LOCALID", "1"}});
  CHECK(e.launcher == Launcher::mpi);
  CHECK(e.rank == 5);
  CHECK(e.size == 16);
  CHECK(e.local_rank == 1);
}

TEST_CASE("torchrun is read from RANK WORLD_SIZE LOCAL_RANK and MASTER_ADDR") {
  const LaunchEnvironment e = read({{"RANK", "2"},
                                    {"WORLD_SIZE", "4"},
                                    {"LOCAL_RANK", "0"},
                                    {"MASTER_ADDR", "node7"},
                                    {"MASTER_PORT", "29500"},
                                    {"SLURM_PROCID", "0"},
                                    {"SLURM_NTASKS", "2"}});
  CHECK(e.launcher == Launcher::torchrun);  // torchrun inside a Slurm step
  CHECK(e.rank == 2);
  CHECK(e.size == 4);
  CHECK(e.master_address == "node7");
  CHECK(e.master_port == 29500);
}

TEST_CASE("torchrun's static rendezvous says its own store holds MASTER_PORT") {
  const std::map<std::string, std::string> c10d{{"RANK", "0"},
                                                {"WORLD_SIZE", "2"},
                                                {"MASTER_ADDR", "127.0.0.1"},
                                                {"MASTER_PORT", "29500"},
                                                {"TORCHELASTIC_USE_AGENT_STORE", "False"}};
  CHECK_FALSE(read(c10d).master_port_taken_by_torchrun);
  auto static_rendezvous = c10d;
  static_rendezvous["TORCHELASTIC_USE_AGENT_STORE"] = "True";
  CHECK(read(static_rendezvous).master_port_taken_by_torchrun);
}

TEST_CASE("plain srun is read from SLURM_PROCID and SLURM_NTASKS in a job step") {
  const LaunchEnvironment e = read({{"SLURM_STEP_ID", "0"},
                                    {"SLURM_PROCID", "1"},
                                    {"SLURM_NTASKS", "2"},
                                    {"SLURM_LOCALID", "1"}});
  CHECK(e.launcher == Launcher::slurm);
  CHECK(e.rank == 1);
  CHECK(e.size == 2);
  CHECK(e.local_rank == 1);
  CHECK(e.master_port == 0);
}

TEST_CASE("a job step's task count wins over the job's under srun --preserve-env") {
  const LaunchEnvironment e = read({{"SLURM_STEP_ID", "3"},
                                    {"SLURM_PROCID", "1"},
                                    {"SLURM_STEP_NUM_TASKS", "2"},
                                    {"SLURM_NTASKS", "8"},
                                    {"MASTER_ADDR", "node1"},
                                    {"MASTER_PORT", "29400"}});
  CHECK(e.launcher == Launcher::slurm);
  CHECK(e.size == 2);
  CHECK(e.master_address == "node1");
  CHECK(e.master_port == 29400);
}

TEST_CASE("a batch script outside any job step is a process started alone") {
  // Slurm runs the script as task 0 of the whole job; what it starts directly is one process.
  const LaunchEnvironment e =
      read({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "0"}});
  CHECK(e.launcher == Launcher::none);
  CHECK(e.size == 1);
}

TEST_CASE("a malformed launcher variable is refused by name") {
  CHECK_THROWS_WITH(read({{"RANK", "4"}, {"WORLD_SIZE", "4"}}),
                    Catch::Contains("RANK") && Catch::Contains("0 to 3"));
  CHECK_THROWS_WITH(read({{"RANK", "0"}, {"WORLD_SIZE", "four"}}),
                    Catch::Contains("WORLD_SIZE") && Catch::Contains("'four'"));
  CHECK_THROWS_AS(read({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "70000"}}), InputError);
}

}  // namespace
}  // namespace epochcast
