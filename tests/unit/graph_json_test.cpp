// JSON codec: exact round trips, the documented encoding, and every kind of
// malformed input answered with the right status and a JSON path.
#include <cjson/cJSON.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "graph_test_util.hpp"

namespace genie {
namespace {

using testing::fails_with;
using testing::tensor;

constexpr double kInf = std::numeric_limits<double>::infinity();

template <class T>
TensorPtr filled(DType dtype, Shape shape, std::initializer_list<T> values) {
  auto t = tensor(dtype, std::move(shape));
  std::memcpy(t->bytes(), std::data(values), values.size() * sizeof(T));
  return t;
}

// Uses every dtype, every attribute type an op takes, integers beyond 2^53,
// NaN, infinities and -0.0, omitted inputs, several outputs, annotations and
// roles, a dynamic input and awkward strings.
Graph everything() {
  Graph g("every thing ü");
  g.add_input("tokens", DType::I64, {-1, 8});
  g.add_input("hidden", DType::BF16, {2, 8, 16});
  g.add_input("flags", DType::Bool, {2, 8});
  auto table = tensor(DType::F16, {32, 16});
  for (size_t i = 0; i < table->nbytes(); ++i) table->bytes()[i] = static_cast<std::byte>(i * 7);
  g.add_constant("table", table);
  g.add_constant("f32", filled<float>(DType::F32, {5}, {1.f, -0.f, HUGE_VALF, std::nanf("7"), 1e-45f}));
  g.add_constant("f16", filled<uint16_t>(DType::F16, {3}, {0x3c00, 0x7c01, 0x8001}));
  g.add_constant("bf16", filled<uint16_t>(DType::BF16, {2}, {0x3f80, 0xff81}));
  g.add_constant("i32", filled<int32_t>(DType::I32, {2}, {INT32_MIN, -1}));
  g.add_constant("i64", filled<int64_t>(DType::I64, {3}, {INT64_MIN, INT64_MAX, 0}));
  g.add_constant("bool", filled<uint8_t>(DType::Bool, {2, 2}, {0, 1, 1, 0}));
  g.add_constant("empty", tensor(DType::F32, {0, 3}));
  g.add_constant("scalar", filled<float>(DType::F32, {}, {0.5f}));

  g.add_node("embedding", "embed", {"tokens", "table"}, {"e"});
  g.node(g.find_node("embed")).ann = {Phase::Prefill, "model.embed \"tok\" \\ \t", 0, Modality::Text};
  g.add_node("cast", "to_f16", {"hidden"}, {"h"});
  g.set_attr("to_f16", "dtype", std::string("f16"));
  g.add_node("add", "sum", {"e", "h"}, {"s"});
  g.node(g.find_node("sum")).ann.layer = 3;
  g.add_node("reshape", "mask3", {"flags"}, {"m3"});
  g.set_attr("mask3", "shape", std::vector<int64_t>{2, 8, 1});
  g.add_node("masked_fill", "fill2", {"s", "m3"}, {"f2"});
  g.set_attr("fill2", "value", 2.0);
  g.add_node("masked_fill", "fill_ninf", {"f2", "m3"}, {"fi"});
  g.set_attr("fill_ninf", "value", -kInf);
  g.add_node("masked_fill", "fill_nan", {"fi", "m3"}, {"fn"});
  g.set_attr("fill_nan", "value", std::nan(""));
  g.add_node("dropout", "drop", {"fn"}, {"d"});
  g.set_attr("drop", "p", -0.0);
  g.add_node("layer_norm", "ln", {"d", "", ""}, {"n"});
  g.set_attr("ln", "eps", 1e-300);
  g.add_node("rms_norm", "rms", {"n", ""}, {"rn"});
  g.set_attr("rms", "eps", 5e-324);
  g.add_node("attention", "attn", {"rn", "rn", "rn", ""}, {"at"});
  g.set_attr("attn", "causal", int64_t{1});
  g.set_attr("attn", "scale", 0.1);
  g.node(g.find_node("attn")).ann = {Phase::Decode, "model.layers.0.attn", 0, Modality::Vision};
  g.add_node("slice", "all", {"at"}, {"sl"});
  g.set_attr("all", "axis", int64_t{-1});
  g.set_attr("all", "start", INT64_MIN);
  g.set_attr("all", "end", INT64_MAX);
  g.add_node("split", "halves", {"sl"}, {"p0", "p1"});
  g.set_attr("halves", "axis", int64_t{1});
  g.set_attr("halves", "sizes", std::vector<int64_t>{3, 5});
  g.add_node("gelu", "act", {"p1"}, {"gl"});
  g.set_attr("act", "approximate", std::string("tanh"));
  g.node(g.find_node("act")).ann.modality = Modality::Audio;
  g.add_node("reduce_sum", "total", {"gl"}, {"r"});
  g.set_attr("total", "axes", std::vector<int64_t>{0, -1});
  g.set_attr("total", "keepdims", int64_t{1});
  g.node(g.find_node("total")).ann.phase = Phase::Backward;

  g.value(g.find_value("tokens")).role = TensorRole::Input;
  g.value(g.find_value("table")).role = TensorRole::Weight;
  g.value(g.find_value("f16")).role = TensorRole::KvCache;
  g.value(g.find_value("n")).role = TensorRole::Activation;
  g.value(g.find_value("r")).role = TensorRole::Output;
  g.mark_output("r");
  g.mark_output("p0");
  g.mark_output("tokens");
  return g;
}

std::unique_ptr<Graph> parse(const std::string& text) { return graph_from_json(text.data(), text.size()); }

struct JsonDelete {
  void operator()(cJSON* j) const { cJSON_Delete(j); }
};
using Json = std::unique_ptr<cJSON, JsonDelete>;
Json tree(const std::string& text) { return Json(cJSON_Parse(text.c_str())); }
const cJSON* at(const cJSON* j, const char* key) { return cJSON_GetObjectItemCaseSensitive(j, key); }

TEST(JsonRoundTrip, ExportOfImportIsIdentical) {
  const Graph g = everything();
  const std::string first = graph_to_json(g);
  const auto back = parse(first);
  EXPECT_EQ(graph_to_json(*back), first);
  EXPECT_EQ(graph_to_json(everything()), first);  // deterministic
  EXPECT_EQ(back->structural_hash(), g.structural_hash());
  EXPECT_EQ(back->name(), g.name());
  EXPECT_EQ(back->output_names(), g.output_names());
}

TEST(JsonRoundTrip, ConstantBytesAreExact) {
  const Graph g = everything();
  const auto back = parse(graph_to_json(g));
  size_t constants = 0;
  for (const Value& v : g.values()) {
    if (v.kind != ValueKind::Constant) continue;
    SCOPED_TRACE(v.name);
    ++constants;
    const Value& w = back->value(back->find_value(v.name));
    ASSERT_EQ(w.kind, ValueKind::Constant);
    EXPECT_EQ(w.dtype, v.dtype);
    EXPECT_EQ(w.shape, v.shape);
    EXPECT_EQ(w.role, v.role);
    ASSERT_EQ(w.constant->nbytes(), v.constant->nbytes());
    EXPECT_EQ(std::memcmp(w.constant->bytes(), v.constant->bytes(), v.constant->nbytes()), 0);
  }
  EXPECT_EQ(constants, 9u);
}

TEST(JsonRoundTrip, AttributeTypesAndValuesAreExact) {
  const auto back = parse(graph_to_json(everything()));
  auto attr = [&](const char* node, const char* key) {
    return back->node(back->find_node(node)).attrs.all().at(key);
  };
  ASSERT_TRUE(std::holds_alternative<double>(attr("fill2", "value")));  // 2.0 stays a float
  EXPECT_EQ(std::get<double>(attr("fill2", "value")), 2.0);
  EXPECT_EQ(std::get<double>(attr("fill_ninf", "value")), -kInf);
  EXPECT_TRUE(std::isnan(std::get<double>(attr("fill_nan", "value"))));
  EXPECT_TRUE(std::signbit(std::get<double>(attr("drop", "p"))));
  EXPECT_EQ(std::get<double>(attr("ln", "eps")), 1e-300);
  EXPECT_EQ(std::get<double>(attr("rms", "eps")), 5e-324);
  EXPECT_EQ(std::get<double>(attr("attn", "scale")), 0.1);
  EXPECT_EQ(std::get<int64_t>(attr("all", "start")), INT64_MIN);
  EXPECT_EQ(std::get<int64_t>(attr("all", "end")), INT64_MAX);
  EXPECT_EQ(std::get<std::vector<int64_t>>(attr("halves", "sizes")), (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(std::get<std::string>(attr("act", "approximate")), "tanh");
  const Node& embed = back->node(back->find_node("embed"));
  EXPECT_EQ(embed.ann, (Annotations{Phase::Prefill, "model.embed \"tok\" \\ \t", 0, Modality::Text}));
  EXPECT_EQ(back->node(back->find_node("ln")).input_names, (std::vector<std::string>{"d", "", ""}));
}

TEST(JsonRoundTrip, ImportValidatesLikeTheOriginal) {
  Graph g = everything();
  auto back = parse(graph_to_json(g));
  std::unordered_map<ValueId, Shape> bound{{g.find_value("tokens"), {2, 8}}};
  g.validate(&bound);
  std::unordered_map<ValueId, Shape> bound_back{{back->find_value("tokens"), {2, 8}}};
  back->validate(&bound_back);
  for (const Value& v : g.values()) {
    SCOPED_TRACE(v.name);
    const Value& w = back->value(back->find_value(v.name));
    EXPECT_EQ(w.dtype, v.dtype);
    EXPECT_EQ(w.shape, v.shape);
  }
  EXPECT_EQ(g.value(g.find_value("r")).shape, (Shape{1, 5, 1}));
  EXPECT_EQ(g.value(g.find_value("r")).dtype, DType::F16);
}

TEST(JsonFormat, DocumentedEncoding) {
  Graph g = everything();
  g.mutable_nodes()[0].attrs.set("list", std::vector<double>{1.5, std::nan(""), -kInf, -0.0, 3.0});
  g.mutable_nodes()[0].attrs.set("big", std::vector<int64_t>{(int64_t{1} << 53) - 1, int64_t{1} << 53});
  const Json root = tree(graph_to_json(g));
  ASSERT_NE(root, nullptr);
  EXPECT_STREQ(at(root.get(), "format")->valuestring, "genie.graph");
  EXPECT_EQ(at(root.get(), "version")->valuedouble, 1);
  EXPECT_STREQ(at(root.get(), "name")->valuestring, "every thing ü");

  const cJSON* tokens = cJSON_GetArrayItem(at(root.get(), "inputs"), 0);
  EXPECT_STREQ(at(tokens, "dtype")->valuestring, "i64");
  EXPECT_EQ(cJSON_GetArrayItem(at(tokens, "shape"), 0)->valuedouble, -1);

  const cJSON* f32 = cJSON_GetArrayItem(at(root.get(), "constants"), 1);
  EXPECT_STREQ(at(f32, "name")->valuestring, "f32");
  const std::string data = at(f32, "data")->valuestring;
  EXPECT_EQ(data.substr(0, 8), "AACAPwAA");  // 1.0f = 00 00 80 3f, little-endian
  EXPECT_EQ(data.size(), 28u);               // 20 bytes, padded base64

  const cJSON* nodes = at(root.get(), "nodes");
  const cJSON* embed = cJSON_GetArrayItem(nodes, 0);
  const cJSON* list = at(at(at(embed, "attrs"), "list"), "floats");
  EXPECT_EQ(cJSON_GetArrayItem(list, 0)->valuedouble, 1.5);
  EXPECT_STREQ(cJSON_GetArrayItem(list, 1)->valuestring, "nan");
  EXPECT_STREQ(cJSON_GetArrayItem(list, 2)->valuestring, "-inf");
  EXPECT_TRUE(std::signbit(cJSON_GetArrayItem(list, 3)->valuedouble));
  const cJSON* big = at(at(at(embed, "attrs"), "big"), "ints");
  EXPECT_EQ(cJSON_GetArrayItem(big, 0)->valuedouble, 9007199254740991.0);  // safe as a number
  EXPECT_STREQ(cJSON_GetArrayItem(big, 1)->valuestring, "9007199254740992");
  EXPECT_STREQ(at(at(embed, "annotations"), "phase")->valuestring, "prefill");
  EXPECT_EQ(at(at(embed, "annotations"), "layer")->valuedouble, 0);

  const cJSON* fill2 = cJSON_GetArrayItem(nodes, 4);
  EXPECT_STREQ(at(fill2, "name")->valuestring, "fill2");
  EXPECT_TRUE(cJSON_IsNumber(at(at(at(fill2, "attrs"), "value"), "float")));
  EXPECT_EQ(at(fill2, "annotations"), nullptr);  // all defaults: omitted
  const cJSON* sum = cJSON_GetArrayItem(nodes, 2);
  EXPECT_EQ(cJSON_GetArraySize(at(sum, "annotations")), 1);  // only the layer
  const cJSON* slice = cJSON_GetArrayItem(nodes, 11);
  EXPECT_STREQ(at(at(at(slice, "attrs"), "start"), "int")->valuestring, "-9223372036854775808");

  const cJSON* roles = at(root.get(), "roles");
  ASSERT_EQ(cJSON_GetArraySize(roles), 5);
  EXPECT_STREQ(roles->child->string, "tokens");
  EXPECT_STREQ(at(roles, "f16")->valuestring, "kv_cache");
  EXPECT_STREQ(at(roles, "r")->valuestring, "output");
  EXPECT_EQ(cJSON_GetArraySize(at(root.get(), "outputs")), 3);
}

TEST(JsonFormat, FloatListsParse) {
  // No built-in op takes a float list; its parse is seen by the type check
  // that follows it.
  const std::string doc = R"({"version": 1, "inputs": [{"name": "x", "dtype": "f32", "shape": [2]}],
    "nodes": [{"name": "n", "op": "layer_norm", "inputs": ["x"], "outputs": ["y"],
               "attrs": {"eps": {"floats": [1, "nan", -0.5]}}}], "outputs": ["y"]})";
  EXPECT_TRUE(fails_with([&] { parse(doc); }, GENIE_ERR_INVALID_ATTRIBUTE, "must be float, got floats"));
  std::string bad = doc;
  bad.replace(bad.find("\"nan\""), 5, "\"nann\"");
  EXPECT_TRUE(fails_with([&] { parse(bad); }, GENIE_ERR_PARSE, "nodes[0].attrs.eps.floats[1]"));
}

const char* const kMinimal = R"({
  "version": 1,
  "inputs": [{"name": "x", "dtype": "f32", "shape": [2]}],
  "nodes": [{"name": "n", "op": "softmax", "inputs": ["x"], "outputs": ["y"], "attrs": {"axis": {"int": 0}}}],
  "outputs": ["y"]
})";

