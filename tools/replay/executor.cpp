#include "executor.hpp"

#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <queue>
#include <set>
#include <system_error>
#include <thread>
#include <tuple>
#include <unordered_map>

#include "buffer_pool.hpp"
#include "compute.hpp"
#include "core/error.hpp"

namespace genie::replay {

namespace {

std::string where(const Trace& t, const Node& n) { return cat(t.path, ": ", n.label()); }

int64_t need_int(const Trace& t, const Node& n, const char* key) {
  auto it = n.attrs.find(key);
  if (it == n.attrs.end() || !it->second.has_int)
    fail(GENIE_ERR_PARSE, where(t, n), ": ", node_type_name(n.type), " without the integer attribute ", key);
  return it->second.i;
}

// A collective's communicator group: its pg_name, where a file of groups
// was given ("" otherwise: all ranks).
std::string group_of(const Node& node, const CollContext& ctx) {
  return ctx.groups ? node.pg_name() : std::string();
}

// The collective a COMM_COLL_NODE runs, `seq`-th in issue order on its
// communicator.
CollSpec coll_spec(const Trace& t, const Node& node, uint32_t seq, const Topology& topo, const CollContext& ctx) {
  CollSpec spec;
  spec.type = static_cast<CollType>(node.attr_int("comm_type", 0));
  spec.bytes = static_cast<uint64_t>(node.attr_int("comm_size", 0));
  spec.seq = seq;
  spec.name = node.name;
  spec.comm_name = group_of(node, ctx);
  if (!spec.comm_name.empty()) {
    spec.comm = ctx.groups->index(spec.comm_name);
    spec.members = ctx.groups->groups.at(spec.comm_name);
  }
  if (ctx.custom)
    if (auto it = ctx.custom->find(spec.type); it != ctx.custom->end()) spec.custom = &it->second;
  if (auto it = node.attrs.find("involved_dim"); it != node.attrs.end()) {
    if (it->second.list.size() > topo.dims.size())
      fail(GENIE_ERR_INVALID_ARGUMENT, where(t, node), ": involved_dim names ", it->second.list.size(),
           " dimensions, the topology (", topo.path, ") has ", topo.dims.size());
    for (int64_t v : it->second.list) spec.involved.push_back(v != 0);
  }
  return spec;
}

// Positions of each node's dependencies (data and control), deduplicated.
std::vector<std::vector<size_t>> dependencies(const Trace& t) {
  std::unordered_map<uint64_t, size_t> pos;
  for (size_t i = 0; i < t.nodes.size(); ++i)
    if (!pos.emplace(t.nodes[i].id, i).second)
      fail(GENIE_ERR_PARSE, where(t, t.nodes[i]), ": a second node with id ", t.nodes[i].id);
  std::vector<std::vector<size_t>> deps(t.nodes.size());
  for (size_t i = 0; i < t.nodes.size(); ++i) {
    const Node& n = t.nodes[i];
    std::set<size_t> s;
    for (const auto* list : {&n.data_deps, &n.ctrl_deps})
      for (uint64_t d : *list) {
        auto it = pos.find(d);
        if (it == pos.end()) fail(GENIE_ERR_PARSE, where(t, n), ": depends on node ", d, ", which the file does not have");
        if (it->second == i) fail(GENIE_ERR_PARSE, where(t, n), ": depends on itself");
        s.insert(it->second);
      }
    deps[i].assign(s.begin(), s.end());
  }
  return deps;
}

}  // namespace

void validate_trace(const Trace& t, int rank, int size) {
  for (const Node& n : t.nodes) {
    const int type = static_cast<int>(n.type);
    if (type < 1 || type > 7)
      fail(GENIE_ERR_PARSE, where(t, n), ": unknown node type ", type, " (Chakra knows 1..7: METADATA, MEM_LOAD, ",
           "MEM_STORE, COMP, COMM_SEND, COMM_RECV, COMM_COLL)");
    if (n.type == NodeType::CommColl) {
      const int64_t ct = need_int(t, n, "comm_type");
      if (ct < 0 || ct > 9)
        fail(GENIE_ERR_PARSE, where(t, n), ": unknown collective comm_type ", ct, " (0..9: ALL_REDUCE .. BARRIER)");
      if (n.attr_int("comm_size", 0) < 0) fail(GENIE_ERR_PARSE, where(t, n), ": negative comm_size");
      if (static_cast<CollType>(ct) != CollType::Barrier && !n.has_attr("comm_size"))
        fail(GENIE_ERR_PARSE, where(t, n), ": collective without comm_size");
    }
    if (n.type == NodeType::CommSend || n.type == NodeType::CommRecv) {
      const char* key = n.type == NodeType::CommSend ? "comm_dst" : "comm_src";
      const int64_t peer = need_int(t, n, key);
      if (peer < 0 || peer >= size)
        fail(GENIE_ERR_INVALID_ARGUMENT, where(t, n), ": ", key, " ", peer, " is not a rank of this run (0..", size - 1,
             ")");
      if (n.attr_int("comm_size", 0) < 0) fail(GENIE_ERR_PARSE, where(t, n), ": negative comm_size");
    }
  }
  // Every dependency exists, and they form no cycle (Kahn's algorithm).
  const auto deps = dependencies(t);
  std::vector<size_t> indeg(t.nodes.size());
  std::vector<std::vector<size_t>> users(t.nodes.size());
  for (size_t i = 0; i < deps.size(); ++i)
    for (size_t d : deps[i]) {
      ++indeg[i];
      users[d].push_back(i);
    }
  std::vector<size_t> ready;
  for (size_t i = 0; i < indeg.size(); ++i)
    if (!indeg[i]) ready.push_back(i);
  size_t seen = 0;
  while (!ready.empty()) {
    const size_t i = ready.back();
    ready.pop_back();
    ++seen;
    for (size_t u : users[i])
      if (--indeg[u] == 0) ready.push_back(u);
  }
  if (seen != t.nodes.size())
    for (size_t i = 0; i < indeg.size(); ++i)
      if (indeg[i]) fail(GENIE_ERR_PARSE, where(t, t.nodes[i]), ": is part of a dependency cycle");
  (void)rank;
}

void check_comm_groups(Trace& t, int rank, const CommGroups* groups) {
  size_t named = 0;
  std::string first;
  for (const Node& n : t.nodes) {
    if (n.type != NodeType::CommColl) continue;
    const std::string id = n.pg_name();
    if (id.empty()) continue;
    if (!groups) {
      if (named++ == 0) first = cat(n.label(), " names '", id, "'");
      continue;
    }
    auto g = groups->groups.find(id);
    if (g == groups->groups.end()) {
      std::string ids;
      for (const auto& [k, v] : groups->groups) ids += cat(ids.empty() ? "" : ", ", "'", k, "'");
      fail(GENIE_ERR_INVALID_ARGUMENT, where(t, n), ": pg_name '", id, "' is not a group of ", groups->path, " (",
           ids, ")");
    }
    if (std::find(g->second.begin(), g->second.end(), rank) == g->second.end())
      fail(GENIE_ERR_INVALID_ARGUMENT, where(t, n), ": pg_name '", id, "': rank ", rank, " is not in that group of ",
           groups->path);
  }
  if (named)
    t.warnings.push_back(cat(named, " collective", named > 1 ? "s name" : " names", " a communicator group (pg_name; ",
                             "the first: ", first, ") and there is no --comm-group-configuration: ",
                             named > 1 ? "they run" : "it runs", " over all ranks"));
}

void validate_custom(const Trace& t) {
  std::map<std::tuple<int, int64_t, int64_t>, uint32_t> seen;
  for (const Node& n : t.nodes) {
    if (n.type == NodeType::CommColl)
      fail(GENIE_ERR_PARSE, where(t, n), ": a custom collective implementation holds a collective node (only sends, ",
           "receives, compute and memory nodes)");
    if (n.type != NodeType::CommSend && n.type != NodeType::CommRecv) continue;
    const bool send = n.type == NodeType::CommSend;
    const int64_t tag = n.attr_int("comm_tag", 0);
    if (tag < 0 || tag >= kCustomTags)
      fail(GENIE_ERR_UNSUPPORTED, where(t, n), ": comm_tag ", tag, " (a custom implementation's tags are 0..",
           kCustomTags - 1, ")");
    if (++seen[{send ? 0 : 1, n.attr_int(send ? "comm_dst" : "comm_src", 0), tag}] > kCustomRepeats)
      fail(GENIE_ERR_UNSUPPORTED, where(t, n), ": more than ", kCustomRepeats, " messages with tag ", tag,
           " to one peer in one custom collective");
  }
}

uint64_t prewarm_buffers(const Trace& t, const SystemConfig& sys, const Topology& topo, int rank,
                         const CollContext& ctx) {
  // Per size, as many buffers as the collective that needs the most of
  // them: collectives one after another reuse them.
  std::map<uint64_t, size_t> need;
  uint32_t seq = 0;
  for (const Node& node : t.nodes) {
    if (node.type != NodeType::CommColl) continue;
    std::map<uint64_t, size_t> mine;
    for (uint64_t b : collective_buffers(sys, topo, rank, coll_spec(t, node, seq++, topo, ctx))) ++mine[b];
    for (const auto& [b, n] : mine) need[b] = std::max(need[b], n);
  }
  uint64_t added = 0;
  for (const auto& [b, n] : need) added += Pool::get().reserve(b, n);
  return added;
}

RankReport execute(const Trace& t, RunEnv& env, const ExecOptions& opts) {
  const int rank = env.fabric.rank();
  const auto deps = dependencies(t);
  const size_t n = t.nodes.size();
  std::vector<size_t> indeg(n);
  std::vector<std::vector<size_t>> users(n);
  for (size_t i = 0; i < n; ++i)
    for (size_t d : deps[i]) {
      ++indeg[i];
      users[d].push_back(i);
    }
  // Issue order: collectives by file order (seq: among all of this rank's,
  // comm_seq: among those of its communicator, which match across ranks);
  // sends and receives by the order of equal (peer, tag) pairs.
  std::vector<uint32_t> seq(n), comm_seq(n), occurrence(n);
  uint32_t colls = 0;
  std::map<std::string, uint32_t> per_comm;
  std::map<std::tuple<int, int64_t, int64_t>, uint32_t> seen;
  for (size_t i = 0; i < n; ++i) {
    const Node& node = t.nodes[i];
    if (node.type == NodeType::CommColl) {
      seq[i] = colls++;
      comm_seq[i] = per_comm[group_of(node, opts.colls)]++;
    }
    if (node.type == NodeType::CommSend)
      occurrence[i] = seen[{0, node.attr_int("comm_dst", 0), node.attr_int("comm_tag", 0)}]++;
    if (node.type == NodeType::CommRecv)
      occurrence[i] = seen[{1, node.attr_int("comm_src", 0), node.attr_int("comm_tag", 0)}]++;
  }

  RankReport rep;
  rep.rank = rank;
  rep.colls.resize(colls);
  const bool ev_node = env.timeline.level() != TraceLevel::Off;

  // Nodes run on worker threads: one per node in flight, since a node may
  // block (a wait for bytes, a timed compute), kept for later nodes. The
  // thread that finishes a node runs the next one that may start itself,
  // so that a chain (a barrier, then a collective, then a barrier) runs on
  // one thread with no other thread to wake in between; only nodes that
  // start beside it go to an idle worker or a new one. Everything below is
  // guarded by mu.
  std::mutex mu;
  std::condition_variable idle_cv;  // idle workers wait for a hand-off
  std::condition_variable end_cv;   // the calling thread waits for the end
  std::vector<std::string> errors;  // the first real failure first
  bool cancelled_only = true;
  std::vector<bool> lanes;
  std::deque<std::pair<size_t, int>> handed;  // (node, lane) for idle workers
  int idle = 0;
  bool stopping = false;
  std::vector<std::thread> workers;
  size_t done = 0, running = 0;

  constexpr size_t kNone = SIZE_MAX;
  size_t issuing = kNone;  // the collective whose first transfer is not posted yet
  std::function<void()> dispatch;
  auto issued = [&](size_t i) {
    std::lock_guard<std::mutex> g(mu);
    if (issuing == i) {
      issuing = kNone;
      dispatch();
    }
  };
  auto run_node = [&](size_t i, int lane) {
    const Node& node = t.nodes[i];
    const int64_t t0 = env.timeline.now_ns();
    bool comm = false;
    RunEnv local{env.fabric, env.system, env.topology, env.timeline, lane, [&issued, i] { issued(i); }};
    switch (node.type) {
      case NodeType::Comp:
      case NodeType::MemLoad:
      case NodeType::MemStore: {
        const double micros = node.duration_micros * opts.compute_scale;
        if (opts.real && node.type == NodeType::Comp) {
          if (const int64_t side = opts.real->side_for(node.attr_int("num_ops", 0), micros); side > 0) {
            opts.real->run(side);
            std::lock_guard<std::mutex> lk(mu);
            rep.compute_flops += 2.0 * static_cast<double>(side) * static_cast<double>(side) * static_cast<double>(side);
          }
        } else if (const auto d = std::chrono::nanoseconds(static_cast<int64_t>(micros * 1000.0)); d.count() > 0) {
          std::this_thread::sleep_for(d);
        }
        env.timeline.interval(false, t0, env.timeline.now_ns());
        break;
      }
      case NodeType::CommSend:
      case NodeType::CommRecv: {
        comm = true;
        const bool send = node.type == NodeType::CommSend;
        const int peer = static_cast<int>(node.attr_int(send ? "comm_dst" : "comm_src", 0));
        const uint32_t tag = static_cast<uint32_t>(node.attr_int("comm_tag", 0));
        const uint64_t bytes = static_cast<uint64_t>(node.attr_int("comm_size", 0));
        std::vector<uint32_t> buf((bytes + 3) / 4);
        if (send) fill_p2p(buf, rank, tag, occurrence[i]);
        const uint64_t key = p2p_key(tag, occurrence[i]);
        auto op = send ? env.fabric.isend(peer, key, buf.data(), buf.size() * 4, cat(t.path, ": ", node.label()))
                       : env.fabric.irecv(peer, key, buf.data(), buf.size() * 4);
        env.fabric.wait(op, [&] {
          return cat(send ? "a send to rank " : "a receive from rank ", peer, " tag ", tag, " (", t.path, ": ",
                     node.label(), ")");
        });
        const uint64_t wrong = send ? 0 : check_p2p(buf, peer, tag, occurrence[i]);
        std::lock_guard<std::mutex> lk(mu);
        rep.wrong += wrong;
        rep.p2p_messages += 1;
        rep.p2p_bytes += bytes;
        break;
      }
      case NodeType::CommColl: {
        comm = true;
        const CollSpec spec = coll_spec(t, node, comm_seq[i], env.topology, opts.colls);
        CollResult r;
        try {
          r = run_collective(local, spec);
        } catch (const Error& e) {
          fail(e.code(), e.detail(), " [", t.path, ": ", node.label(), "]");
        }
        std::lock_guard<std::mutex> lk(mu);
        CollRecord& rec = rep.colls[seq[i]];
        rec = CollRecord{seq[i], node.name, spec.type, spec.bytes, r.group, r.comm_ns, r.wrong, r.elements,
                         spec.comm_name, comm_seq[i]};
        rep.wrong += r.wrong;
        break;
      }
      default: break;  // metadata
    }
    const int64_t t1 = env.timeline.now_ns();
    if (comm) env.timeline.interval(true, t0, t1);
    if (ev_node) env.timeline.add(TraceEvent{node.name.empty() ? node.label() : node.name, comm ? "comm" : "comp", t0, t1 - t0, lane});
  };

  // Ready nodes: collectives apart, issued one at a time in the system
  // file's scheduling policy among those ready (FIFO: the first in issue
  // order, LIFO: the last), each once the previous one has posted its
  // first transfer; other nodes start at once, in file order.
  std::priority_queue<size_t, std::vector<size_t>, std::greater<size_t>> ready;
  std::set<size_t> ready_colls;
  const bool lifo = env.system.scheduling_policy == "LIFO";
  auto make_ready = [&](size_t i) {
    if (t.nodes[i].type == NodeType::CommColl) ready_colls.insert(i);
    else ready.push(i);
  };
  for (size_t i = 0; i < n; ++i)
    if (!indeg[i]) make_ready(i);
  constexpr size_t kMaxInFlight = 256;

  // The next node that may start, with a lane of the trace for it.
  auto take = [&](size_t& i, int& lane) {
    if (!errors.empty() || running >= kMaxInFlight) return false;
    if (!ready.empty()) {
      i = ready.top();
      ready.pop();
    } else if (!ready_colls.empty() && issuing == kNone) {
      auto it = lifo ? std::prev(ready_colls.end()) : ready_colls.begin();
      i = *it;
      ready_colls.erase(it);
      issuing = i;
      rep.issue_order.push_back(seq[i]);
    } else {
      return false;
    }
    lane = 0;
    while (lane < static_cast<int>(lanes.size()) && lanes[lane]) ++lane;
    if (lane == static_cast<int>(lanes.size())) lanes.push_back(false);
    lanes[lane] = true;
    ++running;
    return true;
  };
  // A failure stops the run: nothing more starts.
  auto record = [&](const std::string& err, bool cancelled) {
    if (!cancelled && cancelled_only) {
      errors.insert(errors.begin(), err);
      cancelled_only = false;
    } else {
      errors.push_back(err);
    }
  };
  // A node's end: its successors become ready.
  auto finish = [&](size_t i, int lane, const std::string& err, bool cancelled) {
    if (!err.empty()) record(err, cancelled);
    lanes[lane] = false;
    --running;
    ++done;
    if (issuing == i) issuing = kNone;  // a collective with nothing to post
    if (errors.empty())
      for (size_t u : users[i])
        if (--indeg[u] == 0) make_ready(u);
  };
  // A worker's life: node i, then whatever it takes or is handed.
  auto work = [&](size_t i, int lane) {
    for (;;) {
      std::string err;
      bool cancelled = false;
      try {
        run_node(i, lane);
      } catch (const Error& e) {
        err = cat(genie_status_str(e.code()), ": ", e.detail());
        cancelled = e.code() == GENIE_ERR_CANCELLED;
        if (err.find(t.path) == std::string::npos) err += cat(" [", t.path, ": ", t.nodes[i].label(), "]");
      } catch (const std::exception& e) {
        err = cat("GENIE_ERR_INTERNAL: ", e.what(), " [", t.path, ": ", t.nodes[i].label(), "]");
      }
      if (!err.empty()) env.fabric.abort(cat("rank ", rank, " stopped: ", err));
      std::unique_lock<std::mutex> lk(mu);
      finish(i, lane, err, cancelled);
      const bool next = take(i, lane);
      dispatch();
      // The calling thread waits for the end only: a chain's nodes, each
      // taken by the thread that finished the one before, never wake it.
      if (done == n || running == 0) end_cv.notify_all();
      if (next) continue;
      ++idle;
      idle_cv.wait(lk, [&] { return stopping || !handed.empty(); });
      --idle;
      if (handed.empty()) return;
      std::tie(i, lane) = handed.front();
      handed.pop_front();
    }
  };
  // Gives every node that may start a thread: an idle worker's, else a new one.
  dispatch = [&] {
    size_t i;
    int lane;
    while (take(i, lane)) {
      if (idle > static_cast<int>(handed.size())) {
        handed.emplace_back(i, lane);
        idle_cv.notify_one();
        continue;
      }
      try {
        workers.emplace_back(work, i, lane);
      } catch (const std::system_error& e) {
        const std::string err = cat("GENIE_ERR_INTERNAL: no thread for the node (", e.what(), ") [", t.path,
                                    ": ", t.nodes[i].label(), "]");
        env.fabric.abort(cat("rank ", rank, " stopped: ", err));
        record(err, false);
        lanes[lane] = false;
        if (--running == 0) end_cv.notify_all();
      }
    }
  };

  const bool tty = opts.progress && isatty(STDERR_FILENO);
  {
    std::unique_lock<std::mutex> lk(mu);
    dispatch();
    // Until every node is done, or a failure left nothing running.
    while (done < n && running > 0) {
      end_cv.wait_for(lk, std::chrono::milliseconds(tty ? 500 : 60000));
      if (tty) {
        std::fprintf(stderr, "\rgenie replay: rank %d: %zu/%zu nodes, %.1f s ", rank, done, n,
                     env.timeline.now_ns() / 1e9);
        std::fflush(stderr);
      }
    }
    stopping = true;
    idle_cv.notify_all();
  }
  for (auto& w : workers) w.join();
  rep.node_threads = workers.size();
  if (tty) std::fprintf(stderr, "\n");
  rep.nodes = done;
  rep.finished_ns = env.timeline.now_ns();
  rep.exposed_comm_ns = env.timeline.exposed_comm_ns();
  rep.bytes_sent = env.fabric.bytes_sent();
  rep.bytes_staged = env.fabric.bytes_staged();
  rep.events = env.timeline.take_events();
  if (!errors.empty()) rep.error = errors.front();
  return rep;
}

}  // namespace genie::replay
