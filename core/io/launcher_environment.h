// Which launcher started this process, and its place among the processes it started, read from
// the variables each launcher sets. One reader for the CLI (spreading sweep points) and the
// runtime (its world of ranks).
//
//   mpirun (Open MPI)        OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK
//   mpiexec (MPICH, Hydra)   PMI_RANK, PMI_SIZE, MPI_LOCALRANKID
//   srun --mpi=pmi2|pmix     PMI_RANK/PMIX_RANK, with SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID
//   srun (no MPI plugin)     SLURM_PROCID, SLURM_STEP_NUM_TASKS (else SLURM_NTASKS),
//                            SLURM_LOCALID, in a job step (SLURM_STEP_ID)
//   torchrun                 RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT,
//                            TORCHELASTIC_USE_AGENT_STORE
//
// An MPI launcher wins over the others (srun --mpi=pmix sets both kinds); torchrun inside a
// Slurm step wins over Slurm (each srun task then runs torchrun, which starts the ranks). A
// batch script itself is no launch: Slurm runs it as task 0 (SLURM_PROCID 0, SLURM_NTASKS of the
// whole job) outside any step, so a process it starts directly is alone.
//
// Apart from those, the task of a job array this process runs, where a scheduler says
// (`read_array_task`):
//
//   sbatch --array           SLURM_ARRAY_TASK_ID, _MIN, _COUNT (_STEP, _MAX where given)
//   Kubernetes indexed Job   JOB_COMPLETION_INDEX (from 0; the Job's completions are not told)
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace epochcast {

enum class Launcher {
  none,      // started alone: one process
  mpi,       // an MPI launcher (mpirun, mpiexec, srun with a PMI plugin): MPI_Init joins them
  torchrun,  // torchrun / torch.distributed.run (env://)
  slurm,     // srun without an MPI plugin
};

std::string_view name_of(Launcher launcher);

struct LaunchEnvironment {
  Launcher launcher = Launcher::none;
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  // Where rank 0 listens for the others (torchrun's MASTER_ADDR and MASTER_PORT; under Slurm
  // the same variables when the job script exports them). Empty / 0 where not given.
  std::string master_address;
  int master_port = 0;
  // torchrun's static rendezvous (its default): torchrun's own store already listens on
  // MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE=True), so the port is taken on rank 0's host.
  bool master_port_taken_by_torchrun = false;
  // The variable the rank was read from ("OMPI_COMM_WORLD_RANK", "RANK", ...), for messages.
  std::string rank_variable;
};

// Reads the launcher's variables through `lookup` (the process environment by default; tests
// pass their own). Raises InputError naming the variable when one is set but malformed (not a
// whole number, a rank outside [0, size), a port outside 1-65535).
using EnvironmentLookup = std::function<const char*(const char*)>;
LaunchEnvironment read_launch_environment(const EnvironmentLookup& lookup = {});

// One task of a job array: each task of the array is started alone, with its own index.
struct ArrayTask {
  int index = 0;             // the task's place in the array, from 0
  std::optional<int> count;  // the array's tasks; unknown for a Kubernetes indexed Job
  // Where index and count were read ("SLURM_ARRAY_TASK_ID=7 (from 1, 10 tasks)"), for messages.
  std::string source;
};

// The array task this process runs, read through `lookup`; nullopt when neither Slurm's
// SLURM_ARRAY_TASK_ID nor Kubernetes' JOB_COMPLETION_INDEX is set (Slurm's wins when both
// are). A Slurm task's index counts the array's indices from SLURM_ARRAY_TASK_MIN in steps of
// SLURM_ARRAY_TASK_STEP (sbatch --array=1-10 or 0-18:2 give indices 0 to 9). Raises InputError
// naming the variable when one is malformed, when SLURM_ARRAY_TASK_MIN or _COUNT is missing, or
// when the array is not one range (--array=1,4,9: its indices cannot be told from the task's).
std::optional<ArrayTask> read_array_task(const EnvironmentLookup& lookup = {});

}  // namespace epochcast