// kMinimal with the first occurrence of `from` replaced by `to`.
std::string minimal_with(const std::string& from, const std::string& to) {
  std::string s = kMinimal;
  const size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return at == std::string::npos ? s : s.replace(at, from.size(), to);
}

TEST(JsonFromText, MinimalDocumentWithDefaults) {
  auto g = parse(kMinimal);
  g->validate();
  EXPECT_EQ(g->value(g->find_value("y")).shape, Shape{2});
  EXPECT_EQ(g->name(), "");
}

struct Bad {
  std::string json;
  genie_status_t status;
  std::string needle;
};

void expect_all(const std::vector<Bad>& cases) {
  for (const Bad& c : cases) {
    SCOPED_TRACE(c.json);
    EXPECT_TRUE(fails_with([&] { parse(c.json); }, c.status, c.needle));
  }
}

TEST(JsonFromText, NotJson) {
  const std::string full = graph_to_json(everything());
  expect_all({
      {"", GENIE_ERR_PARSE, "empty"},
      {"{", GENIE_ERR_PARSE, "invalid JSON at line 1"},
      {full.substr(0, full.size() / 2), GENIE_ERR_PARSE, "invalid JSON at line"},
      {"{\"version\": 1,\n  \"name\": x}", GENIE_ERR_PARSE, "line 2, column 11"},
      {"{\"version\": 1,}", GENIE_ERR_PARSE, "invalid JSON"},
      {"{\"version\": 1} x", GENIE_ERR_PARSE, "unexpected text after the JSON value at line 1, column 16"},
      {std::string("{\"version\": 1}\0", 15), GENIE_ERR_PARSE, "unexpected text"},
      {std::string(5000, '['), GENIE_ERR_PARSE, "invalid JSON"},
  });
  EXPECT_TRUE(fails_with([] { graph_from_json(nullptr, 4); }, GENIE_ERR_INVALID_ARGUMENT));
}

