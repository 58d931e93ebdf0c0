// Transport names in the configuration: GENIE_TRANSPORT (the data
// connections' transport a client demands) and GENIE_SERVE_TRANSPORTS (the
// data transports a server offers besides TCP).
#include <gtest/gtest.h>

#include <cstdlib>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/config.hpp"
#include "core/error.hpp"

namespace genie {
namespace {

struct EnvGuard {
  explicit EnvGuard(const char* n, const char* v) : name(n) { ::setenv(n, v, 1); }
  ~EnvGuard() { ::unsetenv(name); }
  const char* name;
};

genie_status_t apply_status(std::string* detail) {
  try {
    Config c;
    c.apply_env();
    return GENIE_OK;
  } catch (const Error& e) {
    *detail = e.detail();
    return e.code();
  }
}

// Each of `bad` as the value of `var` is INVALID_ARGUMENT naming `var`.
void expect_refused(const char* var, std::initializer_list<const char*> bad) {
  for (const char* v : bad) {
    EnvGuard e(var, v);
    std::string detail;
    EXPECT_EQ(apply_status(&detail), GENIE_ERR_INVALID_ARGUMENT) << var << "=" << v;
    EXPECT_NE(detail.find(var), std::string::npos) << detail;
  }
}

TEST(CoreConfig, TransportFromTheEnvironment) {
  EnvGuard t("GENIE_TRANSPORT", "loopback");
  EnvGuard s("GENIE_SERVE_TRANSPORTS", "loopback,ucx");
  Config c;
  c.apply_env();
  EXPECT_EQ(c.transport, "loopback");
  EXPECT_EQ(c.serve_transports, (std::vector<std::string>{"loopback", "ucx"}));
  EXPECT_NO_THROW(c.validate());
}

TEST(CoreConfig, BadTransportNamesAreInvalidArgumentsNamingTheVariable) {
  for (const char* bad : {"Loopback", "tcp/1", "a b", "../x"}) {
    EnvGuard t("GENIE_TRANSPORT", bad);
    std::string detail;
    EXPECT_EQ(apply_status(&detail), GENIE_ERR_INVALID_ARGUMENT) << bad;
    EXPECT_NE(detail.find("GENIE_TRANSPORT"), std::string::npos) << detail;
    EXPECT_NE(detail.find(bad), std::string::npos) << detail;
  }
  EnvGuard s("GENIE_SERVE_TRANSPORTS", "loopback,,ucx");
  std::string detail;
  EXPECT_EQ(apply_status(&detail), GENIE_ERR_INVALID_ARGUMENT);
  EXPECT_NE(detail.find("GENIE_SERVE_TRANSPORTS"), std::string::npos) << detail;
  Config c;
  c.transport = "UPPER";
  EXPECT_THROW(c.validate(), Error);
}

TEST(CoreConfig, TlsFilesFromTheEnvironment) {
  EnvGuard ca("GENIE_TLS_CA", "/etc/genie/ca.pem");
  EnvGuard name("GENIE_TLS_SERVER_NAME", "gpu1.example");
  {
    EnvGuard cert("GENIE_TLS_CERT", "/etc/genie/node.pem");
    EnvGuard key("GENIE_TLS_KEY", "/etc/genie/node.key");
    Config c;
    c.apply_env();
    EXPECT_EQ(c.tls_ca, "/etc/genie/ca.pem");
    EXPECT_EQ(c.tls_cert, "/etc/genie/node.pem");
    EXPECT_EQ(c.tls_key, "/etc/genie/node.key");
    EXPECT_EQ(c.tls_server_name, "gpu1.example");
    EXPECT_NO_THROW(c.validate());
  }
  // A certificate without its key is refused by validate(), naming both.
  EnvGuard cert("GENIE_TLS_CERT", "/etc/genie/node.pem");
  Config c;
  c.apply_env();
  try {
    c.validate();
    ADD_FAILURE() << "a certificate without its key was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), GENIE_ERR_INVALID_ARGUMENT);
    EXPECT_NE(e.detail().find("GENIE_TLS_KEY"), std::string::npos) << e.detail();
  }
}

}  // namespace
TEST(CoreConfig, MetricsEndpointFromTheEnvironment) {
  Config d;
  EXPECT_EQ(d.metrics_port, -1);  // off unless asked
  EXPECT_EQ(d.metrics_addr, "127.0.0.1");
  {
    EnvGuard p("GENIE_METRICS_PORT", "9464");
    EnvGuard a("GENIE_METRICS_ADDR", "::1");
    Config c;
    c.apply_env();
    EXPECT_EQ(c.metrics_port, 9464);
    EXPECT_EQ(c.metrics_addr, "::1");
    EXPECT_NO_THROW(c.validate());
  }
  expect_refused("GENIE_METRICS_PORT", {"-2", "65536", "http", "80x"});
  Config c;
  c.metrics_port = 70000;
  EXPECT_THROW(c.validate(), Error);
}

TEST(CoreConfig, MemoryBudgetAndSessionQuotasFromTheEnvironment) {
  Config d;
  EXPECT_EQ(d.memory_budget_bytes, 0);  // 0: from available memory and the cgroup limit
  EXPECT_EQ(d.session_max_tensors, Config::kDefaultSessionMaxTensors);
  {
    EnvGuard b("GENIE_MEMORY_BUDGET", "1073741824");
    EnvGuard q("GENIE_SESSION_MAX_BYTES", "4096");
    EnvGuard t("GENIE_SESSION_MAX_TENSORS", "7");
    EnvGuard g("GENIE_SESSION_MAX_GRAPHS", "3");
    Config c;
    c.apply_env();
    EXPECT_EQ(c.memory_budget_bytes, 1073741824);
    EXPECT_EQ(c.session_max_bytes, 4096);
    EXPECT_EQ(c.session_max_tensors, 7);
    EXPECT_EQ(c.session_max_graphs, 3);
    EXPECT_NO_THROW(c.validate());
  }
  for (const char* var : {"GENIE_MEMORY_BUDGET", "GENIE_SESSION_MAX_BYTES", "GENIE_SESSION_MAX_TENSORS",
                          "GENIE_SESSION_MAX_GRAPHS"})
    expect_refused(var, {"-1", "1e300", "12MB", "99999999999999999999"});
  Config c;
  c.session_max_bytes = -5;
  EXPECT_THROW(c.validate(), Error);
}

TEST(CoreConfig, GraphLimitsAndStageTimeoutFromTheEnvironment) {
  Config d;
  EXPECT_EQ(d.max_graph_bytes, Config::kDefaultMaxGraphBytes);
  EXPECT_EQ(d.max_graph_nodes, Config::kDefaultMaxGraphNodes);
  EXPECT_EQ(d.stage_timeout_ms, 600000);
  {
    EnvGuard b("GENIE_MAX_GRAPH_BYTES", "0");  // no limit
    EnvGuard n("GENIE_MAX_GRAPH_NODES", "200000");
    EnvGuard t("GENIE_STAGE_TIMEOUT", "1500");
    Config c;
    c.apply_env();
    EXPECT_EQ(c.max_graph_bytes, 0);
    EXPECT_EQ(c.max_graph_nodes, 200000);
    EXPECT_EQ(c.stage_timeout_ms, 1500);
    EXPECT_NO_THROW(c.validate());
  }
  for (const char* var : {"GENIE_MAX_GRAPH_BYTES", "GENIE_MAX_GRAPH_NODES"})
    expect_refused(var, {"-1", "2e9", "1099511627777", "lots"});
  expect_refused("GENIE_STAGE_TIMEOUT", {"0", "9", "86400001", "-5", "10s"});
  Config c;
  c.stage_timeout_ms = 0;
  EXPECT_THROW(c.validate(), Error);
  c.stage_timeout_ms = 1000;
  c.max_graph_nodes = -1;
  EXPECT_THROW(c.validate(), Error);
}

}  // namespace genie

