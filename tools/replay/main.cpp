// genie-replay (`genie replay`): replays Chakra execution traces over
// Genie's data plane, one process per rank, and reports what happened.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iterator>
#include <memory>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/lsan_interface.h>
#endif

#include "buffer_pool.hpp"
#include "compute.hpp"
#include "control/auth.hpp"
#include "core/error.hpp"
#include "executor.hpp"
#include "fabric.hpp"
#include "local_dpdk.hpp"
#include "rendezvous.hpp"
#include "repair.hpp"
#include "report.hpp"

namespace genie::replay {
namespace {

constexpr int kExitOk = 0, kExitFailure = 1, kExitUsage = 2;

struct Options {
  std::string workload, system, topology, memory, network, comm_groups;
  int ranks = 0;  // 0: from the topology or the network file
  ControlDeps control_deps = ControlDeps::Repair;
  // One line each on ASTRA-sim options that replay accepts and does not use.
  std::vector<std::string> notes;
  std::string launch = "local";
  std::string rendezvous;
  std::string bind = "127.0.0.1";
  std::string backend = "auto";
  double timeout_s = 30;
  double compute_scale = 1;
  bool compute_real = false;
  std::string json, trace;
  TraceLevel trace_level = TraceLevel::Node;
  bool quiet = false;
};

void usage(std::FILE* out) {
  std::fprintf(out,
               "usage: genie replay --workload PREFIX [--system FILE] [--logical-topology FILE]\n"
               "                    [--network-configuration FILE.yml] [--memory FILE]\n"
               "                    [--ranks N | --launch mpi] [--backend B] [--control-deps MODE]\n"
               "                    [--json FILE] [--trace FILE [--trace-level node|event]]\n"
               "\n"
               "Replays a Chakra execution trace (one file per rank, PREFIX.<rank>.et, plain\n"
               "or gzip) over Genie's data plane: collectives become point-to-point steps\n"
               "(the system file's implementation per dimension: ring, direct,\n"
               "halvingDoubling, doubleBinaryTree; its chunks per collective), sends and\n"
               "receives move real bytes, compute nodes are timed waits. Every byte\n"
               "received is checked. Prints, per rank, the ASTRA-sim line\n"
               "  sys[R] finished, <ns> cycles, exposed communication <ns> cycles.\n"
               "(wall-clock nanoseconds), then a table of the collectives (nccl-tests\n"
               "conventions) and a summary. ASTRA-sim's option names are accepted too\n"
               "(--workload-configuration, --system-configuration,\n"
               "--logical-topology-configuration, --remote-memory-configuration,\n"
               "--network-configuration); ASTRA-sim's options that model the simulated\n"
               "machine (--num-queues-per-dim, --comm-scale, --injection-scale,\n"
               "--rendezvous-protocol, --htsim-proto, --logging-configuration,\n"
               "--logging-folder) are accepted with a one-line note saying what replay\n"
               "does instead. A system file's *-implementation-custom (per-rank traces of\n"
               "an algorithm, as ASTRA-sim takes them) runs that algorithm as written.\n"
               "\n"
               "  --ranks N            start N local rank processes (default: the logical\n"
               "                       topology's rank count, else the product of the\n"
               "                       network file's npus_count)\n"
               "  --network-configuration FILE.yml\n"
               "                       ASTRA-sim's network file: its npus_count gives the\n"
               "                       ranks per dimension when there is no logical\n"
               "                       topology; the rest models the simulated network\n"
               "  --comm-group-configuration FILE\n"
               "                       ASTRA-sim's communicator groups (JSON: group id ->\n"
               "                       ranks): a collective whose pg_name names a group\n"
               "                       runs over exactly its ranks\n"
               "  --control-deps MODE  repair (default): follow control dependencies, drop\n"
               "                       those on missing nodes or the node itself and break\n"
               "                       cycles, each with a warning and a count; ignore:\n"
               "                       follow data dependencies only (as Chakra's feeder);\n"
               "                       strict: refuse such traces\n"
               "  --launch mpi         run as one rank started by mpirun (rank and size from\n"
               "                       OMPI_COMM_WORLD_RANK/SIZE); rank 0 hosts the\n"
               "                       rendezvous at --rendezvous HOST:PORT (default\n"
               "                       $GENIE_REPLAY_RENDEZVOUS, else 127.0.0.1:29517) and\n"
               "                       prints the report\n"
               "  --bind HOST          address the data plane listens on and publishes\n"
               "                       (default 127.0.0.1)\n"
               "  --backend B          auto (default: rdma where the ucx plugin loads and\n"
               "                       the ranks are local or an RDMA device is up, else\n"
               "                       tcp; the summary line names it), tcp, dpdk or rdma;\n"
               "                       dpdk joins 2 local ranks by a memif pair, or uses the\n"
               "                       port GENIE_DPDK_EAL names ({rank} in it: the rank)\n"
               "  --timeout S          a wait with no byte moving for S seconds is a\n"
               "                       deadlock, reported with the waiting ranks (default 30)\n"
               "  --compute-scale X    multiply compute durations by X (default 1; 0 skips)\n"
               "  --compute timed|real compute nodes as timed waits of their duration (default)\n"
               "                       or as real matrix products on Genie's embedded executor\n"
               "                       (side from num_ops, else from the duration)\n"
               "  --json FILE          write the report as JSON\n"
               "  --trace FILE         write a Chrome/Perfetto trace, every rank on one clock:\n"
               "                       --trace-level node (each Chakra node, default) or event\n"
               "                       (also each send, receive and wait)\n"
               "  --quiet              no progress line\n"
               "\n"
               "exit status: 0 every rank finished and no byte was wrong; 1 a failure\n"
               "(bad input, a deadlock, a lost peer, wrong bytes); 2 a bad command line.\n");
}

[[noreturn]] void usage_error(const std::string& msg) {
  std::fprintf(stderr, "genie replay: %s (try 'genie replay --help')\n", msg.c_str());
  std::exit(kExitUsage);
}

// The note for an ASTRA-sim option replay accepts and does not use.
std::string ignored_note(const std::string& flag, const std::string& value) {
  std::string why;
  if (flag == "--logging-configuration" || flag == "--logging-folder")
    why = "ASTRA-sim's logging; replay prints its own report (--json, --trace)";
  else if (flag == "--comm-scale")
    why = "ASTRA-sim scales the simulated communication by it; replay moves each node's comm_size as written";
  else
    why = "it models the simulated network; replay's network is the real data plane";
  return cat(flag, " ", value, ": ", why, ", so it is not used");
}

double parse_num(const std::string& flag, const char* v, double lo, double hi) {
  char* end = nullptr;
  const double d = std::strtod(v, &end);
  if (end == v || *end || !(d >= lo && d <= hi)) usage_error(cat(flag, " needs a number in ", lo, "..", hi, ", got '", v, "'"));
  return d;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      usage(stdout);
      std::exit(kExitOk);
    }
    if (a == "--quiet") {
      o.quiet = true;
      continue;
    }
    // --flag=value as well as --flag value.
    std::string flag = a, value;
    const size_t eq = a.find('=');
    if (eq != std::string::npos && a.rfind("--", 0) == 0) {
      flag = a.substr(0, eq);
      value = a.substr(eq + 1);
    } else {
      if (a.rfind("--", 0) != 0) usage_error("unexpected argument '" + a + "'");
      static const char* const kValued[] = {
          "--workload", "--workload-configuration", "--system", "--system-configuration", "--logical-topology",
          "--logical-topology-configuration", "--memory", "--remote-memory-configuration", "--network-configuration",
          "--ranks", "--launch", "--rendezvous", "--bind", "--backend", "--timeout", "--compute-scale", "--compute", "--json",
          "--trace", "--trace-level", "--control-deps", "--num-queues-per-dim", "--comm-scale", "--injection-scale",
          "--logging-configuration", "--logging-folder", "--htsim-proto", "--comm-group-configuration"};
      if (a == "--rendezvous-protocol") {  // ASTRA-sim's boolean, given alone
        o.notes.push_back(ignored_note(a, "true"));
        continue;
      }
      if (std::none_of(std::begin(kValued), std::end(kValued), [&](const char* k) { return a == k; }))
        usage_error("unknown option '" + a + "'");
      if (i + 1 >= argc) usage_error(a + " needs a value");
      value = argv[++i];
    }
    if (flag == "--workload" || flag == "--workload-configuration") o.workload = value;
    else if (flag == "--system" || flag == "--system-configuration") o.system = value;
    else if (flag == "--logical-topology" || flag == "--logical-topology-configuration") o.topology = value;
    else if (flag == "--memory" || flag == "--remote-memory-configuration") o.memory = value;
    else if (flag == "--network-configuration") o.network = value;
    else if (flag == "--comm-group-configuration") o.comm_groups = value == "empty" ? "" : value;  // ASTRA-sim's "none"
    else if (flag == "--control-deps") {
      if (!parse_control_deps(value, &o.control_deps))
        usage_error("--control-deps takes repair, ignore or strict, got '" + value + "'");
    } else if (flag == "--num-queues-per-dim" || flag == "--comm-scale" || flag == "--injection-scale" ||
               flag == "--rendezvous-protocol" || flag == "--logging-configuration" || flag == "--logging-folder" ||
               flag == "--htsim-proto")
      o.notes.push_back(ignored_note(flag, value));
    else if (flag == "--ranks") o.ranks = static_cast<int>(parse_num(flag, value.c_str(), 1, 1024));
    else if (flag == "--launch") {
      if (value != "local" && value != "mpi") usage_error("--launch takes local or mpi");
      o.launch = value;
    } else if (flag == "--rendezvous") o.rendezvous = value;
    else if (flag == "--bind") o.bind = value;
    else if (flag == "--backend") {
      if (value != "tcp" && value != "dpdk" && value != "rdma" && value != "auto")
        usage_error("--backend takes tcp, dpdk, rdma or auto, got '" + value + "'");
      o.backend = value;
    } else if (flag == "--timeout") o.timeout_s = parse_num(flag, value.c_str(), 0.1, 86400);
    else if (flag == "--compute-scale") o.compute_scale = parse_num(flag, value.c_str(), 0, 1e6);
    else if (flag == "--compute") {
      if (value != "timed" && value != "real") usage_error("--compute takes timed or real, got '" + value + "'");
      o.compute_real = value == "real";
    }
    else if (flag == "--json") o.json = value;
    else if (flag == "--trace") o.trace = value;
    else if (flag == "--trace-level") {
      if (value == "node") o.trace_level = TraceLevel::Node;
      else if (value == "event") o.trace_level = TraceLevel::Event;
      else usage_error("--trace-level takes node or event");
    } else usage_error("unknown option '" + flag + "'");
  }
  if (o.workload.empty()) usage_error("--workload PREFIX is required");
  return o;
}