TEST(JsonFromText, WrongStructureGivesPath) {
  expect_all({
      {"[1]", GENIE_ERR_PARSE, "top level: expected an object, got an array"},
      {"{}", GENIE_ERR_PARSE, "version: missing"},
      {R"({"version": 2})", GENIE_ERR_PARSE, "format version 2 is not supported"},
      {R"({"version": 1.5})", GENIE_ERR_PARSE, "version: expected an integer"},
      {R"({"version": 1, "format": "onnx"})", GENIE_ERR_PARSE, "format: expected \"genie.graph\""},
      {R"({"version": 1, "version": 1})", GENIE_ERR_PARSE, "version: duplicate key"},
      {R"({"version": 1, "extra": 1})", GENIE_ERR_PARSE, "extra: unknown key"},
      {R"({"version": 1, "nodes": {}})", GENIE_ERR_PARSE, "nodes: expected an array, got an object"},
      {R"({"version": 1, "name": 3})", GENIE_ERR_PARSE, "name: expected a string, got a number"},
      {minimal_with("\"op\": \"softmax\"", "\"op\": 5"), GENIE_ERR_PARSE, "nodes[0].op: expected a string"},
      {minimal_with(", \"outputs\": [\"y\"], \"attrs\"", ", \"attrs\""), GENIE_ERR_PARSE,
       "nodes[0].outputs: missing"},
      {minimal_with("\"inputs\": [\"x\"]", "\"inputs\": [null]"), GENIE_ERR_PARSE,
       "nodes[0].inputs[0]: expected"},
      {minimal_with("\"attrs\"", "\"atrs\""), GENIE_ERR_PARSE, "nodes[0].atrs: unknown key"},
      {minimal_with("{\"int\": 0}", "{\"int\": \"x\"}"), GENIE_ERR_PARSE,
       "nodes[0].attrs.axis.int: expected an integer"},
      {minimal_with("{\"int\": 0}", "{\"int\": 1.5}"), GENIE_ERR_PARSE, "nodes[0].attrs.axis.int"},
      {minimal_with("{\"int\": 0}", "{\"int\": \"nan\"}"), GENIE_ERR_PARSE, "nodes[0].attrs.axis.int"},
      {minimal_with("{\"int\": 0}", "{\"int\": 9007199254740993}"), GENIE_ERR_PARSE, "beyond +-(2^53 - 1)"},
      {minimal_with("{\"int\": 0}", "{\"int\": 9007199254740992}"), GENIE_ERR_PARSE, "beyond"},
      {minimal_with("{\"int\": 0}", "{\"int\": \"9223372036854775808\"}"), GENIE_ERR_PARSE,
       "expected an integer"},
      {minimal_with("{\"int\": 0}", "0"), GENIE_ERR_PARSE,
       "nodes[0].attrs.axis: expected an object with one key"},
      {minimal_with("{\"int\": 0}", "{\"int\": 0, \"float\": 0}"), GENIE_ERR_PARSE, "nodes[0].attrs.axis"},
      {minimal_with("{\"int\": 0}", "{\"double\": 0}"), GENIE_ERR_PARSE,
       "nodes[0].attrs.axis.double: unknown attr"},
      {minimal_with("{\"int\": 0}", "{\"float\": 1e999}"), GENIE_ERR_PARSE, "out of range"},
      {minimal_with("\"dtype\": \"f32\"", "\"dtype\": \"f64\""), GENIE_ERR_PARSE,
       "inputs[0].dtype: unknown dtype"},
      {minimal_with("\"dtype\": \"f32\", ", ""), GENIE_ERR_PARSE, "inputs[0].dtype: missing"},
      {minimal_with("[2]", "[2.5]"), GENIE_ERR_PARSE, "inputs[0].shape[0]: expected an integer"},
      {minimal_with("[2]", "\"2\""), GENIE_ERR_PARSE, "inputs[0].shape: expected an array"},
      {minimal_with("\"outputs\": [\"y\"]\n", "\"outputs\": [\"y\"], \"roles\": {\"x\": \"weights\"}\n"),
       GENIE_ERR_PARSE, "roles.x: unknown value \"weights\""},
      {minimal_with("\"attrs\"", "\"annotations\": {\"phase\": \"warmup\"}, \"attrs\""), GENIE_ERR_PARSE,
       "nodes[0].annotations.phase"},
      {minimal_with("\"attrs\"", "\"annotations\": {\"layer\": -2}, \"attrs\""), GENIE_ERR_PARSE,
       "nodes[0].annotations.layer"},
      {minimal_with("\"attrs\"", "\"annotations\": {\"layer\": 3e9}, \"attrs\""), GENIE_ERR_PARSE,
       "out of range"},
      {minimal_with("\"attrs\"", "\"annotations\": {\"stage\": 1}, \"attrs\""), GENIE_ERR_PARSE,
       "unknown key"},
  });
}

