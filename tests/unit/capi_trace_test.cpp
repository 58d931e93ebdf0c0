// Execution traces (genie_trace_start / genie_trace_stop, GENIE_TRACE): the
// file is Chrome trace-event JSON with a span per graph and one per node,
// carrying the node's op and semantic annotations.
#include <cjson/cJSON.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "genie.h"

namespace {

#define ASSERT_GENIE_OK(call) ASSERT_EQ((call), GENIE_OK) << #call << ": " << genie_last_error()

std::string temp_path(const char* what) {
  return "/tmp/genie_trace_test_" + std::to_string(::getpid()) + "_" + what + ".json";
}

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

const char* str_arg(const cJSON* ev, const char* key) {
  const cJSON* v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(ev, "args"), key);
  return cJSON_IsString(v) ? v->valuestring : nullptr;
}

// Runs a two-node decode graph `runs` times in an embedded context.
void run_graph(int runs) {
  genie_config_t* cfg = nullptr;
  ASSERT_GENIE_OK(genie_config_create(&cfg));
  ASSERT_GENIE_OK(genie_config_set_use_env(cfg, 0));
  genie_context_t* ctx = nullptr;
  ASSERT_GENIE_OK(genie_init(cfg, &ctx));
  genie_config_destroy(cfg);
  genie_graph_t* g = nullptr;
  const int64_t xs[2] = {2, 3}, ws[2] = {4, 3};
  const char* lin_in[2] = {"x", "w"};
  const char* lin_out[1] = {"y"};
  const char* relu_out[1] = {"z"};
  ASSERT_GENIE_OK(genie_graph_create("decode_step", &g));
  ASSERT_GENIE_OK(genie_graph_add_input(g, "x", GENIE_DTYPE_F32, xs, 2));
  ASSERT_GENIE_OK(genie_graph_add_input(g, "w", GENIE_DTYPE_F32, ws, 2));
  ASSERT_GENIE_OK(genie_graph_add_node(g, "linear", "fc", lin_in, 2, lin_out, 1));
  ASSERT_GENIE_OK(genie_graph_add_node(g, "relu", "act", lin_out, 1, relu_out, 1));
  ASSERT_GENIE_OK(genie_graph_set_phase(g, "fc", GENIE_PHASE_DECODE));
  ASSERT_GENIE_OK(genie_graph_set_phase(g, "act", GENIE_PHASE_DECODE));
  ASSERT_GENIE_OK(genie_graph_set_layer(g, "fc", 3));
  ASSERT_GENIE_OK(genie_graph_set_module(g, "fc", "block.3.mlp.fc"));
  ASSERT_GENIE_OK(genie_graph_mark_output(g, "z"));
  genie_tensor_t *x = nullptr, *w = nullptr;
  ASSERT_GENIE_OK(genie_tensor_alloc(ctx, GENIE_DTYPE_F32, xs, 2, "cpu", &x));
  ASSERT_GENIE_OK(genie_tensor_alloc(ctx, GENIE_DTYPE_F32, ws, 2, "cpu", &w));
  const char* names[2] = {"x", "w"};
  genie_tensor_t* tensors[2] = {x, w};
  for (int i = 0; i < runs; ++i) {
    genie_future_t* f = nullptr;
    ASSERT_GENIE_OK(genie_graph_submit(ctx, g, names, tensors, 2, &f));
    ASSERT_GENIE_OK(genie_future_wait(f, -1));
    genie_future_destroy(f);
  }
  genie_tensor_destroy(x);
  genie_tensor_destroy(w);
  genie_graph_destroy(g);
  genie_shutdown(ctx);
}

