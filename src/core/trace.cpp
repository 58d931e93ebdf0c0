#include "core/trace.hpp"

#include <cjson/cJSON.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <set>

#include "core/error.hpp"

namespace genie::trace {

namespace detail {
std::atomic<bool> g_on{false};
}

namespace {
std::atomic<uint64_t> g_generation{0};
}

namespace {

using Json = std::unique_ptr<cJSON, void (*)(cJSON*)>;

cJSON* metadata_event(const char* what, int64_t pid, int64_t tid, const std::string& name) {
  cJSON* m = cJSON_CreateObject();
  cJSON_AddStringToObject(m, "name", what);
  cJSON_AddStringToObject(m, "ph", "M");
  cJSON_AddNumberToObject(m, "pid", static_cast<double>(pid));
  cJSON_AddNumberToObject(m, "tid", static_cast<double>(tid));
  cJSON* args = cJSON_AddObjectToObject(m, "args");
  cJSON_AddStringToObject(args, "name", name.c_str());
  return m;
}

uint64_t steady_now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

struct Recorder {
  std::mutex mu;
  std::string path;
  uint64_t t0_ns = 0;
  Document doc;
  std::set<std::pair<int64_t, int64_t>> named;
  std::map<std::string, int64_t> rows;  // process_row: name -> pid
};

// Linux pids stay below 2^22: pids from here on name other processes' rows.
constexpr int64_t kFirstOtherPid = int64_t{1} << 30;

Recorder& recorder() {
  static Recorder* r = new Recorder();  // never destroyed: any thread may record during exit
  return *r;
}

}  // namespace

std::string to_json(const Document& doc) {
  Json j(cJSON_CreateObject(), cJSON_Delete);
  cJSON* evs = cJSON_AddArrayToObject(j.get(), "traceEvents");
  for (const auto& [pid, name] : doc.process_names)
    cJSON_AddItemToArray(evs, metadata_event("process_name", pid, 0, name));
  for (const auto& [row, name] : doc.thread_names)
    cJSON_AddItemToArray(evs, metadata_event("thread_name", row.first, row.second, name));
  for (const Event& e : doc.events) {
    cJSON* o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", e.name.c_str());
    cJSON_AddStringToObject(o, "cat", e.cat.c_str());
    cJSON_AddStringToObject(o, "ph", "X");
    cJSON_AddNumberToObject(o, "ts", e.ts_us);
    cJSON_AddNumberToObject(o, "dur", e.dur_us);
    cJSON_AddNumberToObject(o, "pid", static_cast<double>(e.pid));
    cJSON_AddNumberToObject(o, "tid", static_cast<double>(e.tid));
    if (!e.args.empty() || !e.num_args.empty()) {
      cJSON* args = cJSON_AddObjectToObject(o, "args");
      for (const auto& [k, v] : e.args) cJSON_AddStringToObject(args, k.c_str(), v.c_str());
      for (const auto& [k, v] : e.num_args) cJSON_AddNumberToObject(args, k.c_str(), v);
    }
    cJSON_AddItemToArray(evs, o);
  }
  cJSON_AddStringToObject(j.get(), "displayTimeUnit", "ns");
  if (!doc.metadata.empty()) {
    cJSON* other = cJSON_AddObjectToObject(j.get(), "otherData");
    for (const auto& [k, v] : doc.metadata) cJSON_AddStringToObject(other, k.c_str(), v.c_str());
  }
  std::unique_ptr<char, void (*)(void*)> text(cJSON_PrintUnformatted(j.get()), &cJSON_free);
  check(text != nullptr, GENIE_ERR_OUT_OF_MEMORY, "out of memory writing a trace");
  return std::string(text.get()) + "\n";
}

void start(const std::string& path) {
  check(!path.empty(), GENIE_ERR_INVALID_ARGUMENT, "trace path is empty");
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lk(r.mu);
  if (detail::g_on.load()) {
    check(r.path == path, GENIE_ERR_INVALID_ARGUMENT, "a trace is already being recorded into ", r.path);
    return;
  }
  std::FILE* f = std::fopen(path.c_str(), "w");
  check(f != nullptr, GENIE_ERR_IO, "cannot create trace file ", path);
  std::fclose(f);
  r.path = path;
  r.t0_ns = steady_now_ns();
  r.doc = Document{};
  r.named.clear();
  r.rows.clear();
  g_generation.fetch_add(1);
  r.doc.metadata["clock"] = "steady, microseconds from the start of tracing";
  detail::g_on.store(true);
}

void stop() {
  Recorder& r = recorder();
  Document doc;
  std::string path;
  {
    std::lock_guard<std::mutex> lk(r.mu);
    if (!detail::g_on.load()) return;
    detail::g_on.store(false);
    doc = std::move(r.doc);
    path = std::move(r.path);
    r.doc = Document{};
  }
  const std::string text = to_json(doc);
  std::FILE* f = std::fopen(path.c_str(), "w");
  check(f != nullptr, GENIE_ERR_IO, "cannot write trace file ", path);
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  const bool closed = std::fclose(f) == 0;
  check(ok && closed, GENIE_ERR_IO, "cannot write trace file ", path, " (disk full?)");
}

void start_from_env() {
  const char* path = std::getenv("GENIE_TRACE");
  if (path == nullptr || *path == '\0') return;
  start(path);
  static std::once_flag at_exit;
  std::call_once(at_exit, [] {
    std::atexit([] {
      try {
        stop();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "genie: GENIE_TRACE: %s\n", e.what());
      }
    });
  });
}