TEST(JsonFromText, BuildingErrorsKeepTheirStatus) {
  const std::string second_input =
      R"("inputs": [{"name": "x", "dtype": "f32", "shape": [2]}, {"name": "x", "dtype": "f32", "shape": [2]}])";
  expect_all({
      {minimal_with("\"softmax\"", "\"sofmax\""), GENIE_ERR_UNKNOWN_OP, "did you mean 'softmax'"},
      {minimal_with("{\"int\": 0}", "{\"float\": 0}"), GENIE_ERR_INVALID_ATTRIBUTE,
       "nodes[0].attrs.axis: node 'n' (softmax): attribute 'axis' of softmax must be int, got float"},
      {minimal_with("\"axis\"", "\"dim\""), GENIE_ERR_INVALID_ATTRIBUTE, "nodes[0].attrs.dim"},
      {minimal_with("[\"x\"]", "[\"x\", \"x\"]"), GENIE_ERR_INVALID_GRAPH,
       "nodes[0]: node 'n': softmax takes 1"},
      {minimal_with(R"("inputs": [{"name": "x", "dtype": "f32", "shape": [2]}])", second_input),
       GENIE_ERR_INVALID_GRAPH, "inputs[1]: value name 'x' is already used"},
      {minimal_with("\"outputs\": [\"y\"]\n", "\"outputs\": [\"y\", \"y\"]\n"), GENIE_ERR_INVALID_GRAPH,
       "outputs[1]"},
      {minimal_with("\"outputs\": [\"y\"]\n", "\"outputs\": [\"y\"], \"roles\": {\"ghost\": \"weight\"}\n"),
       GENIE_ERR_NOT_FOUND, "roles.ghost: no value named 'ghost'"},
      {minimal_with("\"name\": \"x\"", "\"name\": \"\""), GENIE_ERR_INVALID_ARGUMENT,
       "inputs[0]: value name is empty"},
      {minimal_with("\"version\": 1", "\"version\": 1, \"name\": \"a\\u0001\""), GENIE_ERR_INVALID_ARGUMENT,
       "name: graph name"},
      {minimal_with("[2]", "[1, 1, 1, 1, 1, 1, 1, 1, 1]"), GENIE_ERR_INVALID_ARGUMENT,
       "inputs[0].shape: more than 8"},
      {minimal_with("[2]", "[-2]"), GENIE_ERR_INVALID_ARGUMENT, "inputs[0]: input 'x': dimension -2"},
  });
}

