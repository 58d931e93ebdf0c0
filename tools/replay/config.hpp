// The ASTRA-sim experiment files: system (collective implementation per
// dimension, chunks per collective), logical topology (ranks per dimension)
// and remote memory. Unknown keys are ignored, as ASTRA-sim does; a known
// key with a wrong value is an error naming the file and the key.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "chakra.hpp"

namespace genie::replay {

enum class Algo { Ring, Direct, HalvingDoubling, DoubleBinaryTree };
const char* algo_name(Algo a);

struct SystemConfig {
  std::string path;
  // Per dimension (the last entry repeats for dimensions beyond the list).
  std::vector<Algo> all_reduce{Algo::Ring};
  std::vector<Algo> all_gather{Algo::Ring};
  std::vector<Algo> reduce_scatter{Algo::Ring};
  std::vector<Algo> all_to_all{Algo::Ring};
  int chunks = 1;          // preferred-dataset-splits: chunks per collective
  int active_chunks = 1;   // active-chunks-per-dimension: chunks in flight
  std::string scheduling_policy = "LIFO";
  // Replay's own: a ring step's block moves in segments of this many bytes
  // (genie-segment-bytes), so that a rank forwards one while the next
  // arrives. Each segment is a message, which over UCX costs a rendezvous
  // handshake: 2 MiB measured faster than 512 KiB there (about 1.2x at 16
  // MiB per rank on 4 local ranks) and the same over TCP.
  uint64_t segment_bytes = 2 << 20;
  double endpoint_delay_ns = 0;  // reported only; real endpoints have their own
  // ASTRA-sim's custom implementations (all-reduce-implementation-custom
  // and the like): per collective type, the prefix of the per-rank Chakra
  // traces (PREFIX.<rank>.et) that define the algorithm.
  std::map<CollType, std::string> custom;

  Algo algo(const std::vector<Algo>& v, size_t dim) const { return v[dim < v.size() ? dim : v.size() - 1]; }
};

struct Topology {
  std::string path;
  std::vector<int> dims;  // ranks per dimension, dimension 0 varies fastest
  int ranks() const;
};

// ASTRA-sim's communicator groups (--comm-group-configuration): a JSON
// object of group id -> the ranks in it ({"0": [0, 1, 2, 3], "1": [4, 5]}).
// A collective whose pg_name names a group runs over exactly its ranks.
struct CommGroups {
  std::string path;
  std::map<std::string, std::vector<int>> groups;
  // The communicator of a group: 1 + its place in id order (0: all ranks).
  uint32_t index(const std::string& id) const;
};

struct MemoryConfig {
  std::string path;
  std::string type = "NO_MEMORY_EXPANSION";
};

// Each throws genie::Error(GENIE_ERR_PARSE / GENIE_ERR_IO) naming the file.
SystemConfig load_system(const std::string& path);
Topology load_topology(const std::string& path);
// ASTRA-sim's network file (YAML): only `npus_count` is read, the NPUs per
// dimension (`npus_count: [ 4, 2 ]`, or a block list), as the ranks per
// dimension of a topology; the rest describes the simulated network.
Topology load_network(const std::string& path);
// Every rank of every group must be in 0..ranks-1, once per group.
CommGroups load_comm_groups(const std::string& path, int ranks);
MemoryConfig load_memory(const std::string& path);

}  // namespace genie::replay