// Everything a rank needs, loaded and checked before any process starts.
struct Experiment {
  SystemConfig system;
  Topology topology;
  std::optional<CommGroups> groups;
  std::vector<Trace> traces;  // by rank (local launch), or this rank's only
  // The system file's custom implementations, as `traces`.
  std::vector<std::map<CollType, Trace>> custom;
  // The run's secret: a rank proves it belongs to the run with it, at the
  // rendezvous and on the data plane. Random for a local launch; under
  // mpirun GENIE_REPLAY_TOKEN, else none (a trusted network).
  std::string token;
};

// 128 random bits from the system's cryptographic source, in hex (the
// rendezvous protocol is lines of words).
std::string random_token() {
  std::string out;
  for (unsigned char b : random_bytes(16)) {
    char hex[3];
    std::snprintf(hex, sizeof hex, "%02x", b);
    out += hex;
  }
  return out;
}

std::string trace_path(const std::string& prefix, int rank) { return cat(prefix, ".", rank, ".et"); }

// The run's topology, and so its rank count: a logical topology file, else
// the network file's npus_count, else one dimension of `given` ranks
// (--ranks or the MPI world size; 0: none). Those given must agree.
Topology topology_for(const Options& o, int given, std::string* network_note = nullptr) {
  if (o.topology.empty() && o.network.empty()) {
    if (!given) usage_error("give --ranks N, a --logical-topology file or a --network-configuration file");
    return Topology{"(one dimension of all ranks)", {given}};
  }
  Topology t = o.topology.empty() ? load_network(o.network) : load_topology(o.topology);
  const std::string what = o.topology.empty() ? cat("network file ", o.network, " (npus_count)")
                                              : cat("logical topology file ", o.topology);
  if (given && t.ranks() != given)
    fail(GENIE_ERR_INVALID_ARGUMENT, what, " has ", t.ranks(), " ranks, the run has ", given,
         " (--ranks or the MPI world size)");
  std::string note;
  if (o.topology.empty()) {
    std::string dims;
    for (int d : t.dims) dims += cat(dims.empty() ? "" : ", ", d);
    note = cat("npus_count gives the ranks per dimension [", dims, "]");
  } else if (!o.network.empty()) {
    // With a logical topology, ASTRA-sim's ns-3 frontend takes a network
    // file of its own format: npus_count, where there is one, must agree.
    std::optional<Topology> net;
    try {
      net = load_network(o.network);
    } catch (const Error&) {
      note = "it has no npus_count; the logical topology gives the ranks";
    }
    if (net && net->ranks() != t.ranks())
      fail(GENIE_ERR_INVALID_ARGUMENT, "network file ", o.network, " has ", net->ranks(), " NPUs (npus_count), ", what,
           " has ", t.ranks());
    if (net) note = "npus_count agrees with the logical topology";
  }
  if (network_note) *network_note = note;
  t.path = what;
  return t;
}