TEST(Trace, GraphAndNodeSpansWithTheirAnnotations) {
  const std::string path = temp_path("spans");
  ASSERT_GENIE_OK(genie_trace_start(path.c_str()));
  run_graph(3);
  ASSERT_GENIE_OK(genie_trace_stop());
  const std::string text = read_all(path);
  std::remove(path.c_str());
  std::unique_ptr<cJSON, void (*)(cJSON*)> doc(cJSON_Parse(text.c_str()), cJSON_Delete);
  ASSERT_NE(doc, nullptr) << "not JSON: " << text.substr(0, 200);
  const cJSON* events = cJSON_GetObjectItemCaseSensitive(doc.get(), "traceEvents");
  ASSERT_TRUE(cJSON_IsArray(events));
  int graphs = 0, linear = 0, relu = 0, process_names = 0;
  const cJSON* ev = nullptr;
  cJSON_ArrayForEach(ev, events) {
    const std::string ph = cJSON_GetObjectItemCaseSensitive(ev, "ph")->valuestring;
    const std::string name = cJSON_GetObjectItemCaseSensitive(ev, "name")->valuestring;
    if (ph == "M") {
      process_names += name == "process_name";
      continue;
    }
    ASSERT_EQ(ph, "X");
    EXPECT_GE(cJSON_GetObjectItemCaseSensitive(ev, "dur")->valuedouble, 0);
    EXPECT_EQ(cJSON_GetObjectItemCaseSensitive(ev, "pid")->valuedouble, ::getpid());
    const std::string cat = cJSON_GetObjectItemCaseSensitive(ev, "cat")->valuestring;
    if (cat == "graph") {
      ++graphs;
      EXPECT_EQ(name, "decode_step");
      EXPECT_STREQ(str_arg(ev, "phase"), "decode");
      EXPECT_STREQ(str_arg(ev, "side"), "embedded");
      EXPECT_STREQ(str_arg(ev, "status"), "ok");
    } else {
      ASSERT_EQ(cat, "node");
      EXPECT_STREQ(str_arg(ev, "op"), name.c_str());
      EXPECT_STREQ(str_arg(ev, "phase"), "decode");
      EXPECT_STREQ(str_arg(ev, "graph"), "decode_step");
      if (name == "linear") {
        ++linear;
        EXPECT_STREQ(str_arg(ev, "node"), "fc");
        EXPECT_STREQ(str_arg(ev, "module"), "block.3.mlp.fc");
        const cJSON* layer =
            cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(ev, "args"), "layer");
        ASSERT_TRUE(cJSON_IsNumber(layer));
        EXPECT_EQ(layer->valuedouble, 3);
      } else {
        EXPECT_EQ(name, "relu");
        ++relu;
        EXPECT_EQ(str_arg(ev, "module"), nullptr) << "no module annotated on act";
      }
    }
  }
  EXPECT_EQ(graphs, 3);
  EXPECT_EQ(linear, 3);
  EXPECT_EQ(relu, 3);
  EXPECT_EQ(process_names, 1);
}

