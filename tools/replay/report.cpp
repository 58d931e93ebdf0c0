#include "report.hpp"

#include <cjson/cJSON.h>

#include <algorithm>
#include <map>
#include <memory>
#include <tuple>

#include "core/error.hpp"
#include "core/trace.hpp"

namespace genie::replay {

namespace {

using JsonPtr = std::unique_ptr<cJSON, void (*)(cJSON*)>;

JsonPtr obj() { return JsonPtr(cJSON_CreateObject(), &cJSON_Delete); }

std::string print(const JsonPtr& j) {
  std::unique_ptr<char, void (*)(void*)> s(cJSON_PrintUnformatted(j.get()), &cJSON_free);
  if (!s) fail(GENIE_ERR_OUT_OF_MEMORY, "cannot print JSON");
  return s.get();
}

double num(const cJSON* o, const char* key) {
  const cJSON* v = cJSON_GetObjectItemCaseSensitive(o, key);
  if (!cJSON_IsNumber(v)) fail(GENIE_ERR_PROTOCOL, "rank report: no number '", key, "'");
  return v->valuedouble;
}
std::string str(const cJSON* o, const char* key) {
  const cJSON* v = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsString(v) ? v->valuestring : "";
}

bool reduces(CollType t) {
  return t == CollType::AllReduce || t == CollType::Reduce || t == CollType::ReduceScatter ||
         t == CollType::ReduceScatterBlock;
}

// The size column of nccl-tests: all-gather and gather count the gathered
// total; every other collective the per-rank buffer.
double table_bytes(const CollRecord& c) {
  return (c.type == CollType::AllGather || c.type == CollType::Gather) ? static_cast<double>(c.bytes) * c.group
                                                                        : static_cast<double>(c.bytes);
}

struct Row {
  CollType type;
  uint64_t bytes;
  int group;
  std::string comm;  // communicator group (pg_name), "" for all ranks
  int count = 0;
  double time_ns = 0;  // sum over collectives of the slowest rank's time
  uint64_t wrong = 0;
};

// One row per (collective, size, group size, communicator); a collective
// is the same one on every rank that has it at the same place among its
// communicator's, and its time the slowest of those ranks'.
std::vector<Row> rows_of(const std::vector<RankReport>& reports) {
  struct Instance {
    const CollRecord* first = nullptr;
    int64_t slowest = 0;
    uint64_t wrong = 0;
  };
  std::vector<Instance> instances;  // in the order they first appear
  std::map<std::pair<std::string, uint32_t>, size_t> instance_at;
  size_t ncoll = 0;
  for (const auto& r : reports) ncoll = std::max(ncoll, r.colls.size());
  for (size_t s = 0; s < ncoll; ++s)
    for (const auto& r : reports) {
      if (s >= r.colls.size()) continue;
      const CollRecord& c = r.colls[s];
      auto [it, fresh] = instance_at.emplace(std::make_pair(c.comm, c.comm_seq), instances.size());
      if (fresh) instances.push_back(Instance{&c});
      Instance& in = instances[it->second];
      in.slowest = std::max(in.slowest, c.time_ns);
      in.wrong += c.wrong;
    }
  std::vector<Row> rows;
  std::map<std::tuple<int, uint64_t, int, std::string>, size_t> at;
  for (const Instance& in : instances) {
    const CollRecord& c = *in.first;
    const auto key = std::make_tuple(static_cast<int>(c.type), c.bytes, c.group, c.comm);
    auto it = at.find(key);
    if (it == at.end()) {
      it = at.emplace(key, rows.size()).first;
      rows.push_back(Row{c.type, c.bytes, c.group, c.comm});
    }
    Row& row = rows[it->second];
    ++row.count;
    row.time_ns += in.slowest;
    row.wrong += in.wrong;
  }
  return rows;
}

// A row's name: the collective, and @group for a communicator group's.
std::string row_name(const Row& row) {
  if (row.comm.empty()) return coll_type_name(row.type);
  std::string g = row.comm;
  std::replace_if(g.begin(), g.end(), [](char ch) { return ch == ' ' || ch == '\t'; }, '_');
  return cat(coll_type_name(row.type), "@", g);
}

}  // namespace

std::string report_to_json(const RankReport& r) {
  JsonPtr j = obj();
  cJSON_AddNumberToObject(j.get(), "rank", r.rank);
  cJSON_AddNumberToObject(j.get(), "finished_ns", static_cast<double>(r.finished_ns));
  cJSON_AddNumberToObject(j.get(), "exposed_comm_ns", static_cast<double>(r.exposed_comm_ns));
  cJSON_AddNumberToObject(j.get(), "nodes", static_cast<double>(r.nodes));
  cJSON_AddNumberToObject(j.get(), "wrong", static_cast<double>(r.wrong));
  cJSON_AddNumberToObject(j.get(), "p2p_messages", static_cast<double>(r.p2p_messages));
  cJSON_AddNumberToObject(j.get(), "p2p_bytes", static_cast<double>(r.p2p_bytes));
  cJSON_AddNumberToObject(j.get(), "bytes_sent", static_cast<double>(r.bytes_sent));
  cJSON_AddNumberToObject(j.get(), "bytes_staged", static_cast<double>(r.bytes_staged));
  cJSON_AddNumberToObject(j.get(), "node_threads", static_cast<double>(r.node_threads));
  cJSON_AddNumberToObject(j.get(), "compute_flops", r.compute_flops);
  cJSON_AddNumberToObject(j.get(), "buffers_prewarmed", static_cast<double>(r.buffers_prewarmed));
  cJSON_AddNumberToObject(j.get(), "buffers_allocated", static_cast<double>(r.buffers_allocated));
  cJSON_AddNumberToObject(j.get(), "huge_page_bytes", static_cast<double>(r.huge_page_bytes));
  cJSON_AddStringToObject(j.get(), "error", r.error.c_str());
  cJSON* colls = cJSON_AddArrayToObject(j.get(), "collectives");
  for (const auto& c : r.colls) {
    cJSON* o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "seq", c.seq);
    cJSON_AddStringToObject(o, "name", c.name.c_str());
    cJSON_AddNumberToObject(o, "type", static_cast<int>(c.type));
    cJSON_AddNumberToObject(o, "bytes", static_cast<double>(c.bytes));
    cJSON_AddNumberToObject(o, "group", c.group);
    cJSON_AddNumberToObject(o, "time_ns", static_cast<double>(c.time_ns));
    cJSON_AddNumberToObject(o, "wrong", static_cast<double>(c.wrong));
    cJSON_AddNumberToObject(o, "elements", static_cast<double>(c.elements));
    cJSON_AddStringToObject(o, "comm", c.comm.c_str());
    cJSON_AddNumberToObject(o, "comm_seq", c.comm_seq);
    cJSON_AddItemToArray(colls, o);
  }
  cJSON* order = cJSON_AddArrayToObject(j.get(), "issue_order");
  for (uint32_t q : r.issue_order) cJSON_AddItemToArray(order, cJSON_CreateNumber(q));
  cJSON* evs = cJSON_AddArrayToObject(j.get(), "events");
  for (const auto& e : r.events) {
    cJSON* o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", e.name.c_str());
    cJSON_AddStringToObject(o, "cat", e.cat.c_str());
    cJSON_AddNumberToObject(o, "ts", static_cast<double>(e.ts_ns));
    cJSON_AddNumberToObject(o, "dur", static_cast<double>(e.dur_ns));
    cJSON_AddNumberToObject(o, "lane", e.lane);
    cJSON_AddItemToArray(evs, o);
  }
  return print(j);
}