// Reads one rank's trace, repairs what --control-deps allows and checks it.
Trace load_rank_trace(const Options& o, const Experiment& x, const std::string& path, int rank, int size) {
  Trace t = read_trace(path);
  repair_trace(t, o.control_deps);
  validate_trace(t, rank, size);
  check_comm_groups(t, rank, x.groups ? &*x.groups : nullptr);
  // A custom implementation's traces cover every rank of the run.
  if (x.groups && !x.system.custom.empty())
    for (const Node& n : t.nodes)
      if (n.type == NodeType::CommColl && !n.pg_name().empty() &&
          x.system.custom.count(static_cast<CollType>(n.attr_int("comm_type", 0))))
        fail(GENIE_ERR_UNSUPPORTED, path, ": ", n.label(), ": a collective of communicator group '",
             n.pg_name(), "' with the system file's custom implementation, which covers all ranks");
  return t;
}

// The traces of the system file's custom implementations for `rank`.
std::map<CollType, Trace> load_custom(const Options& o, const Experiment& x, int rank, int size) {
  std::map<CollType, Trace> out;
  for (const auto& [type, prefix] : x.system.custom) {
    const std::string path = trace_path(prefix, rank);
    std::string key = cat(coll_type_name(type), "-implementation-custom");
    std::replace(key.begin(), key.end(), '_', '-');
    if (access(path.c_str(), F_OK) != 0)
      fail(GENIE_ERR_INVALID_ARGUMENT, "system file ", x.system.path, ": ", key, " names ", prefix, ", and ", path,
           " is missing (one trace per rank: the run has ", size, ")");
    if (rank == size - 1 && access(trace_path(prefix, size).c_str(), F_OK) == 0)
      fail(GENIE_ERR_INVALID_ARGUMENT, "system file ", x.system.path, ": ", key, " names ", prefix, ", which has a trace ",
           "for rank ", size, " (", trace_path(prefix, size), ") but the run has ", size, " ranks");
    Trace t = load_rank_trace(o, x, path, rank, size);
    validate_custom(t);
    out.emplace(type, std::move(t));
  }
  return out;
}