// A master and a worker in this process (one trace): a graph whose weight
// lives on the worker is planned across the two; the trace holds the
// scheduler's decision and the tensors moved, with their bytes.
TEST(Trace, SchedulerDecisionAndTransfers) {
  genie_config_t* cfg = nullptr;
  genie_server_t *master = nullptr, *worker = nullptr;
  int32_t port = 0;
  ASSERT_GENIE_OK(genie_config_create(&cfg));
  ASSERT_GENIE_OK(genie_config_set_use_env(cfg, 0));
  ASSERT_GENIE_OK(genie_config_set_node_id(cfg, "tr-master"));
  ASSERT_GENIE_OK(genie_server_create(cfg, "127.0.0.1", 0, &master));
  genie_config_destroy(cfg);
  ASSERT_GENIE_OK(genie_server_port(master, &port));
  ASSERT_GENIE_OK(genie_config_create(&cfg));
  ASSERT_GENIE_OK(genie_config_set_use_env(cfg, 0));
  ASSERT_GENIE_OK(genie_config_set_node_id(cfg, "tr-worker"));
  ASSERT_GENIE_OK(genie_config_set_master_addr(cfg, "127.0.0.1"));
  ASSERT_GENIE_OK(genie_config_set_master_port(cfg, port));
  ASSERT_GENIE_OK(genie_server_create(cfg, "127.0.0.1", 0, &worker));
  genie_config_destroy(cfg);
  ASSERT_GENIE_OK(genie_config_create(&cfg));
  ASSERT_GENIE_OK(genie_config_set_use_env(cfg, 0));
  ASSERT_GENIE_OK(genie_config_set_master_addr(cfg, "127.0.0.1"));
  ASSERT_GENIE_OK(genie_config_set_master_port(cfg, port));
  genie_context_t* ctx = nullptr;
  ASSERT_GENIE_OK(genie_init(cfg, &ctx));
  genie_config_destroy(cfg);

  genie_graph_t* g = nullptr;
  const int64_t xs[2] = {8, 64}, ws[2] = {64, 64};
  const char* lin_in[2] = {"x", "w"};
  const char* lin_out[1] = {"y"};
  const char* relu_out[1] = {"z"};
  ASSERT_GENIE_OK(genie_graph_create("split_step", &g));
  ASSERT_GENIE_OK(genie_graph_add_input(g, "x", GENIE_DTYPE_F32, xs, 2));
  ASSERT_GENIE_OK(genie_graph_add_input(g, "w", GENIE_DTYPE_F32, ws, 2));
  ASSERT_GENIE_OK(genie_graph_set_role(g, "w", GENIE_TENSOR_ROLE_WEIGHT));
  ASSERT_GENIE_OK(genie_graph_add_node(g, "linear", "fc", lin_in, 2, lin_out, 1));
  ASSERT_GENIE_OK(genie_graph_add_node(g, "relu", "act", lin_out, 1, relu_out, 1));
  ASSERT_GENIE_OK(genie_graph_mark_output(g, "z"));
  genie_tensor_t *x = nullptr, *w = nullptr;
  ASSERT_GENIE_OK(genie_tensor_alloc(ctx, GENIE_DTYPE_F32, xs, 2, nullptr, &x));
  ASSERT_GENIE_OK(genie_tensor_alloc(ctx, GENIE_DTYPE_F32, ws, 2, "tr-worker/cpu:0", &w));
  const char* names[2] = {"x", "w"};
  genie_tensor_t* tensors[2] = {x, w};

  const std::string path = temp_path("multinode");
  ASSERT_GENIE_OK(genie_trace_start(path.c_str()));
  for (int i = 0; i < 2; ++i) {
    genie_future_t* f = nullptr;
    ASSERT_GENIE_OK(genie_graph_submit(ctx, g, names, tensors, 2, &f));
    ASSERT_GENIE_OK(genie_future_wait(f, -1));
    genie_future_destroy(f);
  }
  ASSERT_GENIE_OK(genie_trace_stop());
  genie_tensor_destroy(x);
  genie_tensor_destroy(w);
  genie_graph_destroy(g);
  genie_shutdown(ctx);
  genie_server_destroy(worker);
  genie_server_destroy(master);

  const std::string text = read_all(path);
  std::remove(path.c_str());
  std::unique_ptr<cJSON, void (*)(cJSON*)> doc(cJSON_Parse(text.c_str()), cJSON_Delete);
  ASSERT_NE(doc, nullptr) << "not JSON: " << text.substr(0, 200);
  int decisions = 0, misses = 0, transfers = 0;
  double moved = 0;
  const cJSON* ev = nullptr;
  cJSON_ArrayForEach(ev, cJSON_GetObjectItemCaseSensitive(doc.get(), "traceEvents")) {
    const cJSON* cat = cJSON_GetObjectItemCaseSensitive(ev, "cat");
    if (!cJSON_IsString(cat)) continue;
    const cJSON* args = cJSON_GetObjectItemCaseSensitive(ev, "args");
    if (std::string(cat->valuestring) == "scheduler") {
      ++decisions;
      misses += std::string(str_arg(ev, "plan_cache") ? str_arg(ev, "plan_cache") : "") == "miss";
      ASSERT_NE(str_arg(ev, "placement"), nullptr);
      EXPECT_NE(std::string(str_arg(ev, "placement")).find("tr-worker"), std::string::npos)
          << "the weight's node runs part of the graph: " << str_arg(ev, "placement");
      const cJSON* predicted = cJSON_GetObjectItemCaseSensitive(args, "predicted_ms");
      ASSERT_TRUE(cJSON_IsNumber(predicted));
      EXPECT_GT(predicted->valuedouble, 0);
    } else if (std::string(cat->valuestring) == "transfer") {
      ++transfers;
      const cJSON* bytes = cJSON_GetObjectItemCaseSensitive(args, "bytes");
      ASSERT_TRUE(cJSON_IsNumber(bytes));
      EXPECT_GT(bytes->valuedouble, 0);
      moved += bytes->valuedouble;
      ASSERT_NE(str_arg(ev, "transport"), nullptr);
      EXPECT_STRNE(str_arg(ev, "transport"), "");
      ASSERT_NE(str_arg(ev, "role"), nullptr);
      EXPECT_STRNE(str_arg(ev, "role"), "");
    }
  }
  EXPECT_EQ(decisions, 2) << "one decision per submission";
  EXPECT_EQ(misses, 1) << "the second submission finds its plan in the cache";
  EXPECT_GE(transfers, 2) << "x to the worker, and the result back, each time";
  // At least x (8 x 64 floats) went to the worker in each run.
  EXPECT_GE(moved, 2.0 * 8 * 64 * 4);
}

