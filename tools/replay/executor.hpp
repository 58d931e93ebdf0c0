// The replay of one rank's Chakra trace: nodes run once their data and
// control dependencies are done; compute (and memory) nodes are timed waits
// of their duration_micros; sends and receives move patterned bytes to the
// peer named by comm_dst / from comm_src, matched by comm_tag and by the
// order of equal tags; collectives run over the data plane
// (collective.hpp), matched across ranks by the order this rank issues them
// (file order), never by node id.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "chakra.hpp"
#include "collective.hpp"

namespace genie::replay {

struct CollRecord {
  uint32_t seq = 0;
  std::string name;
  CollType type = CollType::AllReduce;
  uint64_t bytes = 0;
  int group = 1;
  int64_t time_ns = 0;
  uint64_t wrong = 0;
  uint64_t elements = 0;
  std::string comm;        // its communicator group (pg_name); "" for all ranks
  uint32_t comm_seq = 0;   // its place among the communicator's collectives
};

struct RankReport {
  int rank = 0;
  int64_t finished_ns = 0;
  int64_t exposed_comm_ns = 0;
  uint64_t nodes = 0;
  uint64_t wrong = 0;      // every wrong element, collectives and sends alike
  uint64_t p2p_messages = 0;
  uint64_t p2p_bytes = 0;
  uint64_t bytes_sent = 0;
  uint64_t bytes_staged = 0;  // received before their receive was posted (copied once more)
  uint64_t node_threads = 0;  // threads that ran the nodes (as many as were in flight at once)
  double compute_flops = 0;  // FLOPs of the matrix products --compute real ran
  uint64_t buffers_prewarmed = 0;   // bytes of collective buffers made ready before the start
  uint64_t buffers_allocated = 0;   // bytes of collective buffers allocated during the run
  uint64_t huge_page_bytes = 0;     // of the rank's memory, backed by huge pages at the end
  std::vector<CollRecord> colls;  // by seq (file order)
  std::vector<uint32_t> issue_order;  // seqs in the order the scheduling policy issued them
  std::vector<TraceEvent> events;
  std::string error;  // empty on success
};

class RealCompute;

// What a rank's collectives run over beyond the system file and topology.
struct CollContext {
  const CommGroups* groups = nullptr;  // --comm-group-configuration, or none
  // This rank's traces of the system file's custom implementations.
  const std::map<CollType, Trace>* custom = nullptr;
};

struct ExecOptions {
  double compute_scale = 1.0;  // duration_micros is multiplied by it
  bool progress = false;       // a progress line on stderr
  RealCompute* real = nullptr;  // COMP_NODEs run matrix products on it (compute.hpp), else timed waits
  CollContext colls;
};

// Checks the trace against the run (node types, attributes, peers in
// range, dependencies that exist, no cycle); throws Error(PARSE or
// INVALID_ARGUMENT) naming the file and the node.
void validate_trace(const Trace& trace, int rank, int size);

// Checks the pg_name of each collective against the communicator groups:
// a group of the file that has this rank (else Error(INVALID_ARGUMENT)
// naming the node and the file). Without a file (`groups` null), names
// are counted in a warning and their collectives run over all ranks.
void check_comm_groups(Trace& trace, int rank, const CommGroups* groups);

// Checks a custom implementation's trace (already validate_trace'd): only
// sends, receives, compute, memory and metadata nodes, tags and repeats
// within the keys' limits (collective.hpp).
void validate_custom(const Trace& trace);

// Makes the buffers the trace's collectives will take ready in the pool,
// every page mapped (Pool::reserve), as a program allocates its buffers
// before it starts; returns the bytes reserved. Run before the common
// clock starts.
uint64_t prewarm_buffers(const Trace& trace, const SystemConfig& sys, const Topology& topo, int rank,
                         const CollContext& ctx);

// Replays the trace; throws the first failure with the node named.
RankReport execute(const Trace& trace, RunEnv& env, const ExecOptions& opts);

}  // namespace genie::replay