// Each distinct warning of the traces once, with the first file that has
// it and how many others do.
void print_warnings(const std::vector<const Trace*>& traces) {
  std::vector<std::pair<std::string, std::vector<const Trace*>>> seen;
  for (const Trace* t : traces)
    for (const std::string& w : t->warnings) {
      auto it = std::find_if(seen.begin(), seen.end(), [&](const auto& s) { return s.first == w; });
      if (it == seen.end()) seen.emplace_back(w, std::vector<const Trace*>{t});
      else it->second.push_back(t);
    }
  for (const auto& [w, ts] : seen)
    std::fprintf(stderr, "genie replay: warning: %s: %s%s\n", ts.front()->path.c_str(), w.c_str(),
                 ts.size() > 1 ? cat(" (the same in ", ts.size() - 1, " other file", ts.size() > 2 ? "s" : "", ")").c_str()
                               : "");
}

void print_notes(const Options& o, const std::string& network_note) {
  for (const std::string& n : o.notes) std::fprintf(stderr, "genie replay: note: %s\n", n.c_str());
  if (!o.network.empty())
    std::fprintf(stderr, "genie replay: note: --network-configuration %s: %s; the rest models the simulated network, "
                 "which the real data plane replaces\n", o.network.c_str(), network_note.c_str());
}