RankReport report_from_json(const std::string& json) {
  JsonPtr j(cJSON_Parse(json.c_str()), &cJSON_Delete);
  if (!j) fail(GENIE_ERR_PROTOCOL, "a rank's report is not JSON");
  RankReport r;
  r.rank = static_cast<int>(num(j.get(), "rank"));
  r.finished_ns = static_cast<int64_t>(num(j.get(), "finished_ns"));
  r.exposed_comm_ns = static_cast<int64_t>(num(j.get(), "exposed_comm_ns"));
  r.nodes = static_cast<uint64_t>(num(j.get(), "nodes"));
  r.wrong = static_cast<uint64_t>(num(j.get(), "wrong"));
  r.p2p_messages = static_cast<uint64_t>(num(j.get(), "p2p_messages"));
  r.p2p_bytes = static_cast<uint64_t>(num(j.get(), "p2p_bytes"));
  r.bytes_sent = static_cast<uint64_t>(num(j.get(), "bytes_sent"));
  r.bytes_staged = static_cast<uint64_t>(num(j.get(), "bytes_staged"));
  r.node_threads = static_cast<uint64_t>(num(j.get(), "node_threads"));
  r.compute_flops = num(j.get(), "compute_flops");
  r.buffers_prewarmed = static_cast<uint64_t>(num(j.get(), "buffers_prewarmed"));
  r.buffers_allocated = static_cast<uint64_t>(num(j.get(), "buffers_allocated"));
  r.huge_page_bytes = static_cast<uint64_t>(num(j.get(), "huge_page_bytes"));
  r.error = str(j.get(), "error");
  const cJSON* c;
  cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(j.get(), "collectives")) {
    r.colls.push_back(CollRecord{static_cast<uint32_t>(num(c, "seq")), str(c, "name"),
                                 static_cast<CollType>(static_cast<int>(num(c, "type"))),
                                 static_cast<uint64_t>(num(c, "bytes")), static_cast<int>(num(c, "group")),
                                 static_cast<int64_t>(num(c, "time_ns")), static_cast<uint64_t>(num(c, "wrong")),
                                 static_cast<uint64_t>(num(c, "elements")), str(c, "comm"),
                                 static_cast<uint32_t>(num(c, "comm_seq"))});
  }
  cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(j.get(), "issue_order")) {
    if (cJSON_IsNumber(c)) r.issue_order.push_back(static_cast<uint32_t>(c->valuedouble));
  }
  cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(j.get(), "events")) {
    r.events.push_back(TraceEvent{str(c, "name"), str(c, "cat"), static_cast<int64_t>(num(c, "ts")),
                                  static_cast<int64_t>(num(c, "dur")), static_cast<int>(num(c, "lane"))});
  }
  return r;
}

