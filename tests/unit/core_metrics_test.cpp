// The metrics module (core/metrics.hpp): what it records is what a scrape of
// its HTTP endpoint reads back, in Prometheus's text format.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "core/host.hpp"
#include "core/metrics.hpp"
#include "metrics_testing.hpp"

namespace genie {
namespace {

using genie_testing::sample;
using genie_testing::scrape;

int count_lines(const std::string& text, const std::string& prefix) {
  std::istringstream in(text);
  int n = 0;
  for (std::string line; std::getline(in, line);) n += line.rfind(prefix, 0) == 0;
  return n;
}

TEST(Host, LoopbackAddresses) {
  EXPECT_TRUE(is_loopback("127.0.0.1"));
  EXPECT_TRUE(is_loopback("127.1.2.3"));
  EXPECT_TRUE(is_loopback("::1"));
  EXPECT_TRUE(is_loopback("localhost"));
  EXPECT_FALSE(is_loopback("0.0.0.0"));
  EXPECT_FALSE(is_loopback("::"));
  EXPECT_FALSE(is_loopback("10.0.0.1"));
  EXPECT_FALSE(is_loopback("example.org"));
}

TEST(Metrics, UnsupportedBuildSaysSo) {
  if (metrics::supported()) GTEST_SKIP() << "this build has Prometheus support (the other tests cover it)";
  try {
    metrics::expose("127.0.0.1", 0);
    FAIL() << "expose() served metrics without prometheus-cpp";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), GENIE_ERR_UNSUPPORTED);
    EXPECT_NE(e.detail().find("prometheus-cpp"), std::string::npos) << e.detail();
  }
  EXPECT_FALSE(metrics::on());
  metrics::add(metrics::Id::AuthFailures);  // does nothing, safely
}

class MetricsServed : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!metrics::supported()) GTEST_SKIP() << "built without prometheus-cpp: metrics are not supported";
    exposure_ = metrics::expose("127.0.0.1", 0);
    ASSERT_GT(exposure_->port(), 0);
  }
  std::shared_ptr<metrics::Exposure> exposure_;
};

TEST_F(MetricsServed, RecordedValuesAreScraped) {
  EXPECT_TRUE(metrics::on());
  for (int i = 0; i < 3; ++i) metrics::add(metrics::Id::GraphsSubmitted, {"backward"});
  metrics::graph_finished("backward", true, 2'000'000);    // 2 ms
  metrics::graph_finished("backward", false, 40'000'000);  // 40 ms
  metrics::add(metrics::Id::TensorBytes, {"import", "backward", "kv_cache"}, 1000);
  metrics::add(metrics::Id::TensorBytes, {"import", "backward", "kv_cache"}, 24);
  metrics::add(metrics::Id::TensorBytes, {"import", "backward", "kv_cache"}, -5);  // ignored
  const std::string text = scrape(exposure_->port());
  ASSERT_NE(text.find("200 OK"), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE genie_graphs_submitted_total counter"), std::string::npos);
  EXPECT_NE(text.find("# TYPE genie_graph_duration_seconds histogram"), std::string::npos);
  EXPECT_EQ(sample(text, "genie_graphs_submitted_total{phase=\"backward\"}"), 3);
  EXPECT_EQ(sample(text, "genie_graphs_completed_total{phase=\"backward\"}"), 1);
  EXPECT_EQ(sample(text, "genie_graphs_failed_total{phase=\"backward\"}"), 1);
  EXPECT_EQ(sample(text, "genie_graph_duration_seconds_count{phase=\"backward\"}"), 2);
  EXPECT_NEAR(sample(text, "genie_graph_duration_seconds_sum{phase=\"backward\"}"), 0.042, 1e-9);
  // 2 ms falls in the 2.5 ms bucket, 40 ms only from the 50 ms one.
  EXPECT_EQ(sample(text, "genie_graph_duration_seconds_bucket{phase=\"backward\",le=\"0.0025\"}"), 1);
  EXPECT_EQ(sample(text, "genie_graph_duration_seconds_bucket{phase=\"backward\",le=\"0.05\"}"), 2);
  EXPECT_EQ(
      sample(text, "genie_tensor_bytes_total{direction=\"import\",phase=\"backward\",role=\"kv_cache\"}"),
      1024);
}

// A cell resolved once (a hot path's handle) and the lookup by label values
// reach the same series; adds from several threads are all counted.
TEST_F(MetricsServed, HeldCellsAndLookupsShareTheSeries) {
  metrics::Counter& held = metrics::counter(metrics::Id::TensorBytes, {"read", "decode", "weight"});
  const uint64_t before = held.value();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&held, t] {
      for (int i = 0; i < 1000; ++i) {
        if (t % 2 == 0)
          held.add(2);
        else
          metrics::add(metrics::Id::TensorBytes, {"read", "decode", "weight"}, 2);
      }
    });
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(held.value() - before, 8000u);
  EXPECT_EQ(sample(scrape(exposure_->port()),
                   "genie_tensor_bytes_total{direction=\"read\",phase=\"decode\",role=\"weight\"}"),
            static_cast<double>(held.value()));
  // Another label set is another series, even where the thread's cache
  // holds the first one.
  metrics::add(metrics::Id::TensorBytes, {"read", "decode", "weights"}, 5);
  EXPECT_EQ(sample(scrape(exposure_->port()),
                   "genie_tensor_bytes_total{direction=\"read\",phase=\"decode\",role=\"weights\"}"),
            5);
  // A histogram's buckets count up to and including their bound.
  metrics::Histogram& h = metrics::histogram(metrics::Id::CostModelRatio);
  h.observe(1.25);
  h.observe(1.3);
  const std::string text = scrape(exposure_->port());
  EXPECT_EQ(sample(text, "genie_cost_model_ratio_bucket{le=\"1.25\"}"), 1);
  EXPECT_EQ(sample(text, "genie_cost_model_ratio_bucket{le=\"1.5\"}"), 2);
  EXPECT_EQ(sample(text, "genie_cost_model_ratio_bucket{le=\"+Inf\"}"), 2);
  EXPECT_NEAR(sample(text, "genie_cost_model_ratio_sum"), 2.55, 1e-9);
  // A counter's id asked for as a histogram is refused.
  try {
    metrics::histogram(metrics::Id::Heartbeats);
    FAIL() << "a counter resolved as a histogram";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), GENIE_ERR_INVALID_ARGUMENT);
  }
}