// The error for messages that arrived at `rank` and that no receive took,
// or "" when there are none.
std::string unclaimed_error(const std::vector<Fabric::Unclaimed>& left, int rank) {
  if (left.empty()) return {};
  std::string out = cat("GENIE_ERR_PROTOCOL: ", left.size(), " unmatched send", left.size() > 1 ? "s" : "", ": ");
  constexpr size_t kShown = 4;
  for (size_t n = 0; n < left.size() && n < kShown; ++n) {
    const Fabric::Unclaimed& u = left[n];
    out += cat(n ? "; " : "", "rank ", u.src, " sent rank ", rank, " ", u.len, " bytes under ", describe_key(u.key),
               u.label.empty() ? std::string() : cat(" (", u.label, ")"), " and no receive took them");
  }
  if (left.size() > kShown) out += cat("; and ", left.size() - kShown, " more");
  return out;
}

// `prepare` runs first, before the rank's transport starts.
int rank_main(const Options& o, const Experiment& x, const Trace& trace, const std::map<CollType, Trace>& custom,
              int rank, int size, const std::string& rdv, bool progress, const std::function<void()>& prepare = {}) {
  std::unique_ptr<RendezvousClient> rc;
  bool started = false;
  try {
    if (prepare) prepare();
    const std::string transport = resolve_backend(o.backend, o.launch != "mpi", nullptr);
    const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(o.timeout_s * 1000));
    Fabric fabric(transport, rank, size, o.bind, timeout, x.token);
    rc = std::make_unique<RendezvousClient>(rdv, std::max(timeout, std::chrono::milliseconds(10000)));
    const auto addrs = rc->hello(rank, size, transport, fabric.address(), x.token);
    fabric.connect_all(addrs);
    // Test hook: this rank flips one byte of its first data message.
    if (const char* c = std::getenv("GENIE_REPLAY_TEST_CORRUPT"); c && std::atoi(c) == rank)
      fabric.corrupt_next_send([](int, uint64_t) { return true; });
    // Started (and its rate measured) before the common clock starts.
    std::unique_ptr<RealCompute> real;
    if (o.compute_real) real = std::make_unique<RealCompute>();
    const CollContext ctx{x.groups ? &*x.groups : nullptr, &custom};
    const uint64_t prewarmed = prewarm_buffers(trace, x.system, x.topology, rank, ctx);
    const uint64_t allocated = Pool::get().fresh_bytes(Pool::kCollective);
    rc->ready();
    started = true;
    Timeline timeline(o.trace.empty() ? TraceLevel::Off : o.trace_level);
    timeline.start();
    RunEnv env{fabric, x.system, x.topology, timeline, 0, nullptr};
    RankReport rep = execute(trace, env, ExecOptions{o.compute_scale, progress, real.get(), ctx});
    rep.buffers_prewarmed = prewarmed;
    rep.buffers_allocated = Pool::get().fresh_bytes(Pool::kCollective) - allocated;
    rep.huge_page_bytes = huge_page_bytes();
    // Every rank, failed or not, tells its peers it is done; one that
    // finished then learns whether a message for it was never received.
    fabric.send_end(!rep.error.empty());
    if (rep.error.empty()) rep.error = unclaimed_error(fabric.drain(), rank);
    rc->report(report_to_json(rep));
    return rep.error.empty() ? kExitOk : kExitFailure;
  } catch (const std::exception& ex) {
    // Every failure ends here: a forked rank must never unwind into the
    // launcher's code.
    const auto* e = dynamic_cast<const Error*>(&ex);
    const std::string msg = e ? cat(genie_status_str(e->code()), ": ", e->detail()) : cat("GENIE_ERR_INTERNAL: ", ex.what());
    // Under mpirun a rank's own terminal is the one place its failure
    // shows on its host; rank 0 prints the run's outcome.
    if (o.launch == "mpi" && rank != 0)
      std::fprintf(stderr, "genie replay: rank %d: %s\n", rank, msg.c_str());
    try {
      if (rc && started) {
        RankReport rep;
        rep.rank = rank;
        rep.error = msg;
        rc->report(report_to_json(rep));
        return kExitFailure;
      }
      if (rc) {
        rc->error(cat("rank ", rank, ": ", msg));
        return kExitFailure;
      }
    } catch (const std::exception&) {
      // The launcher is gone: say it here instead.
    }
    if (o.launch != "mpi" || rank == 0)
      std::fprintf(stderr, "genie replay: rank %d: %s\n", rank, msg.c_str());
    return kExitFailure;
  }
}