namespace genie {
namespace {

TEST(CoreConfig, EtcdSettingsFromTheEnvironment) {
  {
    EnvGuard e("GENIE_ETCD_ENDPOINTS", "http://127.0.0.1:2379,10.0.0.2:2379");
    EnvGuard c("GENIE_CLUSTER", "prod-1");
    EnvGuard t("GENIE_ETCD_LEASE_TTL", "2000");
    Config cfg;
    EXPECT_EQ(cfg.cluster, "default");
    cfg.apply_env();
    EXPECT_EQ(cfg.etcd_endpoints, (std::vector<std::string>{"http://127.0.0.1:2379", "10.0.0.2:2379"}));
    EXPECT_EQ(cfg.cluster, "prod-1");
    EXPECT_EQ(cfg.etcd_lease_ttl_ms, 2000);
    EXPECT_NO_THROW(cfg.validate());
  }
  const std::pair<const char*, const char*> bad[] = {{"GENIE_ETCD_ENDPOINTS", "http://a:1,,http://b:2"},
                                                     {"GENIE_ETCD_ENDPOINTS", "http://a b"},
                                                     {"GENIE_CLUSTER", "a/b"},
                                                     {"GENIE_ETCD_LEASE_TTL", "999"},
                                                     {"GENIE_ETCD_LEASE_TTL", "2s"}};
  for (const auto& [var, value] : bad) {
    EnvGuard g(var, value);
    std::string detail;
    EXPECT_EQ(apply_status(&detail), GENIE_ERR_INVALID_ARGUMENT) << var << "=" << value;
    EXPECT_NE(detail.find(var), std::string::npos) << detail;
  }
}

}  // namespace
}  // namespace genie