TEST_F(MetricsServed, LabelValuesAreBounded) {
  for (int i = 0; i < 300; ++i)
    metrics::add(metrics::Id::TransportBytes, {("t" + std::to_string(i)).c_str(), "sent"}, 1);
  const std::string text = scrape(exposure_->port());
  const int series = count_lines(text, "genie_transport_bytes_total{");
  EXPECT_LE(series, 257) << "one cell per label value past the cap";
  EXPECT_GE(sample(text, "genie_transport_bytes_total{direction=\"other\",transport=\"other\"}"), 1);
}

TEST_F(MetricsServed, CollectorsAreMergedAndRemoved) {
  auto family = [](double v) {
    return std::vector<metrics::Family>{{"genie_test_merged", "test", false, {{{{"k", "v"}}, v}}}};
  };
  auto a = metrics::add_collector([&] { return family(2); });
  auto b = metrics::add_collector([&] { return family(3); });
  EXPECT_EQ(sample(scrape(exposure_->port()), "genie_test_merged{k=\"v\"}"), 5);
  b.reset();
  EXPECT_EQ(sample(scrape(exposure_->port()), "genie_test_merged{k=\"v\"}"), 2);
  a.reset();
  EXPECT_EQ(sample(scrape(exposure_->port()), "genie_test_merged{k=\"v\"}"), -1);
  // A collector that throws is left out of that scrape; the others stay.
  auto bad =
      metrics::add_collector([]() -> std::vector<metrics::Family> { throw std::runtime_error("boom"); });
  auto good = metrics::add_collector([&] { return family(7); });
  EXPECT_EQ(sample(scrape(exposure_->port()), "genie_test_merged{k=\"v\"}"), 7);
}

TEST_F(MetricsServed, OneEndpointPerProcess) {
  const int port = exposure_->port();
  EXPECT_EQ(metrics::expose("127.0.0.1", 0)->port(), port);     // port 0 shares it
  EXPECT_EQ(metrics::expose("127.0.0.1", port)->port(), port);  // so does the same port
  try {
    metrics::expose("127.0.0.1", port == 65535 ? 65534 : port + 1);
    FAIL() << "a second endpoint on another port";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), GENIE_ERR_INVALID_ARGUMENT);
    EXPECT_NE(e.detail().find("already served"), std::string::npos) << e.detail();
  }
  exposure_.reset();
  EXPECT_EQ(scrape(port), "") << "the endpoint closes with its last handle";
  // And can be served again.
  auto again = metrics::expose("127.0.0.1", 0);
  EXPECT_NE(scrape(again->port()).find("200 OK"), std::string::npos);
}

TEST_F(MetricsServed, BadAddressesAreRefused) {
  for (int port : {-1, 65536}) {
    try {
      metrics::expose("127.0.0.1", port);
      FAIL() << "port " << port << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), GENIE_ERR_INVALID_ARGUMENT);
    }
  }
  // A port in use is an IO error naming the address (with no endpoint of
  // this process in the way).
  exposure_.reset();
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  const int busy = ntohs(a.sin_port);
  try {
    metrics::expose("127.0.0.1", busy);
    FAIL() << "port " << busy << " in use was served";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), GENIE_ERR_IO);
    EXPECT_NE(e.detail().find("127.0.0.1:" + std::to_string(busy)), std::string::npos) << e.detail();
  }
  close(fd);
}

}  // namespace
}  // namespace genie