double ts_us(uint64_t steady_ns) {
  const uint64_t t0 = recorder().t0_ns;
  return steady_ns >= t0 ? static_cast<double>(steady_ns - t0) / 1e3
                         : -static_cast<double>(t0 - steady_ns) / 1e3;
}

namespace {

// Under r.mu, while recording.
void add(Recorder& r, Event&& e, const std::string& thread_name) {
  if (r.doc.process_names.count(e.pid) == 0) r.doc.process_names[e.pid] = cat("genie ", e.pid);
  if (!thread_name.empty() && r.named.insert({e.pid, e.tid}).second)
    r.doc.thread_names[{e.pid, e.tid}] = thread_name;
  r.doc.events.push_back(std::move(e));
}

}  // namespace

void record(Event e, const std::string& thread_name) {
  if (!on()) return;
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lk(r.mu);
  if (!detail::g_on.load()) return;
  add(r, std::move(e), thread_name);
}

void record(std::vector<Event>&& events, const std::vector<std::string>& rows) {
  if (!on()) return;
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lk(r.mu);
  if (!detail::g_on.load()) return;
  for (size_t i = 0; i < events.size(); ++i) add(r, std::move(events[i]), i < rows.size() ? rows[i] : "");
}

uint64_t generation() { return g_generation.load(); }

int64_t process_row(const std::string& name) {
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lk(r.mu);
  auto [it, added] = r.rows.emplace(name, kFirstOtherPid + static_cast<int64_t>(r.rows.size()));
  if (added) r.doc.process_names[it->second] = name;
  return it->second;
}

void set_metadata(const std::string& key, const std::string& value) {
  if (!on()) return;
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lk(r.mu);
  if (detail::g_on.load()) r.doc.metadata[key] = value;
}

uint64_t now_ns() { return steady_now_ns(); }

void transfer(const Transfer& t, uint64_t start_ns, uint64_t end_ns) {
  if (!on()) return;
  Event e;
  e.name = cat(t.direction, t.direction.empty() ? "" : " ", t.role.empty() ? "transfer" : t.role, " ",
               t.bytes, " B");
  e.cat = "transfer";
  e.ts_us = ts_us(start_ns);
  e.dur_us = end_ns >= start_ns ? static_cast<double>(end_ns - start_ns) / 1e3 : 0;
  e.pid = ::getpid();
  e.tid = kTransferTid;
  e.args = {{"transport", t.transport}, {"role", t.role}, {"phase", t.phase},
            {"from", t.from},           {"to", t.to},     {"value", t.value}};
  if (!t.direction.empty()) e.args.push_back({"direction", t.direction});
  e.num_args = {{"bytes", static_cast<double>(t.bytes)}};
  record(std::move(e), "transfers");
}

}  // namespace genie::trace
