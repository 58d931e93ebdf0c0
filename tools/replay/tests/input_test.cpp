// What replay reads from traces and files from the wild: metadata as
// converters write it (chakra.cpp), repaired dependencies and CPU-side
// collectives (repair.cpp), ASTRA-sim's network file and communicator
// groups (config.cpp).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "chakra.hpp"
#include "config.hpp"
#include "core/error.hpp"
#include "repair.hpp"

namespace genie::replay {
namespace {

// Protobuf writing, just enough for GlobalMetadata and its attributes.
std::string varint(uint64_t v) {
  std::string out;
  do {
    uint8_t b = v & 0x7f;
    v >>= 7;
    out.push_back(static_cast<char>(v ? b | 0x80 : b));
  } while (v);
  return out;
}
std::string field(uint32_t f, const std::string& payload) { return varint(f << 3 | 2) + varint(payload.size()) + payload; }
std::string string_attr(const std::string& name, const std::string& value) {
  return field(1, name) + field(29, value);
}
std::string stream_of(const std::string& metadata) { return varint(metadata.size()) + metadata; }

TEST(ReplayInput, MetadataWithoutVersionIsReadWithItsSchema) {
  const Trace t = parse_trace(
      "s.0.et", stream_of(field(2, string_attr("schema", "1.0.2-chakra.0.0.4")) + field(2, string_attr("time", "x"))));
  EXPECT_EQ(t.version, "");
  EXPECT_EQ(t.schema, "1.0.2-chakra.0.0.4");
  EXPECT_EQ(t.metadata.at("time").s, "x");
  EXPECT_TRUE(t.warnings.empty());
}

TEST(ReplayInput, AnUnknownSchemaOrNoneIsAWarning) {
  const Trace u = parse_trace("u.0.et", stream_of(field(2, string_attr("schema", "7.0-other"))));
  ASSERT_EQ(u.warnings.size(), 1u);
  EXPECT_NE(u.warnings[0].find("schema '7.0-other' is not the one"), std::string::npos) << u.warnings[0];
  const Trace e = parse_trace("e.0.et", stream_of(""));
  ASSERT_EQ(e.warnings.size(), 1u);
  EXPECT_NE(e.warnings[0].find("neither a version nor a schema"), std::string::npos);
  const Trace v = parse_trace("v.0.et", stream_of(field(1, "0.0.4")));
  EXPECT_TRUE(v.warnings.empty());
}

Node make(uint64_t id, std::vector<uint64_t> data, std::vector<uint64_t> ctrl, NodeType type = NodeType::Comp) {
  Node n;
  n.id = id;
  n.name = "n" + std::to_string(id);
  n.type = type;
  n.data_deps = std::move(data);
  n.ctrl_deps = std::move(ctrl);
  return n;
}

// Whether every node can run: each dependency exists, and they form no cycle.
bool runs_in_order(const Trace& t) {
  std::map<uint64_t, bool> done;
  for (const Node& n : t.nodes) done[n.id] = false;
  for (size_t pass = 0; pass < t.nodes.size(); ++pass)
    for (const Node& n : t.nodes) {
      bool ready = true;
      for (const auto* list : {&n.data_deps, &n.ctrl_deps})
        for (uint64_t d : *list) ready = ready && done.count(d) && done[d] && d != n.id;
      if (ready) done[n.id] = true;
    }
  return std::all_of(done.begin(), done.end(), [](const auto& kv) { return kv.second; });
}

size_t deps(const Trace& t) {
  size_t n = 0;
  for (const Node& x : t.nodes) n += x.data_deps.size() + x.ctrl_deps.size();
  return n;
}

TEST(ReplayInput, RepairDropsDanglingAndSelfDependenciesWithCounts) {
  Trace t;
  t.path = "t.0.et";
  t.nodes = {make(1, {}, {999, 998}), make(2, {1, 77}, {2})};
  repair_trace(t, ControlDeps::Repair);
  EXPECT_TRUE(runs_in_order(t));
  EXPECT_EQ(t.nodes[1].data_deps, std::vector<uint64_t>{1});
  ASSERT_EQ(t.warnings.size(), 2u);
  EXPECT_NE(t.warnings[0].find("dropped 3 dependencies on nodes the file does not have (2 control, 1 data; the "
                               "first: node 1 'n1' on node 999)"),
            std::string::npos)
      << t.warnings[0];
  EXPECT_NE(t.warnings[1].find("dropped 1 dependency of a node on itself (1 control, 0 data"), std::string::npos);
}

TEST(ReplayInput, RepairBreaksACycleAtItsControlDependency) {
  // 1 -> 2 -> 3 -> 1, only 3's dependency on 1 a control one; 4 waits on
  // the cycle through data.
  Trace t;
  t.nodes = {make(1, {2}, {}), make(2, {3}, {}), make(3, {}, {1}), make(4, {3}, {})};
  repair_trace(t, ControlDeps::Repair);
  EXPECT_TRUE(runs_in_order(t));
  EXPECT_EQ(deps(t), 3u);  // one dropped
  EXPECT_TRUE(t.nodes[2].ctrl_deps.empty());
  ASSERT_EQ(t.warnings.size(), 1u);
  EXPECT_NE(t.warnings[0].find("dropped the control dependency of node 3 on node 1"), std::string::npos)
      << t.warnings[0];
}

TEST(ReplayInput, RepairBreaksEveryCycleAndNamesTheFirstThree) {
  // Five separate data cycles of two nodes each, and a chain after them.
  Trace t;
  for (uint64_t k = 0; k < 5; ++k) {
    t.nodes.push_back(make(10 * k + 1, {10 * k + 2}, {}));
    t.nodes.push_back(make(10 * k + 2, {10 * k + 1}, {}));
  }
  t.nodes.push_back(make(100, {1, 11, 21, 31, 41}, {}));
  repair_trace(t, ControlDeps::Repair);
  EXPECT_TRUE(runs_in_order(t));
  EXPECT_EQ(deps(t), 5u + 5u);
  ASSERT_EQ(t.warnings.size(), 1u);
  EXPECT_NE(t.warnings[0].find("broke 5 dependency cycles"), std::string::npos) << t.warnings[0];
  EXPECT_NE(t.warnings[0].find("; and 2 more"), std::string::npos) << t.warnings[0];
}

TEST(ReplayInput, IgnoreFollowsDataDependenciesOnly) {
  Trace t;
  t.nodes = {make(1, {}, {2}), make(2, {1}, {999})};
  repair_trace(t, ControlDeps::Ignore);
  EXPECT_TRUE(t.warnings.empty());
  EXPECT_TRUE(t.nodes[0].ctrl_deps.empty() && t.nodes[1].ctrl_deps.empty());
  EXPECT_EQ(t.nodes[1].data_deps, std::vector<uint64_t>{1});
}

TEST(ReplayInput, StrictChangesNothingButCpuCollectives) {
  Trace t;
  t.nodes = {make(1, {}, {1, 999}), make(2, {}, {}, NodeType::CommColl), make(3, {}, {}, NodeType::CommColl),
             make(4, {}, {}, NodeType::CommColl)};
  t.nodes[1].attrs["is_cpu_op"].has_int = true;
  t.nodes[1].attrs["is_cpu_op"].i = 1;
  t.nodes[2].attrs["is_cpu_op"].has_int = true;  // a GPU collective without comm_type: left for validation
  t.nodes[3].attrs["is_cpu_op"] = t.nodes[1].attrs["is_cpu_op"];
  t.nodes[3].attrs["comm_type"].has_int = true;  // a CPU collective with comm_type: a collective
  repair_trace(t, ControlDeps::Strict);
  EXPECT_EQ(t.nodes[0].ctrl_deps, (std::vector<uint64_t>{1, 999}));
  EXPECT_EQ(t.nodes[1].type, NodeType::Comp);
  EXPECT_EQ(t.nodes[2].type, NodeType::CommColl);
  EXPECT_EQ(t.nodes[3].type, NodeType::CommColl);
  ASSERT_EQ(t.warnings.size(), 1u);
  EXPECT_NE(t.warnings[0].find("1 COMM_COLL_NODE with is_cpu_op and no comm_type"), std::string::npos);
}

TEST(ReplayInput, PgNameAsAStringOrAnInteger) {
  Node n = make(1, {}, {}, NodeType::CommColl);
  EXPECT_EQ(n.pg_name(), "");
  n.attrs["pg_name"].s = "tp0";
  EXPECT_EQ(n.pg_name(), "tp0");
  n.attrs["pg_name"] = Attr{};
  n.attrs["pg_name"].has_int = true;
  n.attrs["pg_name"].i = 3;
  EXPECT_EQ(n.pg_name(), "3");
}

// A file in the test's temporary folder, removed at the end.
class TempFile {
 public:
  explicit TempFile(const std::string& content) {
    char name[] = "/tmp/genie-replay-input-XXXXXX";
    const int fd = mkstemp(name);
    if (fd < 0) std::abort();
    path_ = name;
    if (write(fd, content.data(), content.size()) != static_cast<ssize_t>(content.size())) std::abort();
    close(fd);
  }
  ~TempFile() { unlink(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(ReplayInput, NetworkFileNpusCountInEachYamlForm) {
  const std::map<std::string, std::vector<int>> cases = {
      {"topology: [ Ring ]\nnpus_count: [ 8 ]  # NPUs\nbandwidth: [ 50.0 ]\n", {8}},
      {"npus_count: [4, 2]\n", {4, 2}},
      {"npus_count: [ 4,\n  2,\n  2 ]\n", {4, 2, 2}},
      {"topology:\n  - Ring\nnpus_count:\n  - 2\n  - 4\nlatency:\n  - 1\n", {2, 4}},
      {"npus_count: 16\n", {16}},
  };
  for (const auto& [yaml, dims] : cases) {
    TempFile f(yaml);
    EXPECT_EQ(load_network(f.path()).dims, dims) << yaml;
  }
  for (const std::string bad : {"topology: [ Ring ]\n", "npus_count: [ 0 ]\n", "npus_count: [ four ]\n",
                                "npus_count: [ 4\n", "npus_count: []\n"}) {
    TempFile f(bad);
    EXPECT_THROW(load_network(f.path()), Error) << bad;
  }
}

TEST(ReplayInput, CommunicatorGroups) {
  TempFile ok(R"({"1": [0, 2, 4, 6], "0": [1, 3, 5, 7]})");
  const CommGroups g = load_comm_groups(ok.path(), 8);
  EXPECT_EQ(g.groups.at("1"), (std::vector<int>{0, 2, 4, 6}));
  EXPECT_EQ(g.index("0"), 1u);
  EXPECT_EQ(g.index("1"), 2u);
  for (const std::string bad : {R"({"0": [0, 8]})", R"({"0": [1, 1]})", R"({"0": []})", R"({"0": [0.5]})", "{}",
                                R"(["0"])"}) {
    TempFile f(bad);
    EXPECT_THROW(load_comm_groups(f.path(), 8), Error) << bad;
  }
}

}  // namespace
}  // namespace genie::replay