// A server in this process and a context connected to it (remote mode).
struct Remote {
  genie_server_t* server = nullptr;
  genie_context_t* ctx = nullptr;
  Remote() {
    genie_config_t* cfg = nullptr;
    int32_t port = 0;
    EXPECT_EQ(genie_config_create(&cfg), GENIE_OK);
    genie_config_set_use_env(cfg, 0);
    genie_config_set_node_id(cfg, "tr-server");
    EXPECT_EQ(genie_server_create(cfg, "127.0.0.1", 0, &server), GENIE_OK) << genie_last_error();
    genie_config_destroy(cfg);
    EXPECT_EQ(genie_server_port(server, &port), GENIE_OK);
    EXPECT_EQ(genie_config_create(&cfg), GENIE_OK);
    genie_config_set_use_env(cfg, 0);
    genie_config_set_master_addr(cfg, "127.0.0.1");
    genie_config_set_master_port(cfg, port);
    EXPECT_EQ(genie_init(cfg, &ctx), GENIE_OK) << genie_last_error();
    genie_config_destroy(cfg);
  }
  ~Remote() {
    genie_shutdown(ctx);
    genie_server_destroy(server);
  }
};

using JsonDoc = std::unique_ptr<cJSON, void (*)(cJSON*)>;

JsonDoc stop_and_parse(const std::string& path) {
  EXPECT_EQ(genie_trace_stop(), GENIE_OK);
  const std::string text = read_all(path);
  std::remove(path.c_str());
  JsonDoc doc(cJSON_Parse(text.c_str()), cJSON_Delete);
  EXPECT_NE(doc, nullptr) << "not JSON: " << text.substr(0, 200);
  return doc;
}

