// A cost model that learns: online corrections of the roofline model
// (cost.hpp) from what the executor measures, per device model, op class and
// size bucket (docs/scheduler.md, "Learning from measurements").
//
// Each cell holds the median of the last kWindow observations of
// log(measured / modelled) over the nodes of its op class whose work (FLOPs
// + bytes) falls in its size bucket (powers of two); the model's prediction
// is multiplied by exp(that median). A burst of runs preempted by another
// process, shorter than half the window, does not move it; a lasting change
// is followed within half the window. A size with no cell of its own borrows the nearest cell of its op class within
// two buckets; otherwise the model stands as it is.
//
// The cells are kept beside the device's calibration in the profile cache
// (profile_cache.hpp): "<profile file>.learned.json", so that a later
// process starts from what earlier ones learned.
#pragma once

#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace genie::sched {

enum class OpCode : uint8_t;

class CostLearner {
 public:
  static constexpr int kWindow = 9;          // observations each estimate is the median of
  // Observations an estimate needs before plans use it: the median of three
  // outvotes one cold run (a fresh process's first kernels and pages).
  static constexpr uint64_t kMinObservations = 3;
  static constexpr double kMaxFactor = 1e4;  // corrections stay within [1/kMaxFactor, kMaxFactor]

  // A learner kept in `file` ("" = in memory only), loaded from it now when
  // it exists and is readable (else it starts empty).
  explicit CostLearner(std::string file = "");

  // The process-wide learner of `file`: every device profile of the same
  // device model in this process shares one, and so its observations.
  static std::shared_ptr<CostLearner> shared(const std::string& file);

  // The file of the learner of the device whose calibration is in
  // `profile_file` ("" for "").
  static std::string file_for_profile(const std::string& profile_file);

  // What the model's prediction for a node of class `c` doing `work` (FLOPs
  // + bytes) is multiplied by: 1 when nothing is known. Any thread.
  double factor(OpCode c, double work) const;

  // A node of class `c` doing `work` that the (uncorrected) model priced at
  // `model_s` took `measured_s`. Non-positive or non-finite figures are
  // ignored. Any thread.
  void observe(OpCode c, double work, double model_s, double measured_s);

  // Node `node` of the graph whose cost_signature() is `graph` (a graph
  // that recurs: each step of a decode loop, each run of a cached plan)
  // took `measured_s` against the (uncorrected) model's `model_s`: kept as a
  // cell of that node's own, as the class cells are. Nodes of one class and
  // size differ by where they sit (the first reader of a tensor waits for
  // its cache lines, a permute of a transposed view copies), which only a
  // node's own measurements tell. At most kMaxGraphs graphs (the least
  // observed go first) of at most kMaxGraphNodes nodes. Any thread.
  void observe_node(uint64_t graph, size_t node, double model_s, double measured_s);
  // That node's factor, when it has been measured (else false: the class's
  // factor applies). Any thread.
  bool node_factor(uint64_t graph, size_t node, double* f) const;
  static constexpr size_t kMaxGraphNodes = 1 << 16;

  // A whole run of a multi-node plan of the graph `graph` (its
  // cost_signature()) that this device's node coordinated took `measured_s`
  // against `parts_s`, the plan's sum of its parts (nodes, stages, moves):
  // kept as a cell of that graph's own. The median of a sum of heavy-tailed
  // parts (a round trip that now and then waits for a core) lies above the
  // sum of their medians; this is what plans of the graph scale their
  // predicted total by (total_factor, 1 while unknown). Any thread.
  void observe_total(uint64_t graph, double parts_s, double measured_s);
  double total_factor(uint64_t graph) const;

  // The executor's time per node outside the nodes' kernels (handing a
  // ready node to a worker, waking it), learned from whole runs: a run of n
  // nodes on this device that took `run_s`, its kernels `nodes_s` in all,
  // spent max(0, run_s - nodes_s) / n per node besides them (the same mean,
  // in seconds). Plans add it after each node (0 while unknown). Any thread.
  //
  // `graph` (cost_signature() of the run's graph, 0 = none) keeps a figure
  // of that graph's own besides the device's: graphs differ in how their
  // nodes hand off (a chain of microsecond ops waits on every wake-up, a
  // block of GEMMs hides it), so gap_s(graph) is that graph's figure once it
  // has one, else the device's.
  void observe_run(size_t n_nodes, double run_s, double nodes_s) { observe_run(0, n_nodes, run_s, nodes_s); }
  void observe_run(uint64_t graph, size_t n_nodes, double run_s, double nodes_s);
  double gap_s(uint64_t graph = 0) const;

  // What one stage on this device costs the coordinator of a multi-node
  // plan beyond the device's own run of it (its executor's time) and the
  // moves of its inputs: for a worker, the GraphSubmit round trip (the
  // network, the worker decoding and checking the stage, the reply); for the
  // coordinator's own device, splitting and handing over the stage. Learned
  // from measured stages as an exponentially weighted mean in seconds (as
  // gap_s); stage_known() says whether any stage was seen. Any thread.
  void observe_stage(double overhead_s);
  double stage_s() const;
  bool stage_known() const;

  // The file it is kept in ("" = in memory only).
  const std::string& file() const { return file_; }

  // Observations taken (since construction, loaded ones excluded).
  uint64_t observations() const;
  // Cells known.
  size_t cells() const;

  // Graphs whose own gap is kept, at most (the least observed go first).
  static constexpr size_t kMaxGraphs = 256;

  // Writes the cells to the file when they changed since the last save
  // (atomically: written aside and renamed). Returns false when it could not
  // be written (nothing is lost: the cells stay in memory). Any thread.
  bool save();

  // The size bucket of `work`: floor(log2(work)), 0 for work < 2.
  static int bucket(double work);

 private:
  // The median of the last kWindow observations; a loaded estimate counts
  // as one observation.
  struct Window {
    double v[kWindow] = {};
    uint8_t n = 0, next = 0;
    double add(double current, uint64_t count, double x);  // the new estimate
  };
  struct Cell {
    double log_factor = 0;  // the estimate
    uint64_t count = 0;
    Window w;
    void add(double x) { log_factor = w.add(log_factor, count++, x); }
  };
  struct GraphNodes {
    std::vector<Cell> cells;  // by node id
    uint64_t observed = 0;
  };
  // log(measured / model) clamped to +-log(kMaxFactor); false for a figure
  // that is not positive and finite.
  static bool log_ratio(double model_s, double measured_s, double* x);
  struct Seconds {
    double s = 0;  // the estimate
    uint64_t count = 0;
    Window w;
    void add(double x) { s = w.add(s, count++, x); }
  };

  static uint32_t key(OpCode c, int bucket) {
    return static_cast<uint32_t>(c) << 8 | static_cast<uint32_t>(bucket);
  }
  void load();

  const std::string file_;
  mutable std::shared_mutex mu_;
  std::unordered_map<uint32_t, Cell> cells_;
  Seconds gap_, stage_;
  std::unordered_map<uint64_t, Seconds> graph_gap_;
  std::unordered_map<uint64_t, GraphNodes> node_cells_;
  std::unordered_map<uint64_t, Cell> total_cells_;  // by graph (in memory: per run of this process)
  uint64_t observations_ = 0;
  bool dirty_ = false;
};

}  // namespace genie::sched