// The transport plugins are installed beside this program. The registry
// looks beside the object it is linked into, which for a statically linked
// program is named by argv[0] (no directory when started through `genie
// replay` or PATH), so the program's real directory is added to
// GENIE_TRANSPORT_PATH, after any the user set.
void add_plugin_dir() {
  char exe[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return;
  std::string dir(exe, static_cast<size_t>(n));
  dir = dir.substr(0, dir.rfind('/'));
  const char* cur = std::getenv("GENIE_TRANSPORT_PATH");
  const std::string path = cur && *cur ? cat(cur, ":", dir) : dir;
  setenv("GENIE_TRANSPORT_PATH", path.c_str(), 1);
}

// Prints the outcome; returns the exit status.
int finish(const Options& o, const std::vector<std::string>& results, const std::string& transport, double wall_s) {
  std::vector<RankReport> reports;
  std::vector<std::string> failures;
  std::vector<int> deadlocked;
  for (size_t r = 0; r < results.size(); ++r) {
    if (results[r].rfind("error: ", 0) == 0) {
      failures.push_back(results[r].substr(7));
      RankReport rep;
      rep.rank = static_cast<int>(r);
      rep.error = failures.back();
      reports.push_back(rep);
      continue;
    }
    reports.push_back(report_from_json(results[r]));
    if (!reports.back().error.empty()) {
      const std::string& e = reports.back().error;
      failures.push_back(cat("rank ", r, ": ", e));
      if (e.find("deadlock") != std::string::npos) deadlocked.push_back(static_cast<int>(r));
    }
  }
  RunInfo info{o.workload, transport, static_cast<int>(results.size()), wall_s};
  const uint64_t wrong = print_reports(stdout, reports, info);
  std::fflush(stdout);
  if (!o.json.empty()) {
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(o.json.c_str(), "w"), &std::fclose);
    const std::string s = summary_json(reports, info);
    if (!f || std::fwrite(s.data(), 1, s.size(), f.get()) != s.size())
      fail(GENIE_ERR_IO, "--json ", o.json, ": ", std::strerror(errno));
  }
  if (!o.trace.empty()) {
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(o.trace.c_str(), "w"), &std::fclose);
    const std::string s = chrome_trace(reports);
    if (!f || std::fwrite(s.data(), 1, s.size(), f.get()) != s.size())
      fail(GENIE_ERR_IO, "--trace ", o.trace, ": ", std::strerror(errno));
  }
  if (!deadlocked.empty()) {
    std::string list;
    for (int r : deadlocked) list += cat(list.empty() ? "" : ", ", r);
    std::fprintf(stderr, "genie replay: deadlock: rank%s %s waited for data that never came\n",
                 deadlocked.size() > 1 ? "s" : "", list.c_str());
  }
  for (const auto& f : failures) std::fprintf(stderr, "genie replay: %s\n", f.c_str());
  if (wrong > 0) std::fprintf(stderr, "genie replay: %llu wrong elements received\n", static_cast<unsigned long long>(wrong));
  return failures.empty() && wrong == 0 ? kExitOk : kExitFailure;
}