uint64_t print_reports(std::FILE* out, const std::vector<RankReport>& reports, const RunInfo& info) {
  uint64_t wrong = 0;
  for (const auto& r : reports) {
    wrong += r.wrong;
    if (r.error.empty())
      std::fprintf(out, "sys[%d] finished, %lld cycles, exposed communication %lld cycles.\n", r.rank,
                   static_cast<long long>(r.finished_ns), static_cast<long long>(r.exposed_comm_ns));
  }
  const std::vector<Row> rows = rows_of(reports);
  if (!rows.empty()) {
    std::fprintf(out, "#\n# %-20s %12s %12s %6s %6s %5s %10s %8s %8s %8s\n", "collective", "size", "count", "type",
                 "redop", "n", "time", "algbw", "busbw", "#wrong");
    std::fprintf(out, "# %-20s %12s %12s %6s %6s %5s %10s %8s %8s\n", "", "(B)", "(elements)", "", "", "", "(us)",
                 "(GB/s)", "(GB/s)");
    double bus_sum = 0;
    for (const Row& row : rows) {
      const CollRecord probe{0, "", row.type, row.bytes, row.group, 0, 0, 0, row.comm, 0};
      const double size = table_bytes(probe);
      const double t_ns = row.count ? row.time_ns / row.count : 0;
      const double algbw = t_ns > 0 ? size / t_ns : 0;  // bytes per ns = GB/s
      const double busbw = algbw * bus_factor(row.type, row.group);
      bus_sum += busbw;
      std::fprintf(out, "  %-20s %12.0f %12.0f %6s %6s %5d %10.1f %8.2f %8.2f %8llu\n", row_name(row).c_str(), size,
                   size / 4, reduces(row.type) ? "float" : "uint32", reduces(row.type) ? "sum" : "none", row.count,
                   t_ns / 1000.0, algbw, busbw, static_cast<unsigned long long>(row.wrong));
    }
    std::fprintf(out, "# Avg bus bandwidth    : %g GB/s\n", bus_sum / rows.size());
  }
  uint64_t messages = 0, bytes = 0;
  for (const auto& r : reports) {
    messages += r.p2p_messages;
    bytes += r.p2p_bytes;
  }
  if (messages)  // each message counts on both of its ranks
    std::fprintf(out, "# point to point: %llu sends and receives, %llu bytes\n", static_cast<unsigned long long>(messages),
                 static_cast<unsigned long long>(bytes));
  std::fprintf(out, "# %d ranks over %s, %.3f s wall, %llu wrong elements\n", info.ranks, info.transport.c_str(),
               info.wall_s, static_cast<unsigned long long>(wrong));
  return wrong;
}