double num(const cJSON* ev, const char* key) {
  const cJSON* v = cJSON_GetObjectItemCaseSensitive(ev, key);
  return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

double num_arg(const cJSON* ev, const char* key) {
  return num(cJSON_GetObjectItemCaseSensitive(ev, "args"), key);
}

std::string str(const cJSON* ev, const char* key) {
  const cJSON* v = cJSON_GetObjectItemCaseSensitive(ev, key);
  return cJSON_IsString(v) ? v->valuestring : "";
}

// Each genie_tensor_write and genie_tensor_read of a server tensor is a
// span on the client's transfers row with its bytes, transport and tag,
// whichever path carried it (the first calls go through the loop, later
// ones on the direct link).
TEST(Trace, RemoteTensorWritesAndReadsAreSpans) {
  Remote r;
  ASSERT_NE(r.ctx, nullptr);
  const int64_t shape[1] = {1024};
  genie_tensor_t* t = nullptr;
  ASSERT_GENIE_OK(genie_tensor_alloc(r.ctx, GENIE_DTYPE_F32, shape, 1, "remote:0", &t));
  ASSERT_GENIE_OK(genie_tensor_set_semantics(t, GENIE_PHASE_DECODE, GENIE_TENSOR_ROLE_KV_CACHE, 2));
  std::vector<float> buf(1024, 1.5f);
  const std::string path = temp_path("remote_io");
  ASSERT_GENIE_OK(genie_trace_start(path.c_str()));
  constexpr int kCalls = 6;
  for (int i = 0; i < kCalls; ++i) {
    // Writes of 4096 - 4 i bytes, reads of 2048 + i: each span names its own.
    ASSERT_GENIE_OK(genie_tensor_write(t, 0, buf.data(), 4096 - 4 * i));
    ASSERT_GENIE_OK(genie_tensor_read(t, 0, buf.data(), 2048 + i));
  }
  JsonDoc doc = stop_and_parse(path);
  genie_tensor_destroy(t);
  ASSERT_NE(doc, nullptr);
  std::vector<double> writes, reads;
  std::set<std::string> transports;
  const cJSON* ev = nullptr;
  cJSON_ArrayForEach(ev, cJSON_GetObjectItemCaseSensitive(doc.get(), "traceEvents")) {
    if (str(ev, "cat") != "transfer") continue;
    EXPECT_EQ(num(ev, "pid"), ::getpid());
    const std::string dir = str_arg(ev, "direction") ? str_arg(ev, "direction") : "";
    (dir == "write" ? writes : reads).push_back(num_arg(ev, "bytes"));
    EXPECT_TRUE(dir == "write" || dir == "read") << dir;
    EXPECT_STREQ(str_arg(ev, "role"), "kv_cache");
    EXPECT_STREQ(str_arg(ev, "phase"), "decode");
    EXPECT_STREQ(str_arg(ev, dir == "write" ? "to" : "from"), "tr-server");
    ASSERT_NE(str_arg(ev, "transport"), nullptr);
    transports.insert(str_arg(ev, "transport"));
    EXPECT_GE(num(ev, "dur"), 0);
  }
  ASSERT_EQ(writes.size(), size_t{kCalls});
  ASSERT_EQ(reads.size(), size_t{kCalls});
  for (int i = 0; i < kCalls; ++i) {
    EXPECT_EQ(writes[i], 4096 - 4 * i);
    EXPECT_EQ(reads[i], 2048 + i);
  }
  EXPECT_TRUE(transports.count("tcp")) << "the first calls go through the loop's data connection";
  EXPECT_TRUE(transports.count("tcp (direct link)")) << "later ones on the caller's own socket";
}

// A remote graph traced from the client: the client's span of each graph
// (submission to completion) and the server's spans of its run on a
// process row of the server's own, shifted onto the client's clock, each
// inside the client's span of its graph within the stated error bound.
TEST(Trace, RemoteGraphHoldsTheServersSpansOnTheClientsClock) {
  Remote r;
  ASSERT_NE(r.ctx, nullptr);
  genie_graph_t* g = nullptr;
  const int64_t xs[2] = {32, 128}, ws[2] = {128, 128};
  const char* lin_in[2] = {"x", "w"};
  const char* lin_out[1] = {"y"};
  const char* relu_out[1] = {"z"};
  ASSERT_GENIE_OK(genie_graph_create("remote_step", &g));
  ASSERT_GENIE_OK(genie_graph_add_input(g, "x", GENIE_DTYPE_F32, xs, 2));
  ASSERT_GENIE_OK(genie_graph_add_input(g, "w", GENIE_DTYPE_F32, ws, 2));
  ASSERT_GENIE_OK(genie_graph_add_node(g, "linear", "fc", lin_in, 2, lin_out, 1));
  ASSERT_GENIE_OK(genie_graph_add_node(g, "relu", "act", lin_out, 1, relu_out, 1));
  ASSERT_GENIE_OK(genie_graph_set_phase(g, "fc", GENIE_PHASE_PREFILL));
  ASSERT_GENIE_OK(genie_graph_set_module(g, "fc", "block.0.mlp.fc"));
  ASSERT_GENIE_OK(genie_graph_mark_output(g, "z"));
  genie_tensor_t *x = nullptr, *w = nullptr;
  ASSERT_GENIE_OK(genie_tensor_alloc(r.ctx, GENIE_DTYPE_F32, xs, 2, "remote:0", &x));
  ASSERT_GENIE_OK(genie_tensor_alloc(r.ctx, GENIE_DTYPE_F32, ws, 2, "remote:0", &w));
  const char* names[2] = {"x", "w"};
  genie_tensor_t* tensors[2] = {x, w};
  const std::string path = temp_path("remote_graph");
  ASSERT_GENIE_OK(genie_trace_start(path.c_str()));
  constexpr int kRuns = 3;
  for (int i = 0; i < kRuns; ++i) {
    genie_future_t* f = nullptr;
    ASSERT_GENIE_OK(genie_graph_submit(r.ctx, g, names, tensors, 2, &f));
    ASSERT_GENIE_OK(genie_future_wait(f, -1));
    genie_future_destroy(f);
  }
  JsonDoc doc = stop_and_parse(path);
  genie_tensor_destroy(x);
  genie_tensor_destroy(w);
  genie_graph_destroy(g);
  ASSERT_NE(doc, nullptr);

  const cJSON* other = cJSON_GetObjectItemCaseSensitive(doc.get(), "otherData");
  const std::string offset = str(other, "server tr-server clock_offset_us");
  const std::string error = str(other, "server tr-server clock_error_us");
  ASSERT_FALSE(offset.empty()) << "the offset is in the metadata";
  ASSERT_FALSE(error.empty()) << "and its error bound";
  const double error_us = std::stod(error);
  EXPECT_GE(error_us, 0);
  EXPECT_NE(str(other, "server tr-server spans").find("merged"), std::string::npos);

  struct Span {
    double ts, end;
  };
  std::vector<Span> client_graphs;
  std::vector<Span> server_nodes;
  int server_graphs = 0, linear = 0;
  double server_pid = -1;
  std::string server_process;
  const cJSON* ev = nullptr;
  const cJSON* events = cJSON_GetObjectItemCaseSensitive(doc.get(), "traceEvents");
  cJSON_ArrayForEach(ev, events) {
    if (str(ev, "ph") != "X") continue;
    const double pid = num(ev, "pid");
    const Span span{num(ev, "ts"), num(ev, "ts") + num(ev, "dur")};
    const std::string cat = str(ev, "cat");
    const std::string side = str_arg(ev, "side") ? str_arg(ev, "side") : "";
    if (pid == ::getpid()) {
      // The in-process server traces what it runs under this pid too
      // (side "server"); the client's own span of the graph is "remote".
      if (cat == "graph" && side == "remote") {
        client_graphs.push_back(span);
        EXPECT_EQ(str(ev, "name"), "remote_step");
        EXPECT_STREQ(str_arg(ev, "server"), "tr-server");
        EXPECT_EQ(num_arg(ev, "server_spans"), 3) << "the graph and its two nodes";
      }
      continue;
    }
    if (server_pid < 0) server_pid = pid;
    EXPECT_EQ(pid, server_pid) << "one row for the server";
    if (cat == "graph") {
      ++server_graphs;
      EXPECT_EQ(side, "server");
      EXPECT_EQ(str(ev, "name"), "remote_step");
    } else {
      ASSERT_EQ(cat, "node");
      server_nodes.push_back(span);
      if (str(ev, "name") == "linear") {
        ++linear;
        EXPECT_STREQ(str_arg(ev, "module"), "block.0.mlp.fc");
        EXPECT_STREQ(str_arg(ev, "phase"), "prefill");
      }
    }
  }
  cJSON_ArrayForEach(ev, events) {
    if (str(ev, "ph") == "M" && str(ev, "name") == "process_name" && num(ev, "pid") == server_pid)
      server_process = str_arg(ev, "name") ? str_arg(ev, "name") : "";
  }
  ASSERT_EQ(client_graphs.size(), size_t{kRuns});
  EXPECT_EQ(server_graphs, kRuns);
  EXPECT_EQ(linear, kRuns);
  ASSERT_EQ(server_nodes.size(), size_t{2 * kRuns});
  EXPECT_GT(server_pid, 0);
  EXPECT_NE(server_pid, ::getpid());
  EXPECT_NE(server_process.find("tr-server"), std::string::npos) << server_process;
  // Microsecond rounding and the clock reads' own cost.
  const double slack_us = error_us + 50;
  for (const Span& n : server_nodes) {
    bool inside = false;
    for (const Span& c : client_graphs) inside |= n.ts >= c.ts - slack_us && n.end <= c.end + slack_us;
    EXPECT_TRUE(inside) << "server node span [" << n.ts << ", " << n.end
                        << "] lies in no client graph span (error bound " << error_us << " us)";
  }
}

TEST(Trace, NothingIsRecordedOnceStopped) {
  const std::string path = temp_path("stopped");
  ASSERT_GENIE_OK(genie_trace_start(path.c_str()));
  ASSERT_GENIE_OK(genie_trace_stop());
  run_graph(1);
  EXPECT_EQ(genie_trace_stop(), GENIE_OK) << "stopping twice does nothing";
  const std::string text = read_all(path);
  std::remove(path.c_str());
  EXPECT_EQ(text.find("\"cat\":\"node\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"traceEvents\":[]"), std::string::npos) << text;
}

TEST(Trace, BadPathsAreRefused) {
  EXPECT_EQ(genie_trace_start(nullptr), GENIE_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(genie_trace_start(""), GENIE_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(genie_trace_start("/nonexistent-dir/x/trace.json"), GENIE_ERR_IO);
  EXPECT_NE(std::string(genie_last_error()).find("/nonexistent-dir/x/trace.json"), std::string::npos);
  const std::string a = temp_path("a"), b = temp_path("b");
  ASSERT_GENIE_OK(genie_trace_start(a.c_str()));
  EXPECT_EQ(genie_trace_start(a.c_str()), GENIE_OK) << "the same path again";
  EXPECT_EQ(genie_trace_start(b.c_str()), GENIE_ERR_INVALID_ARGUMENT);
  ASSERT_GENIE_OK(genie_trace_stop());
  std::remove(a.c_str());
}

}  // namespace
