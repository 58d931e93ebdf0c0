// Metrics through the C API: genie_config_set_metrics_port / _addr on a
// server and on an embedded context, genie_server_metrics_port, and what a
// scrape of the endpoint then shows.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sstream>
#include <string>

#include "genie.h"
#include "metrics_testing.hpp"

namespace {

#define ASSERT_GENIE_OK(call) ASSERT_EQ((call), GENIE_OK) << #call << ": " << genie_last_error()

using genie_testing::sample;
using genie_testing::scrape;

struct Config {
  genie_config_t* c = nullptr;
  Config() {
    EXPECT_EQ(genie_config_create(&c), GENIE_OK);
    EXPECT_EQ(genie_config_set_use_env(c, 0), GENIE_OK);
  }
  ~Config() { genie_config_destroy(c); }
};

TEST(CapiMetrics, SettersCheckTheirValues) {
  Config cfg;
  EXPECT_EQ(genie_config_set_metrics_port(cfg.c, -2), GENIE_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(genie_config_set_metrics_port(cfg.c, 65536), GENIE_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(genie_config_set_metrics_port(nullptr, 0), GENIE_ERR_INVALID_HANDLE);
  EXPECT_EQ(genie_config_set_metrics_addr(cfg.c, std::string(300, 'a').c_str()), GENIE_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(genie_config_set_metrics_port(cfg.c, -1), GENIE_OK);
  EXPECT_EQ(genie_config_set_metrics_addr(cfg.c, nullptr), GENIE_OK);
}

TEST(CapiMetrics, OffUnlessAsked) {
  Config cfg;
  genie_server_t* s = nullptr;
  ASSERT_GENIE_OK(genie_server_create(cfg.c, "127.0.0.1", 0, &s));
  int32_t port = 0;
  ASSERT_GENIE_OK(genie_server_metrics_port(s, &port));
  EXPECT_EQ(port, -1);
  EXPECT_EQ(genie_server_metrics_port(s, nullptr), GENIE_ERR_INVALID_ARGUMENT);
  genie_server_destroy(s);
}

TEST(CapiMetrics, BeyondLoopbackNeedsAuthentication) {
  Config cfg;
  ASSERT_GENIE_OK(genie_config_set_metrics_port(cfg.c, 0));
  ASSERT_GENIE_OK(genie_config_set_metrics_addr(cfg.c, "0.0.0.0"));
  genie_server_t* s = nullptr;
  EXPECT_EQ(genie_server_create(cfg.c, "127.0.0.1", 0, &s), GENIE_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(s, nullptr);
  EXPECT_NE(std::string(genie_last_error()).find("refusing to serve metrics on 0.0.0.0"), std::string::npos)
      << genie_last_error();
  genie_context_t* ctx = nullptr;
  EXPECT_EQ(genie_init(cfg.c, &ctx), GENIE_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ctx, nullptr);
}

// The per-session quotas as the server applies them, beside its budget.
TEST(CapiMetrics, SessionQuotasAreGauges) {
  if (!genie_metrics_supported()) GTEST_SKIP() << "built without prometheus-cpp: metrics are not supported";
  Config cfg;
  ASSERT_GENIE_OK(genie_config_set_metrics_port(cfg.c, 0));
  ASSERT_GENIE_OK(genie_config_set_session_quota(cfg.c, 1 << 20, 100, 0));
  genie_server_t* s = nullptr;
  ASSERT_GENIE_OK(genie_server_create(cfg.c, "127.0.0.1", 0, &s));
  int32_t port = 0;
  ASSERT_GENIE_OK(genie_server_metrics_port(s, &port));
  const std::string text = scrape(port);
  EXPECT_EQ(sample(text, "genie_session_quota_bytes"), 1 << 20) << text.substr(0, 400);
  EXPECT_EQ(sample(text, "genie_session_quota_tensors"), 100);
  EXPECT_EQ(sample(text, "genie_session_quota_graphs"), 256) << "0 keeps the default";
  genie_server_destroy(s);
}

TEST(CapiMetrics, ServersAndContextsOfOneProcessShareTheEndpoint) {
  if (!genie_metrics_supported()) {
    Config cfg;
    ASSERT_GENIE_OK(genie_config_set_metrics_port(cfg.c, 0));
    genie_server_t* s = nullptr;
    EXPECT_EQ(genie_server_create(cfg.c, "127.0.0.1", 0, &s), GENIE_ERR_UNSUPPORTED);
    GTEST_SKIP() << "built without prometheus-cpp: metrics are not supported (" << genie_last_error() << ")";
  }
  Config cfg;
  ASSERT_GENIE_OK(genie_config_set_metrics_port(cfg.c, 0));
  genie_server_t *a = nullptr, *b = nullptr;
  ASSERT_GENIE_OK(genie_server_create(cfg.c, "127.0.0.1", 0, &a));
  ASSERT_GENIE_OK(genie_server_create(cfg.c, nullptr, 0, &b));
  int32_t pa = 0, pb = 0;
  ASSERT_GENIE_OK(genie_server_metrics_port(a, &pa));
  ASSERT_GENIE_OK(genie_server_metrics_port(b, &pb));
  EXPECT_GT(pa, 0);
  EXPECT_EQ(pa, pb);
  std::string text = scrape(pa);
  EXPECT_EQ(sample(text, "genie_sessions"), 0) << text.substr(0, 400);
  EXPECT_GT(sample(text, "genie_memory_budget_bytes"), 0);
  EXPECT_EQ(sample(text, "genie_cluster_nodes{state=\"alive\"}"), 0);

  // An embedded context asking for the same endpoint shares it, and its
  // runs are timed by op.
  genie_context_t* ctx = nullptr;
  ASSERT_GENIE_OK(genie_init(cfg.c, &ctx));
  genie_graph_t* g = nullptr;
  const int64_t shape[1] = {16};
  const char* in[1] = {"x"};
  const char* out[1] = {"y"};
  ASSERT_GENIE_OK(genie_graph_create("one_relu", &g));
  ASSERT_GENIE_OK(genie_graph_add_input(g, "x", GENIE_DTYPE_F32, shape, 1));
  ASSERT_GENIE_OK(genie_graph_add_node(g, "relu", "act", in, 1, out, 1));
  ASSERT_GENIE_OK(genie_graph_mark_output(g, "y"));
  genie_tensor_t* x = nullptr;
  ASSERT_GENIE_OK(genie_tensor_alloc(ctx, GENIE_DTYPE_F32, shape, 1, "cpu", &x));
  const double before = sample(scrape(pa), "genie_op_duration_seconds_count{op=\"relu\"}");
  for (int i = 0; i < 4; ++i) {
    genie_future_t* f = nullptr;
    ASSERT_GENIE_OK(genie_graph_submit(ctx, g, in, &x, 1, &f));
    ASSERT_GENIE_OK(genie_future_wait(f, -1));
    genie_future_destroy(f);
  }
  EXPECT_EQ(sample(scrape(pa), "genie_op_duration_seconds_count{op=\"relu\"}"), (before < 0 ? 0 : before) + 4);
  genie_tensor_destroy(x);
  genie_graph_destroy(g);
  genie_shutdown(ctx);

  // Another port while this one is served: refused, naming it.
  Config other;
  ASSERT_GENIE_OK(genie_config_set_metrics_port(other.c, pa == 65535 ? 65534 : pa + 1));
  genie_server_t* c = nullptr;
  EXPECT_EQ(genie_server_create(other.c, "127.0.0.1", 0, &c), GENIE_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(genie_last_error()).find("already served"), std::string::npos) << genie_last_error();
  genie_server_destroy(a);
  genie_server_destroy(b);
  EXPECT_EQ(scrape(pa), "") << "the endpoint closes with its last server";
}

}  // namespace
