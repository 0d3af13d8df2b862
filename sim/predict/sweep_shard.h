// A sweep split into shards that run apart — the tasks of a Slurm job array or of a Kubernetes
// indexed Job, each `epochcast predict|compare ... --shard K/N --shard-output FILE` — and the
// file each shard writes, which `epochcast merge` joins into the serial run's output.
//
// Shards are numbered from 1 to N. Shard K simulates the sweep's points K-1, K-1+N, K-1+2N, ...
// (counted from 0, in sweep order): every N-th point, as MPI process K-1 of N takes them, so that
// the slow points (a sweep's larger GPU counts and batches come together) spread over the shards.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/predict/point_codec.h"

namespace epochcast::sim {

// The shard file's format and version; another version is refused, never guessed at.
inline constexpr std::string_view kShardFormat = "epochcast.shard/1";

// The points, from 0 and ascending, that shard `shard` (1 to `shards`) of a sweep of `points`
// points simulates.
std::vector<std::size_t> shard_points(std::size_t points, int shard, int shards);

// What makes shards parts of one sweep: the same epochcast, command and arguments, the same
// inputs (the files the command read, by content) and so the same points.
struct SweepIdentity {
  std::string epochcast;               // version_line("epochcast"): version and git revision
  std::string command;                 // "predict" or "compare"
  std::vector<std::string> arguments;  // the arguments that define the sweep, one word each
  std::string inputs;                  // yaml::InputRecord's digest of the files read
  std::size_t points = 0;

  // A digest of every field above (16 hexadecimal digits).
  std::string id() const;
  // "epochcast predict scenarios/x.yaml --gpus 1,2": the command as typed in a POSIX shell
  // (words with blanks or quotes quoted).
  std::string command_line() const;
};

struct ShardFile {
  SweepIdentity sweep;
  int shard = 1;
  int shards = 1;
  // The shard's points in ascending order: each point's place in the sweep (from 0) and outcome.
  std::vector<std::pair<std::size_t, PointOutcome>> outcomes;
};

// The file's text: JSON (docs/formats.md, "Shard files"), each outcome as the base64 of
// encode_outcome's bytes, one outcome a line.
std::string shard_file_text(const ShardFile& file);

// Reads what shard_file_text wrote; `name` names the file in errors. Raises InputError, located
// (name:line:col for a syntax error, else name and the key) and saying what to do, when the text
// is not such a file, is another version, or disagrees with itself: an identity that does not
// match its fields, a shard number out of range, points other than the shard's, an outcome whose
// bytes are damaged (the file carries a digest of them).
ShardFile read_shard_file(std::string_view text, const std::string& name);

}  // namespace epochcast::sim