std::string summary_json(const std::vector<RankReport>& reports, const RunInfo& info) {
  JsonPtr j = obj();
  cJSON_AddStringToObject(j.get(), "workload", info.workload.c_str());
  cJSON_AddStringToObject(j.get(), "transport", info.transport.c_str());
  cJSON_AddNumberToObject(j.get(), "ranks", info.ranks);
  cJSON_AddNumberToObject(j.get(), "wall_s", info.wall_s);
  uint64_t wrong = 0;
  cJSON* ranks = cJSON_AddArrayToObject(j.get(), "rank_reports");
  for (const auto& r : reports) {
    wrong += r.wrong;
    cJSON* o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "rank", r.rank);
    cJSON_AddNumberToObject(o, "finished_ns", static_cast<double>(r.finished_ns));
    cJSON_AddNumberToObject(o, "exposed_comm_ns", static_cast<double>(r.exposed_comm_ns));
    cJSON_AddNumberToObject(o, "nodes", static_cast<double>(r.nodes));
    cJSON_AddNumberToObject(o, "wrong", static_cast<double>(r.wrong));
    cJSON_AddNumberToObject(o, "bytes_sent", static_cast<double>(r.bytes_sent));
    // Of the bytes received, those that came before their receive was
    // posted and were copied once more.
    cJSON_AddNumberToObject(o, "bytes_staged", static_cast<double>(r.bytes_staged));
    cJSON_AddNumberToObject(o, "p2p_messages", static_cast<double>(r.p2p_messages));
    // Threads that ran the rank's nodes: as many as were in flight at once
    // (a chain of nodes runs on one).
    cJSON_AddNumberToObject(o, "node_threads", static_cast<double>(r.node_threads));
    cJSON_AddNumberToObject(o, "compute_flops", r.compute_flops);
    // Bytes of collective buffers made ready before the start, and
    // allocated during the run (none when the reservation was complete).
    cJSON_AddNumberToObject(o, "buffers_prewarmed", static_cast<double>(r.buffers_prewarmed));
    cJSON_AddNumberToObject(o, "buffers_allocated", static_cast<double>(r.buffers_allocated));
    // The rank's memory backed by transparent huge pages at the end (its
    // large buffers ask for them).
    cJSON_AddNumberToObject(o, "huge_page_bytes", static_cast<double>(r.huge_page_bytes));
    cJSON* order = cJSON_AddArrayToObject(o, "issue_order");  // collective seqs, as the policy issued them
    for (uint32_t q : r.issue_order) cJSON_AddItemToArray(order, cJSON_CreateNumber(q));
    if (!r.error.empty()) cJSON_AddStringToObject(o, "error", r.error.c_str());
    cJSON_AddItemToArray(ranks, o);
  }
  cJSON_AddNumberToObject(j.get(), "wrong", static_cast<double>(wrong));
  cJSON* colls = cJSON_AddArrayToObject(j.get(), "collectives");
  for (const Row& row : rows_of(reports)) {
    const CollRecord probe{0, "", row.type, row.bytes, row.group, 0, 0, 0, row.comm, 0};
    const double size = table_bytes(probe);
    const double t_ns = row.count ? row.time_ns / row.count : 0;
    const double algbw = t_ns > 0 ? size / t_ns : 0;
    cJSON* o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "collective", coll_type_name(row.type));
    cJSON_AddStringToObject(o, "pg_name", row.comm.c_str());
    cJSON_AddNumberToObject(o, "size_bytes", size);
    cJSON_AddNumberToObject(o, "comm_size", static_cast<double>(row.bytes));
    cJSON_AddNumberToObject(o, "ranks", row.group);
    cJSON_AddNumberToObject(o, "count", row.count);
    cJSON_AddNumberToObject(o, "time_us", t_ns / 1000.0);
    cJSON_AddNumberToObject(o, "algbw_gbps", algbw);
    cJSON_AddNumberToObject(o, "busbw_gbps", algbw * bus_factor(row.type, row.group));
    cJSON_AddNumberToObject(o, "wrong", static_cast<double>(row.wrong));
    cJSON_AddItemToArray(colls, o);
  }
  std::unique_ptr<char, void (*)(void*)> s(cJSON_Print(j.get()), &cJSON_free);
  return std::string(s.get()) + "\n";
}

std::string chrome_trace(const std::vector<RankReport>& reports) {
  // The library's trace writer (core/trace.hpp): one process row per rank.
  trace::Document doc;
  for (const auto& r : reports) {
    doc.process_names[r.rank] = cat("rank ", r.rank);
    for (const auto& e : r.events) {
      trace::Event o;
      o.name = e.name;
      o.cat = e.cat;
      o.ts_us = e.ts_ns / 1000.0;
      o.dur_us = e.dur_ns / 1000.0;
      o.pid = r.rank;
      o.tid = e.lane;
      doc.events.push_back(std::move(o));
    }
  }
  doc.metadata["clock"] = "nanoseconds since the ranks' common start, in microseconds";
  return trace::to_json(doc);
}

}  // namespace genie::replay
