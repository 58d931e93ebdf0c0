// Collectives as point-to-point steps over the Fabric, on real buffers.
//
// A collective runs over the ranks that share this rank's coordinates on
// the dimensions it does not involve (involved_dim), dimension by
// dimension: reduce-scatter stages in dimension order, all-gather stages in
// reverse, each with the implementation the system file names for that
// dimension (ring, direct, halving-doubling, double binary tree). The data
// is split into the system's chunks per collective; up to its active chunks
// run at once, each with its own buffers.
//
// Every contribution is a pattern that is a function of (source rank,
// collective, chunk, element) only: integer-valued float32 for reductions,
// so sums are exact, and 32-bit hashes otherwise. Each rank checks every
// element it ends up with and counts the wrong ones.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "chakra.hpp"
#include "config.hpp"
#include "fabric.hpp"
#include "timeline.hpp"

namespace genie::replay {

struct CollSpec {
  CollType type = CollType::AllReduce;
  uint64_t bytes = 0;        // comm_size: per rank (all-gather: its input)
  // The communicator: 0 for all ranks (or the dimensions `involved`
  // selects), else a group of --comm-group-configuration (CommGroups::index),
  // whose ranks are `members`, in the file's order.
  uint32_t comm = 0;
  std::vector<int> members;
  std::string comm_name;     // the group's id (pg_name); "" for all ranks
  uint32_t seq = 0;          // issue order among this rank's collectives on the communicator
  std::vector<bool> involved;  // per topology dimension; empty: all
  std::string name;          // the node, for reports
  // The system file's custom implementation of this collective type: this
  // rank's trace of it, run as written (sends, receives, reductions).
  const Trace* custom = nullptr;

  // What sets this collective's payload patterns apart from the others'.
  uint32_t pattern_seq() const { return seq ^ (comm << 24); }
};

struct CollResult {
  uint64_t wrong = 0;     // elements that did not verify
  uint64_t elements = 0;  // elements verified
  int group = 1;          // ranks taking part
  int64_t comm_ns = 0;    // time spent communicating and reducing (not filling or checking)
  std::vector<std::pair<int64_t, int64_t>> spans;  // per chunk, on the timeline
};

struct RunEnv {
  Fabric& fabric;
  const SystemConfig& system;
  const Topology& topology;
  Timeline& timeline;
  int lane = 0;
  // Called (perhaps more than once, from any thread) once the collective
  // has posted its first transfer, or has none: the executor issues the
  // next ready collective only then, so that the scheduling policy decides
  // the order their messages enter the data plane.
  std::function<void()> issued;
};

// Runs one collective on this rank; returns what it verified. Throws the
// Fabric's errors (deadlock, lost peer) with the node named by the caller.
CollResult run_collective(RunEnv& env, const CollSpec& spec);

// The buffers, in bytes each, that run_collective takes for `spec` on this
// rank (every chunk that runs at once), so that they can be made ready
// before the run starts (Pool::reserve). Staging for payloads that arrive
// before their receive is not included: that depends on timing.
std::vector<uint64_t> collective_buffers(const SystemConfig& sys, const Topology& topo, int rank,
                                         const CollSpec& spec);

// The ranks a collective runs over, with this rank's: a communicator
// group's members, or those of the dimensions it involves, in group order
// (dimension 0 fastest).
std::vector<int> collective_group(const Topology& topo, int rank, const CollSpec& spec);

// The limits of a custom implementation's messages (their keys): tags in
// 0..kCustomTags-1, and at most kCustomRepeats messages with one tag
// between two ranks in one direction.
constexpr int64_t kCustomTags = 1 << 24;
constexpr uint32_t kCustomRepeats = 4096;

// Bus bandwidth factor (nccl-tests conventions) for a group of n.
double bus_factor(CollType t, int n);

// Message keys: collectives by (communicator, seq, chunk, stage, step,
// segment), in 8, 12, 12, 6, 16 and 8 bits (fields wrap: keys only need to
// differ among the messages in flight at once: at most 256 nodes run at
// once, so a rank is never 4096 collectives of one communicator ahead,
// chunks are at most 4096, and a ring's steps are all posted at once, so a
// ring has at most 65536 ranks); sends and receives by (tag, occurrence of
// that tag between the two ranks).
uint64_t coll_key(uint32_t comm, uint32_t seq, uint32_t chunk, uint32_t stage, uint32_t step, uint32_t segment = 0);
uint64_t p2p_key(uint32_t tag, uint32_t occurrence);
// What a key names, for reports: "tag T (its Nth message)" or
// "collective #S chunk C stage G step P segment M".
std::string describe_key(uint64_t key);

// The pattern of a point-to-point message, and its check (wrong elements).
void fill_p2p(std::vector<uint32_t>& buf, int src, uint32_t tag, uint32_t occurrence);
uint64_t check_p2p(const std::vector<uint32_t>& buf, int src, uint32_t tag, uint32_t occurrence);

}  // namespace genie::replay