int run_local(const Options& o) {
  Experiment x;
  std::string network_note;
  x.topology = topology_for(o, o.ranks, &network_note);
  const int ranks = x.topology.ranks();
  print_notes(o, network_note);
  if (!o.system.empty()) x.system = load_system(o.system);
  if (!o.comm_groups.empty()) x.groups = load_comm_groups(o.comm_groups, ranks);
  if (!o.memory.empty()) load_memory(o.memory);
  for (int r = 0; r < ranks; ++r) {
    if (r > 0 && access(trace_path(o.workload, r).c_str(), F_OK) != 0)
      fail(GENIE_ERR_INVALID_ARGUMENT, "the run has ", ranks, " ranks (", o.ranks ? "--ranks" : x.topology.path,
           ") but the workload has files for ranks 0..", r - 1, " only: ", trace_path(o.workload, r), " is missing");
    x.traces.push_back(load_rank_trace(o, x, trace_path(o.workload, r), r, ranks));
    x.custom.push_back(load_custom(o, x, r, ranks));
  }
  std::vector<const Trace*> all;
  for (const Trace& t : x.traces) all.push_back(&t);
  for (const auto& m : x.custom)
    for (const auto& [type, t] : m) all.push_back(&t);
  print_warnings(all);
  if (FILE* extra = std::fopen(trace_path(o.workload, ranks).c_str(), "rb")) {
    std::fclose(extra);
    fail(GENIE_ERR_INVALID_ARGUMENT, "the workload has a file for rank ", ranks, " (", trace_path(o.workload, ranks),
         ") but the run has ", ranks, " ranks: give --ranks or a topology that matches the workload");
  }
  x.token = random_token();
  // How long the ranks may take to gather (and rank 1 of a memif pair to
  // find rank 0's socket).
  const auto gather = std::chrono::milliseconds(static_cast<int64_t>(std::max(o.timeout_s, 10.0) * 1000));
  const LocalDpdk dpdk(o.backend, ranks, x.token, gather);
  RendezvousServer server("127.0.0.1", 0);
  const bool progress = !o.quiet && isatty(STDERR_FILENO);
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<pid_t> pids;
  // Forked before any thread starts (the ranks inherit the loaded traces).
  for (int r = 0; r < ranks; ++r) {
    const pid_t pid = fork();
    if (pid < 0) fail(GENIE_ERR_IO, "fork: ", std::strerror(errno));
    if (pid == 0) {
      const int rc = rank_main(o, x, x.traces[r], x.custom[r], r, ranks, server.address(), progress && r == 0,
                               [&] { dpdk.enter(r); });
      std::fflush(stdout);
      std::fflush(stderr);
#ifdef __SANITIZE_ADDRESS__
      __lsan_do_leak_check();  // _exit skips the one at exit
#endif
      _exit(rc);
    }
    pids.push_back(pid);
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::string> results;
  std::string err;
  // A rank whose process is gone before the run starts (it printed why)
  // ends the rendezvous at once.
  std::vector<int> statuses(ranks, 0);
  std::vector<bool> reaped(ranks, false);
  auto lost = [&]() -> std::string {
    for (int r = 0; r < ranks; ++r) {
      int st = 0;
      if (reaped[r] || waitpid(pids[r], &st, WNOHANG) != pids[r]) continue;
      reaped[r] = true;
      statuses[r] = st;
      return cat("rank ", r, " exited before the run started (",
                 WIFSIGNALED(st) ? cat("signal ", WTERMSIG(st)) : cat("status ", WEXITSTATUS(st)), ")");
    }
    return {};
  };
  try {
    results = server.serve(ranks, gather, x.token, lost);
  } catch (const Error& e) {
    err = e.detail();
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // A rank that reported and then crashed or failed on its way out (a
  // sanitizer's leak report, say) fails the run too.
  std::vector<std::string> exits;
  for (size_t r = 0; r < pids.size(); ++r) {
    int st = statuses[r];
    if (!reaped[r]) {
      if (!err.empty()) kill(pids[r], SIGTERM);
      waitpid(pids[r], &st, 0);
    }
    bool reported_ok = false;
    try {
      reported_ok = r < results.size() && results[r].rfind("error: ", 0) != 0 &&
                    report_from_json(results[r]).error.empty();
    } catch (const Error&) {
    }
    if (WIFSIGNALED(st))
      exits.push_back(cat("rank ", r, " was killed by signal ", WTERMSIG(st)));
    else if (reported_ok && WEXITSTATUS(st) != 0)
      exits.push_back(cat("rank ", r, " reported success but exited with status ", WEXITSTATUS(st)));
  }
  if (!err.empty()) fail(GENIE_ERR_INVALID_ARGUMENT, err);
  int rc = finish(o, results, resolve_backend(o.backend, o.launch != "mpi", nullptr), wall);
  for (const auto& e : exits) std::fprintf(stderr, "genie replay: %s\n", e.c_str());
  return exits.empty() ? rc : kExitFailure;
}

int env_int(std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (const char* v = std::getenv(n)) return std::atoi(v);
  return -1;
}

int run_mpi(const Options& o) {
  const int rank = env_int({"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"});
  const int size = env_int({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"});
  if (rank < 0 || size < 1 || rank >= size)
    fail(GENIE_ERR_INVALID_ARGUMENT, "--launch mpi: not started by mpirun (no OMPI_COMM_WORLD_RANK/SIZE)");
  if (o.ranks && o.ranks != size)
    fail(GENIE_ERR_INVALID_ARGUMENT, "--ranks ", o.ranks, " but mpirun started ", size, " ranks");
  std::string rdv = o.rendezvous;
  if (rdv.empty()) rdv = std::getenv("GENIE_REPLAY_RENDEZVOUS") ? std::getenv("GENIE_REPLAY_RENDEZVOUS") : "127.0.0.1:29517";
  Experiment x;
  if (const char* t = std::getenv("GENIE_REPLAY_TOKEN")) x.token = t;
  std::string network_note;
  x.topology = topology_for(o, size, &network_note);
  if (rank == 0) print_notes(o, network_note);
  if (!o.system.empty()) x.system = load_system(o.system);
  if (!o.comm_groups.empty()) x.groups = load_comm_groups(o.comm_groups, size);
  if (!o.memory.empty()) load_memory(o.memory);
  Trace trace = load_rank_trace(o, x, trace_path(o.workload, rank), rank, size);
  const std::map<CollType, Trace> custom = load_custom(o, x, rank, size);
  std::vector<const Trace*> mine{&trace};
  for (const auto& [type, t] : custom) mine.push_back(&t);
  print_warnings(mine);
  if (rank != 0) return rank_main(o, x, trace, custom, rank, size, rdv, false);
  std::string host;
  int port = 0;
  dataplane::split_address(rdv, &host, &port);
  RendezvousServer server(host, port);
  std::vector<std::string> results;
  std::string err;
  const auto t0 = std::chrono::steady_clock::now();
  std::thread serving([&] {
    try {
      results = server.serve(
          size, std::chrono::milliseconds(static_cast<int64_t>(std::max(o.timeout_s, 10.0) * 1000)), x.token);
    } catch (const Error& e) {
      err = e.detail();
    }
  });
  rank_main(o, x, trace, custom, rank, size, server.address(), !o.quiet && isatty(STDERR_FILENO));
  serving.join();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!err.empty()) fail(GENIE_ERR_INVALID_ARGUMENT, err);
  return finish(o, results, resolve_backend(o.backend, o.launch != "mpi", nullptr), wall);
}

}  // namespace
}  // namespace genie::replay

int main(int argc, char** argv) {
  using namespace genie::replay;
  const Options o = parse(argc, argv);
  add_plugin_dir();
  try {
    return o.launch == "mpi" ? run_mpi(o) : run_local(o);
  } catch (const genie::Error& e) {
    std::fprintf(stderr, "genie replay: %s: %s\n", genie_status_str(e.code()), e.detail().c_str());
    return kExitFailure;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "genie replay: %s\n", e.what());
    return kExitFailure;
  }
}
