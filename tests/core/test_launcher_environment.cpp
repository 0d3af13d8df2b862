// The launcher's variables: each launcher recognised by what it sets, MPI before torchrun before
// Slurm, and malformed values refused naming the variable; a job array's task (Slurm's, a
// Kubernetes indexed Job's) counted from 0.
#include <map>
#include <optional>
#include <string>

#include <catch2/catch.hpp>

#include "core/input_error.h"
#include "core/io/launcher_environment.h"

namespace epochcast {
namespace {

EnvironmentLookup lookup_in(const std::map<std::string, std::string>& variables) {
  return [&variables](const char* name) -> const char* {
    const auto it = variables.find(name);
    return it == variables.end() ? nullptr : it->second.c_str();
  };
}

LaunchEnvironment read(const std::map<std::string, std::string>& variables) {
  return read_launch_environment(lookup_in(variables));
}

std::optional<ArrayTask> read_task(const std::map<std::string, std::string>& variables) {
  return read_array_task(lookup_in(variables));
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

TEST_CASE("a process outside a job array has no array task") {
  CHECK_FALSE(read_task({}).has_value());
  CHECK_FALSE(read_task({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}}).has_value());
}

TEST_CASE("a Slurm array task is counted from the array's first index") {
  const std::optional<ArrayTask> task = read_task({{"SLURM_ARRAY_TASK_ID", "7"},
                                                   {"SLURM_ARRAY_TASK_MIN", "1"},
                                                   {"SLURM_ARRAY_TASK_MAX", "10"},
                                                   {"SLURM_ARRAY_TASK_COUNT", "10"}});
  REQUIRE(task.has_value());
  CHECK(task->index == 7 - 1);
  CHECK(task->count == 10);
  CHECK_THAT(task->source, Catch::Contains("SLURM_ARRAY_TASK_ID=7"));
}

TEST_CASE("a Slurm array with a step counts its indices in steps") {
  // sbatch --array=0-18:2: indices 0, 2, ..., 18, ten tasks; 14 is the eighth.
  const std::optional<ArrayTask> task = read_task({{"SLURM_ARRAY_TASK_ID", "14"},
                                                   {"SLURM_ARRAY_TASK_MIN", "0"},
                                                   {"SLURM_ARRAY_TASK_MAX", "18"},
                                                   {"SLURM_ARRAY_TASK_STEP", "2"},
                                                   {"SLURM_ARRAY_TASK_COUNT", "10"}});
  REQUIRE(task.has_value());
  CHECK(task->index == (14 - 0) / 2);
  CHECK(task->count == 10);
}

TEST_CASE("a Slurm array that is not one range is refused") {
  // sbatch --array=1,4,9: three tasks from 1 to 9, not a range with a step.
  CHECK_THROWS_WITH(read_task({{"SLURM_ARRAY_TASK_ID", "4"},
                               {"SLURM_ARRAY_TASK_MIN", "1"},
                               {"SLURM_ARRAY_TASK_MAX", "9"},
                               {"SLURM_ARRAY_TASK_COUNT", "3"}}),
                    Catch::Contains("SLURM_ARRAY_TASK_ID") && Catch::Contains("one range"));
}

TEST_CASE("a Slurm array task without the array's first index or count is refused by name") {
  CHECK_THROWS_WITH(read_task({{"SLURM_ARRAY_TASK_ID", "3"}, {"SLURM_ARRAY_TASK_COUNT", "4"}}),
                    Catch::Contains("SLURM_ARRAY_TASK_MIN") && Catch::Contains("is not set"));
  CHECK_THROWS_WITH(read_task({{"SLURM_ARRAY_TASK_ID", "3"}, {"SLURM_ARRAY_TASK_MIN", "0"}}),
                    Catch::Contains("SLURM_ARRAY_TASK_COUNT"));
  CHECK_THROWS_WITH(read_task({{"SLURM_ARRAY_TASK_ID", "x"}}),
                    Catch::Contains("SLURM_ARRAY_TASK_ID") && Catch::Contains("'x'"));
}

TEST_CASE("a Kubernetes indexed Job's task is its JOB_COMPLETION_INDEX with no count") {
  const std::optional<ArrayTask> task = read_task({{"JOB_COMPLETION_INDEX", "0"}});
  REQUIRE(task.has_value());
  CHECK(task->index == 0);
  CHECK_FALSE(task->count.has_value());
  CHECK_THROWS_AS(read_task({{"JOB_COMPLETION_INDEX", "-1"}}), InputError);
}

}  // namespace
}  // namespace epochcast