TEST(JsonFromText, HugeSizesRefusedBeforeAllocation) {
  auto constant = [](const std::string& shape, const std::string& data) {
    return cat(R"({"version": 1, "constants": [{"name": "c", "dtype": "f32", "shape": )", shape,
               R"(, "data": ")", data, R"("}]})");
  };
  expect_all({
      {minimal_with("[2]", "[1e30]"), GENIE_ERR_TOO_LARGE, "inputs[0].shape[0]"},
      {minimal_with("[2]", "[4294967296, 4294967296]"), GENIE_ERR_TOO_LARGE, "inputs[0]"},
      {minimal_with("[2]", "[\"99999999999999999999\"]"), GENIE_ERR_PARSE, "inputs[0].shape[0]"},
      {constant("[1000000000000000, 1000000000000000]", ""), GENIE_ERR_TOO_LARGE, "constants[0]"},
      {constant("[281474976710656]", ""), GENIE_ERR_TOO_LARGE, "constants[0]"},
      {constant("[2]", "AAAAAAAA"), GENIE_ERR_SIZE_MISMATCH, "constants[0].data: 8 base64 characters"},
      {constant("[-1]", ""), GENIE_ERR_INVALID_ARGUMENT, "constants[0]"},
      {constant("[1]", "AA*AAA=="), GENIE_ERR_PARSE, "constants[0].data: invalid base64"},
      {constant("[1]", "AAA"), GENIE_ERR_SIZE_MISMATCH, "constants[0].data"},
  });
  // Canonical base64 only: padding where the length needs it, unused bits 0.
  auto bool_constant = [](const std::string& data) {
    return cat(R"({"version": 1, "constants": [{"name": "c", "dtype": "bool", "shape": [1], "data": ")", data,
               R"("}]})");
  };
  expect_all({
      {bool_constant("AB=="), GENIE_ERR_PARSE, "invalid base64"},
      {bool_constant("AAA="), GENIE_ERR_PARSE, "invalid base64"},
      {bool_constant("A==="), GENIE_ERR_PARSE, "invalid base64"},
  });
  auto ok = parse(bool_constant("AQ=="));
  EXPECT_EQ(ok->value(0).constant->data<uint8_t>()[0], 1);
  auto empty = parse(constant("[0, 4]", ""));
  EXPECT_EQ(empty->value(0).constant->nbytes(), 0u);
}

TEST(JsonFromText, IntegersAsStringsAndLenientSections) {
  auto g = parse(minimal_with("{\"int\": 0}", "{\"int\": \"-1\"}"));
  EXPECT_EQ(g->node(0).attrs.get_int("axis", 0), -1);
  // Everything but the version is optional; a graph with nothing in it
  // imports (and then fails validation for lack of outputs).
  auto empty = parse(R"({"version": 1})");
  EXPECT_TRUE(empty->nodes().empty());
  EXPECT_TRUE(fails_with([&] { empty->validate(); }, GENIE_ERR_INVALID_GRAPH, "no outputs"));
}

// Random edits of a valid export: each is refused with a genie::Error or
// imported, and an import round-trips exactly (the sanitizers watch for
// crashes and leaks on every error path).
TEST(JsonFromText, MutatedDocumentsFailCleanly) {
  const std::string base = graph_to_json(everything());
  const std::string alphabet = "{}[]\",:0123456789-+.eE\\ntruefalsnul \t\nabcxyz=/";
  std::mt19937 rng(7);
  int imported = 0;
  for (int it = 0; it < 2000; ++it) {
    std::string s = base;
    for (int k = 1 + static_cast<int>(rng() % 4); k > 0 && !s.empty(); --k) {
      const size_t pos = rng() % s.size();
      switch (rng() % 4) {
        case 0:
          s[pos] = alphabet[rng() % alphabet.size()];
          break;
        case 1:
          s.erase(pos, 1 + rng() % 8);
          break;
        case 2:
          s.insert(pos, 1, alphabet[rng() % alphabet.size()]);
          break;
        default:
          s.insert(pos, s.substr(rng() % s.size(), rng() % 30));
          break;
      }
    }
    try {
      const std::string again = graph_to_json(*parse(s));
      EXPECT_EQ(graph_to_json(*parse(again)), again);
      ++imported;
    } catch (const Error& e) {
      EXPECT_FALSE(e.detail().empty());
    }
  }
  EXPECT_GT(imported, 0);  // some edits (inside base64, names, numbers) still import
}

}  // namespace
}  // namespace genie
