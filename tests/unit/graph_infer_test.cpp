// Shape and dtype inference of every operator in docs/operators.md, called
// through the schema table (validation adds only the node prefix, tested in
// graph_validate_test).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <regex>
#include <set>

#include "graph/op_schema.hpp"
#include "graph_test_util.hpp"

namespace genie {
namespace {

using testing::fails_with;

ValueType f32(Shape s) { return {DType::F32, std::move(s)}; }
ValueType f16(Shape s) { return {DType::F16, std::move(s)}; }
ValueType bf16(Shape s) { return {DType::BF16, std::move(s)}; }
ValueType i32(Shape s) { return {DType::I32, std::move(s)}; }
ValueType i64(Shape s) { return {DType::I64, std::move(s)}; }
ValueType boolean(Shape s) { return {DType::Bool, std::move(s)}; }
const ValueType kOmitted{};

Attrs attrs(std::initializer_list<std::pair<const char*, AttrValue>> kv) {
  Attrs a;
  for (const auto& [k, v] : kv) a.set(k, v);
  return a;
}

std::vector<ValueType> infer(const std::string& op, const std::vector<ValueType>& in, const Attrs& a = {}) {
  const OpSchemaPtr s = find_op(op);
  if (!s) throw std::runtime_error("no schema for " + op);
  return s->infer(in, a);
}

std::string str(const ValueType& t) { return cat(dtype_name(t.dtype), shape_str(t.shape)); }

// "f32[2, 4]" for an op with one output.
std::string out(const std::string& op, const std::vector<ValueType>& in, const Attrs& a = {}) {
  const auto r = infer(op, in, a);
  if (r.size() != 1) return cat(r.size(), " outputs");
  return str(r[0]);
}

// Every operator the reference documents has a schema, and no other.
TEST(OpTable, MatchesDocsOperatorsMd) {
  const std::string path = std::string(GENIE_SOURCE_DIR) + "/docs/operators.md";
  std::ifstream f(path);
  ASSERT_TRUE(f) << path;
  std::set<std::string> documented;
  const std::regex row(R"(^\| (`[a-z0-9_]+`(, `[a-z0-9_]+`)*) \|)"), name("`([a-z0-9_]+)`");
  for (std::string line; std::getline(f, line);) {
    std::smatch m;
    if (!std::regex_search(line, m, row)) continue;
    const std::string cell = m[1];
    for (std::sregex_iterator it(cell.begin(), cell.end(), name), end; it != end; ++it)
      documented.insert((*it)[1]);
  }
  const auto names = op_names();
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()), documented);
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_GE(names.size(), 45u);
  EXPECT_EQ(find_op("nope"), nullptr);
}

TEST(OpTable, ArityAndAttrSpecs) {
  const OpSchemaPtr linear = find_op("linear");
  ASSERT_NE(linear, nullptr);
  EXPECT_EQ(linear->min_inputs, 2);
  EXPECT_EQ(linear->max_inputs, 3);
  EXPECT_EQ(find_op("concat")->max_inputs, -1);
  EXPECT_EQ(find_op("split")->max_outputs, -1);
  const auto& slice = find_op("slice")->attrs;
  ASSERT_EQ(slice.size(), 4u);
  EXPECT_EQ(slice[0].name, "axis");
  EXPECT_TRUE(slice[0].required);
  EXPECT_EQ(slice[0].type, AttrType::Int);
  EXPECT_FALSE(slice[1].required);
  EXPECT_EQ(find_op("masked_fill")->attrs.at(0).type, AttrType::Float);
  EXPECT_TRUE(find_op("masked_fill")->attrs.at(0).required);
  EXPECT_EQ(find_op("cast")->attrs.at(0).type, AttrType::String);
  // Callers other than validation get arity errors, not crashes.
  EXPECT_TRUE(fails_with([] { infer("add", {f32({1})}); }, GENIE_ERR_INVALID_GRAPH, "takes 2 inputs"));
  EXPECT_TRUE(fails_with(
      [] {
        infer("linear", {kOmitted, f32({1, 1})});
      },
      GENIE_ERR_INVALID_GRAPH, "omitted"));
}

TEST(CheckAttrs, UnknownWrongTypeAndMissing) {
  const OpSchema& reshape = *find_op("reshape");
  EXPECT_TRUE(fails_with([&] { check_attrs(reshape, {}); }, GENIE_ERR_INVALID_ATTRIBUTE, "'shape'"));
  EXPECT_TRUE(fails_with(
      [&] {
        check_attrs(reshape, attrs({{"shape", int64_t{3}}}));
      },
      GENIE_ERR_INVALID_ATTRIBUTE, "must be ints, got int"));
  EXPECT_TRUE(fails_with(
      [&] {
        check_attrs(reshape, attrs({{"shape", std::vector<int64_t>{1}}, {"x", 1.0}}));
      },
      GENIE_ERR_INVALID_ATTRIBUTE, "no attribute 'x'"));
  check_attrs(reshape, attrs({{"shape", std::vector<int64_t>{1}}}));
  check_attrs(*find_op("layer_norm"), attrs({{"eps", int64_t{0}}}));  // int accepted for float
  EXPECT_TRUE(fails_with(
      [] {
        check_attrs(*find_op("relu"), attrs({{"a", int64_t{0}}}));
      },
      GENIE_ERR_INVALID_ATTRIBUTE, "it takes none"));
}

TEST(Broadcast, NumpyRules) {
  EXPECT_EQ(broadcast_shapes({2, 1, 3}, {4, 1}), (Shape{2, 4, 3}));
  EXPECT_EQ(broadcast_shapes({}, {5}), (Shape{5}));
  EXPECT_EQ(broadcast_shapes({0, 3}, {1, 3}), (Shape{0, 3}));
  EXPECT_EQ(broadcast_shapes({1}, {0}), (Shape{0}));
  EXPECT_TRUE(fails_with([] { broadcast_shapes({2, 3}, {4}); }, GENIE_ERR_SHAPE_MISMATCH, "[2, 3] and [4]"));
  EXPECT_TRUE(fails_with([] { broadcast_shapes({0}, {2}); }, GENIE_ERR_SHAPE_MISMATCH));
}

TEST(Infer, Matmul) {
  EXPECT_EQ(out("matmul", {f32({2, 3}), f32({3, 4})}), "f32[2, 4]");
  EXPECT_EQ(out("matmul", {f16({5, 1, 2, 3}), f16({4, 3, 6})}), "f16[5, 4, 2, 6]");
  EXPECT_EQ(out("matmul", {f32({3}), f32({3, 4})}), "f32[4]");
  EXPECT_EQ(out("matmul", {f32({2, 3}), f32({3})}), "f32[2]");
  EXPECT_EQ(out("matmul", {f32({3}), f32({3})}), "f32[]");
  EXPECT_EQ(out("matmul", {f32({3}), f32({7, 3, 4})}), "f32[7, 4]");
  EXPECT_EQ(out("matmul", {f32({3, 2}), f32({3, 4})}, attrs({{"transpose_a", int64_t{1}}})), "f32[2, 4]");
  EXPECT_EQ(out("matmul", {f32({2, 3}), f32({4, 3})}, attrs({{"transpose_b", int64_t{1}}})), "f32[2, 4]");
  // Transposes apply only from rank 2.
  EXPECT_EQ(out("matmul", {f32({3}), f32({3, 4})}, attrs({{"transpose_a", int64_t{1}}})), "f32[4]");
  EXPECT_TRUE(fails_with(
      [] {
        infer("matmul", {f32({2, 3}), f32({4, 5})});
      },
      GENIE_ERR_SHAPE_MISMATCH, "inner"));
  EXPECT_TRUE(fails_with(
      [] {
        infer("matmul", {f32({2, 2, 3}), f32({3, 3, 4})});
      },
      GENIE_ERR_SHAPE_MISMATCH));
  EXPECT_TRUE(fails_with(
      [] {
        infer("matmul", {f32({}), f32({3})});
      },
      GENIE_ERR_SHAPE_MISMATCH, "rank >= 1"));
  EXPECT_TRUE(fails_with(
      [] {
        infer("matmul", {i32({2, 3}), i32({3, 4})});
      },
      GENIE_ERR_DTYPE_MISMATCH, "float"));
  EXPECT_TRUE(fails_with([] { infer("matmul", {f32({2, 3}), f16({3, 4})}); }, GENIE_ERR_DTYPE_MISMATCH));
  EXPECT_TRUE(fails_with(
      [] {
        infer("matmul", {f32({2, 3}), f32({3, 4})}, attrs({{"transpose_a", int64_t{2}}}));
      },
      GENIE_ERR_INVALID_ATTRIBUTE, "0 or 1"));
}

TEST(Infer, Linear) {
  EXPECT_EQ(out("linear", {bf16({2, 5, 8}), bf16({16, 8}), bf16({16})}), "bf16[2, 5, 16]");
  EXPECT_EQ(out("linear", {f32({8}), f32({16, 8})}), "f32[16]");
  EXPECT_EQ(out("linear", {f32({4, 8}), f32({16, 8}), kOmitted}), "f32[4, 16]");
  EXPECT_TRUE(fails_with([] { infer("linear", {f32({4, 7}), f32({16, 8})}); }, GENIE_ERR_SHAPE_MISMATCH));
  EXPECT_TRUE(fails_with(
      [] {
        infer("linear", {f32({4, 8}), f32({16, 8}), f32({8})});
      },
      GENIE_ERR_SHAPE_MISMATCH, "bias"));
  EXPECT_TRUE(fails_with(
      [] {
        infer("linear", {f32({4, 8}), f32({16, 8}), f16({16})});
      },
      GENIE_ERR_DTYPE_MISMATCH));
  EXPECT_TRUE(fails_with([] { infer("linear", {f32({4, 8}), f32({1, 16, 8})}); }, GENIE_ERR_SHAPE_MISMATCH));
}

TEST(Infer, Arithmetic) {
  for (const char* op : {"add", "sub", "mul", "div"}) {
    SCOPED_TRACE(op);
    EXPECT_EQ(out(op, {f32({2, 1, 3}), f32({4, 1})}), "f32[2, 4, 3]");
    EXPECT_EQ(out(op, {i32({}), i32({2, 3})}), "i32[2, 3]");
    EXPECT_EQ(out(op, {i64({0, 3}), i64({1, 3})}), "i64[0, 3]");
    EXPECT_TRUE(fails_with([&] { infer(op, {f32({2, 3}), f32({4})}); }, GENIE_ERR_SHAPE_MISMATCH));
    EXPECT_TRUE(fails_with([&] { infer(op, {f32({2}), i32({2})}); }, GENIE_ERR_DTYPE_MISMATCH, "same dtype"));
    EXPECT_TRUE(fails_with([&] { infer(op, {boolean({2}), boolean({2})}); }, GENIE_ERR_DTYPE_MISMATCH));
  }
}

TEST(Infer, Unary) {
  for (const char* op : {"relu", "silu", "tanh", "sigmoid", "exp", "log", "sqrt", "neg", "abs", "gelu"}) {
    SCOPED_TRACE(op);
    EXPECT_EQ(out(op, {f16({2, 3})}), "f16[2, 3]");
    EXPECT_TRUE(fails_with([&] { infer(op, {boolean({2})}); }, GENIE_ERR_DTYPE_MISMATCH));
  }
  for (const char* op : {"relu", "neg", "abs"}) EXPECT_EQ(out(op, {i32({4})}), "i32[4]");
  for (const char* op : {"silu", "tanh", "sigmoid", "exp", "log", "sqrt", "gelu"})
    EXPECT_TRUE(fails_with([&] { infer(op, {i64({4})}); }, GENIE_ERR_DTYPE_MISMATCH, "float"));
  EXPECT_EQ(out("gelu", {f32({3})}, attrs({{"approximate", std::string("tanh")}})), "f32[3]");
  EXPECT_EQ(out("gelu", {f32({3})}, attrs({{"approximate", std::string("none")}})), "f32[3]");
  EXPECT_TRUE(fails_with(
      [] {
        infer("gelu", {f32({3})}, attrs({{"approximate", std::string("fast")}}));
      },
      GENIE_ERR_INVALID_ATTRIBUTE, "fast"));
}

TEST(Infer, Dropout) {
  EXPECT_EQ(out("dropout", {f32({2, 3})}), "f32[2, 3]");
  EXPECT_EQ(out("dropout", {f32({2})}, attrs({{"p", 0.0}})), "f32[2]");
  for (double p : {1.0, -0.1, std::nan("")})
    EXPECT_TRUE(fails_with(
        [&] {
          infer("dropout", {f32({2})}, attrs({{"p", p}}));
        },
        GENIE_ERR_INVALID_ATTRIBUTE, "[0, 1)"));
}

TEST(Infer, Comparisons) {
  for (const char* op : {"eq", "ne", "lt", "le", "gt", "ge"}) {
    SCOPED_TRACE(op);
    EXPECT_EQ(out(op, {f32({2, 1}), f32({3})}), "bool[2, 3]");
    EXPECT_EQ(out(op, {i64({4}), i64({4})}), "bool[4]");
    EXPECT_EQ(out(op, {boolean({4}), boolean({})}), "bool[4]");
    EXPECT_TRUE(fails_with([&] { infer(op, {f32({4}), i64({4})}); }, GENIE_ERR_DTYPE_MISMATCH));
    EXPECT_TRUE(fails_with([&] { infer(op, {f32({4}), f32({3})}); }, GENIE_ERR_SHAPE_MISMATCH));
  }
}

TEST(Infer, Where) {
  EXPECT_EQ(out("where", {boolean({2, 1}), i32({1, 3}), i32({})}), "i32[2, 3]");
  EXPECT_EQ(out("where", {boolean({4, 1, 1}), f32({3, 1}), f32({5})}), "f32[4, 3, 5]");
  EXPECT_TRUE(fails_with(
      [] {
        infer("where", {f32({2}), f32({2}), f32({2})});
      },
      GENIE_ERR_DTYPE_MISMATCH, "cond"));
  EXPECT_TRUE(fails_with(
      [] {
        infer("where", {boolean({2}), f32({2}), f16({2})});
      },
      GENIE_ERR_DTYPE_MISMATCH));
  EXPECT_TRUE(fails_with(
      [] {
        infer("where", {boolean({3}), f32({2}), f32({2})});
      },
      GENIE_ERR_SHAPE_MISMATCH));
}

TEST(Infer, MaskedFill) {
  const Attrs v = attrs({{"value", -1e9}});
  EXPECT_EQ(out("masked_fill", {f32({2, 3}), boolean({3})}, v), "f32[2, 3]");
  EXPECT_EQ(out("masked_fill", {i64({2, 3}), boolean({2, 1})}, v), "i64[2, 3]");
  // The mask broadcasts to x, never x to the mask.
  EXPECT_TRUE(fails_with(
      [&] {
        infer("masked_fill", {f32({2, 3}), boolean({2, 2, 3})}, v);
      },
      GENIE_ERR_SHAPE_MISMATCH, "does not broadcast to x"));
  EXPECT_TRUE(fails_with(
      [&] {
        infer("masked_fill", {f32({2, 3}), f32({2, 3})}, v);
      },
      GENIE_ERR_DTYPE_MISMATCH, "mask must be bool"));
  EXPECT_TRUE(fails_with(
      [] {
        infer("masked_fill", {f32({2}), boolean({2})});
      },
      GENIE_ERR_INVALID_ATTRIBUTE, "'value'"));
}

TEST(Infer, Cast) {
  const std::pair<const char*, const char*> cases[] = {{"f32", "f32[2, 3]"},   {"f16", "f16[2, 3]"},
                                                       {"bf16", "bf16[2, 3]"}, {"i32", "i32[2, 3]"},
                                                       {"i64", "i64[2, 3]"},   {"bool", "bool[2, 3]"}};
  for (const auto& [to, want] : cases)
    EXPECT_EQ(out("cast", {boolean({2, 3})}, attrs({{"dtype", std::string(to)}})), want);
  EXPECT_TRUE(fails_with(
      [] {
        infer("cast", {f32({2})}, attrs({{"dtype", std::string("f64")}}));
      },
      GENIE_ERR_INVALID_ATTRIBUTE, "f64"));
  EXPECT_TRUE(fails_with([] { infer("cast", {f32({2})}); }, GENIE_ERR_INVALID_ATTRIBUTE, "'dtype'"));
}

TEST(Infer, Softmax) {
  EXPECT_EQ(out("softmax", {f32({2, 3})}), "f32[2, 3]");
  EXPECT_EQ(out("softmax", {f32({2, 3})}, attrs({{"axis", int64_t{0}}})), "f32[2, 3]");
  EXPECT_TRUE(fails_with(
      [] {
        infer("softmax", {f32({2, 3})}, attrs({{"axis", int64_t{2}}}));
      },
      GENIE_ERR_INVALID_ATTRIBUTE, "axis 2 out of range"));
  EXPECT_TRUE(fails_with([] { infer("softmax", {i32({2, 3})}); }, GENIE_ERR_DTYPE_MISMATCH));
}

TEST(Infer, Norms) {
  EXPECT_EQ(out("layer_norm", {f32({2, 5, 8}), f32({8}), f32({8})}), "f32[2, 5, 8]");
  EXPECT_EQ(out("layer_norm", {f32({2, 8}), kOmitted, f32({8})}), "f32[2, 8]");
  EXPECT_EQ(out("layer_norm", {f32({2, 8})}), "f32[2, 8]");
  EXPECT_EQ(out("rms_norm", {bf16({3, 8}), bf16({8})}), "bf16[3, 8]");
  EXPECT_EQ(out("rms_norm", {bf16({3, 8})}, attrs({{"eps", 0.0}})), "bf16[3, 8]");
  EXPECT_TRUE(fails_with(
      [] {
        infer("layer_norm", {f32({2, 8}), f32({7})});
      },
      GENIE_ERR_SHAPE_MISMATCH, "[8]"));
  EXPECT_TRUE(fails_with(
      [] {
        infer("layer_norm", {f32({2, 8}), f32({8}), f32({2, 8})});
      },
      GENIE_ERR_SHAPE_MISMATCH, "bias"));
  EXPECT_TRUE(fails_with([] { infer("rms_norm", {f32({2, 8}), f16({8})}); }, GENIE_ERR_DTYPE_MISMATCH));
  EXPECT_TRUE(fails_with([] { infer("rms_norm", {f32({})}); }, GENIE_ERR_SHAPE_MISMATCH, "rank >= 1"));
  EXPECT_TRUE(fails_with([] { infer("layer_norm", {i32({2, 8})}); }, GENIE_ERR_DTYPE_MISMATCH));
  EXPECT_TRUE(fails_with(
      [] {
        infer("layer_norm", {f32({2})}, attrs({{"eps", -1.0}}));
      },
      GENIE_ERR_INVALID_ATTRIBUTE, "eps"));
}

TEST(Infer, Embedding) {
  EXPECT_EQ(out("embedding", {i64({2, 7}), f16({100, 32})}), "f16[2, 7, 32]");
  EXPECT_EQ(out("embedding", {i32({}), f32({10, 4})}), "f32[4]");
  EXPECT_TRUE(fails_with(
      [] {
        infer("embedding", {f32({2}), f32({10, 4})});
      },
      GENIE_ERR_DTYPE_MISMATCH, "ids"));
  EXPECT_TRUE(fails_with(
      [] {
        infer("embedding", {i64({2}), i64({10, 4})});
      },
      GENIE_ERR_DTYPE_MISMATCH, "weight"));
  EXPECT_TRUE(fails_with([] { infer("embedding", {i64({2}), f32({10, 4, 1})}); }, GENIE_ERR_SHAPE_MISMATCH));
}

TEST(Infer, Reshape) {
  auto shape = [](std::vector<int64_t> s) { return attrs({{"shape", std::move(s)}}); };
  EXPECT_EQ(out("reshape", {f32({2, 3, 4})}, shape({4, -1})), "f32[4, 6]");
  EXPECT_EQ(out("reshape", {f32({2, 3, 4})}, shape({-1})), "f32[24]");
  EXPECT_EQ(out("reshape", {i32({6})}, shape({1, 2, 3})), "i32[1, 2, 3]");
  EXPECT_EQ(out("reshape", {f32({1})}, shape({})), "f32[]");
  EXPECT_EQ(out("reshape", {f32({2, 3, 0})}, shape({0, 5})), "f32[0, 5]");  // 0 is a zero-size dim
  EXPECT_TRUE(fails_with(
      [&] {
        infer("reshape", {f32({2, 0})}, shape({0, -1}));
      },
      GENIE_ERR_INVALID_ATTRIBUTE, "ambiguous"));
  EXPECT_TRUE(fails_with(
      [&] {
        infer("reshape", {f32({4})}, shape({-1, -1}));
      },
      GENIE_ERR_INVALID_ATTRIBUTE, "more than one -1"));
  EXPECT_TRUE(fails_with(
      [&] {
        infer("reshape", {f32({4})}, shape({-2, -2}));
      },
      GENIE_ERR_INVALID_ATTRIBUTE));
  EXPECT_TRUE(fails_with(
      [&] {
        infer("reshape", {f32({2, 3})}, shape({5}));
      },
      GENIE_ERR_SHAPE_MISMATCH, "6 elem"));
  EXPECT_TRUE(fails_with([&] { infer("reshape", {f32({2, 3})}, shape({4, -1})); }, GENIE_ERR_SHAPE_MISMATCH));
  EXPECT_TRUE(fails_with(
      [&] {
        infer("reshape", {f32({2, 3})}, shape({int64_t{1} << 40, int64_t{1} << 40}));
      },
      GENIE_ERR_TOO_LARGE));
  EXPECT_TRUE(fails_with([] { infer("reshape", {f32({2})}); }, GENIE_ERR_INVALID_ATTRIBUTE, "'shape'"));
}

TEST(Infer, TransposeAndPermute) {
  EXPECT_EQ(out("transpose", {f32({2, 3, 4})}), "f32[2, 4, 3]");
  EXPECT_EQ(out("transpose", {f32({2, 3, 4})}, attrs({{"dim0", int64_t{0}}, {"dim1", int64_t{2}}})),
            "f32[4, 3, 2]");
  EXPECT_EQ(out("transpose", {f32({5})}, attrs({{"dim0", int64_t{0}}, {"dim1", int64_t{-1}}})), "f32[5]");
  EXPECT_TRUE(fails_with([] { infer("transpose", {f32({})}); }, GENIE_ERR_SHAPE_MISMATCH));
  EXPECT_TRUE(fails_with(
      [] {
        infer("transpose", {f32({2, 3})}, attrs({{"dim1", int64_t{2}}}));
      },
      GENIE_ERR_INVALID_ATTRIBUTE, "dim1"));

  auto perm = [](std::vector<int64_t> p) { return attrs({{"perm", std::move(p)}}); };
  EXPECT_EQ(out("permute", {f32({2, 3, 4})}, perm({2, 0, 1})), "f32[4, 2, 3]");
  EXPECT_EQ(out("permute", {f32({})}, perm({})), "f32[]");
  for (const auto& bad : {std::vector<int64_t>{0, 0, 1}, {0, 1}, {0, 1, 3}, {-1, 0, 1}, {0, 1, 2, 3}})
    EXPECT_TRUE(fails_with(
        [&] {
          infer("permute", {f32({2, 3, 4})}, perm(bad));
        },
        GENIE_ERR_INVALID_ATTRIBUTE, "not a permutation"));
  EXPECT_TRUE(fails_with([] { infer("permute", {f32({2})}); }, GENIE_ERR_INVALID_ATTRIBUTE, "'perm'"));
}

TEST(Infer, Flatten) {
  auto dims = [](int64_t s, int64_t e) { return attrs({{"start_dim", s}, {"end_dim", e}}); };
  EXPECT_EQ(out("flatten", {f32({2, 3, 4, 5})}), "f32[2, 60]");
  EXPECT_EQ(out("flatten", {f32({2, 3, 4, 5})}, attrs({{"start_dim", int64_t{0}}})), "f32[120]");
  EXPECT_EQ(out("flatten", {f32({2, 3, 4, 5})}, dims(1, 2)), "f32[2, 12, 5]");
  EXPECT_EQ(out("flatten", {f32({2, 3, 4, 5})}, dims(-3, -2)), "f32[2, 12, 5]");
  EXPECT_EQ(out("flatten", {f32({2, 3, 4, 5})}, dims(2, 2)), "f32[2, 3, 4, 5]");
  EXPECT_EQ(out("flatten", {f32({})}), "f32[1]");
  EXPECT_EQ(out("flatten", {f32({2, 0, 4})}), "f32[2, 0]");
  EXPECT_TRUE(fails_with(
      [&] {
        infer("flatten", {f32({2, 3, 4})}, dims(2, 1));
      },
      GENIE_ERR_INVALID_ATTRIBUTE, "after end_dim"));
  EXPECT_TRUE(fails_with([] { infer("flatten", {f32({5})}); }, GENIE_ERR_INVALID_ATTRIBUTE, "start_dim 1"));
}

TEST(Infer, Concat) {
  EXPECT_EQ(out("concat", {f32({2, 3}), f32({5, 3})}), "f32[7, 3]");
  EXPECT_EQ(out("concat", {f32({2, 3}), f32({2, 5}), f32({2, 1})}, attrs({{"axis", int64_t{-1}}})),
            "f32[2, 9]");
  EXPECT_EQ(out("concat", {i64({4})}), "i64[4]");
  EXPECT_TRUE(fails_with(
      [] {
        infer("concat", {f32({2, 3}), f32({2, 4})});
      },
      GENIE_ERR_SHAPE_MISMATCH, "x2"));
  EXPECT_TRUE(fails_with([] { infer("concat", {f32({2, 3}), f32({2, 3, 1})}); }, GENIE_ERR_SHAPE_MISMATCH));
  EXPECT_TRUE(fails_with(
      [] {
        infer("concat", {f32({2}), f32({2}), f16({2})});
      },
      GENIE_ERR_DTYPE_MISMATCH, "x3"));
  EXPECT_TRUE(fails_with(
      [] {
        infer("concat", {f32({2})}, attrs({{"axis", int64_t{1}}}));
      },
      GENIE_ERR_INVALID_ATTRIBUTE));
  EXPECT_TRUE(fails_with(
      [] {
        infer("concat", {f32({INT64_MAX / 2 + 1}), f32({INT64_MAX / 2 + 1})});
      },
      GENIE_ERR_TOO_LARGE));
}

TEST(Infer, Split) {
  const auto r = infer("split", {f32({10, 4})}, attrs({{"sizes", std::vector<int64_t>{3, 7}}}));
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(str(r[0]), "f32[3, 4]");
  EXPECT_EQ(str(r[1]), "f32[7, 4]");
  const auto r3 =
      infer("split", {i32({2, 4})}, attrs({{"axis", int64_t{-1}}, {"sizes", std::vector<int64_t>{1, 0, 3}}}));
  ASSERT_EQ(r3.size(), 3u);
  EXPECT_EQ(str(r3[1]), "i32[2, 0]");
  EXPECT_EQ(str(r3[2]), "i32[2, 3]");
  EXPECT_TRUE(fails_with(
      [] {
        infer("split", {f32({10})}, attrs({{"sizes", std::vector<int64_t>{3, 6}}}));
      },
      GENIE_ERR_SHAPE_MISMATCH, "sum to 9"));
  EXPECT_TRUE(fails_with(
      [] {
        infer("split", {f32({10})}, attrs({{"sizes", std::vector<int64_t>{11, -1}}}));
      },
      GENIE_ERR_INVALID_ATTRIBUTE, ">= 0"));
  EXPECT_TRUE(fails_with(
      [] {
        infer("split", {f32({10})}, attrs({{"sizes", std::vector<int64_t>{}}}));
      },
      GENIE_ERR_INVALID_ATTRIBUTE, "empty"));
  EXPECT_TRUE(fails_with([] { infer("split", {f32({10})}); }, GENIE_ERR_INVALID_ATTRIBUTE, "'sizes'"));
}

TEST(Infer, Slice) {
  auto slice = [](std::initializer_list<std::pair<const char*, AttrValue>> kv, Shape x = {10}) {
    Attrs a = attrs(kv);
    if (!a.has("axis")) a.set("axis", int64_t{0});
    return out("slice", {f32(std::move(x))}, a);
  };
  EXPECT_EQ(slice({}), "f32[10]");
  EXPECT_EQ(slice({{"start", int64_t{2}}, {"end", int64_t{8}}, {"step", int64_t{3}}}), "f32[2]");
  EXPECT_EQ(slice({{"start", int64_t{2}}, {"end", int64_t{8}}, {"step", int64_t{2}}}), "f32[3]");
  EXPECT_EQ(slice({{"start", int64_t{-3}}}), "f32[3]");
  EXPECT_EQ(slice({{"end", int64_t{-1}}}), "f32[9]");
  EXPECT_EQ(slice({{"start", int64_t{-100}}}), "f32[10]");  // clamps to 0
  EXPECT_EQ(slice({{"end", int64_t{100}}}), "f32[10]");     // clamps to the length
  EXPECT_EQ(slice({{"start", int64_t{8}}, {"end", int64_t{2}}}), "f32[0]");
  EXPECT_EQ(slice({{"start", int64_t{12}}}), "f32[0]");
  EXPECT_EQ(slice({{"start", INT64_MIN}, {"end", INT64_MAX}, {"step", INT64_MAX}}), "f32[1]");
  EXPECT_EQ(slice({{"axis", int64_t{-1}}, {"start", int64_t{1}}}, {4, 10}), "f32[4, 9]");
  EXPECT_EQ(slice({{"axis", int64_t{0}}, {"end", int64_t{-2}}}, {4, 10}), "f32[2, 10]");
  EXPECT_TRUE(fails_with(
      [] {
        infer("slice", {f32({10})}, attrs({{"axis", int64_t{0}}, {"step", int64_t{0}}}));
      },
      GENIE_ERR_INVALID_ATTRIBUTE, "step"));
  EXPECT_TRUE(fails_with(
      [] {
        infer("slice", {f32({10})}, attrs({{"axis", int64_t{0}}, {"step", int64_t{-1}}}));
      },
      GENIE_ERR_INVALID_ATTRIBUTE));
  EXPECT_TRUE(fails_with([] { infer("slice", {f32({10})}); }, GENIE_ERR_INVALID_ATTRIBUTE, "'axis'"));
  EXPECT_TRUE(fails_with(
      [] {
        infer("slice", {f32({10})}, attrs({{"axis", int64_t{1}}}));
      },
      GENIE_ERR_INVALID_ATTRIBUTE));
}

TEST(Infer, Reductions) {
  auto axes = [](std::vector<int64_t> a, int64_t keep = 0) {
    return attrs({{"axes", std::move(a)}, {"keepdims", keep}});
  };
  for (const char* op : {"reduce_sum", "reduce_mean", "reduce_max"}) {
    SCOPED_TRACE(op);
    EXPECT_EQ(out(op, {f32({2, 3, 4})}, axes({1})), "f32[2, 4]");
    EXPECT_EQ(out(op, {f32({2, 3, 4})}, axes({1}, 1)), "f32[2, 1, 4]");
    EXPECT_EQ(out(op, {f32({2, 3, 4})}, axes({-1, 0})), "f32[3]");
    EXPECT_EQ(out(op, {f32({2, 3, 4})}), "f32[]");
    EXPECT_EQ(out(op, {f32({2, 3, 4})}, axes({}, 1)), "f32[1, 1, 1]");
    EXPECT_EQ(out(op, {f32({})}), "f32[]");
    EXPECT_TRUE(fails_with(
        [&] {
          infer(op, {f32({2, 3})}, axes({1, -1}));
        },
        GENIE_ERR_INVALID_ATTRIBUTE, "repeats axis 1"));
    EXPECT_TRUE(fails_with([&] { infer(op, {f32({2, 3})}, axes({2})); }, GENIE_ERR_INVALID_ATTRIBUTE));
    EXPECT_TRUE(fails_with(
        [&] {
          infer(op, {f32({2, 3})}, axes({0}, 2));
        },
        GENIE_ERR_INVALID_ATTRIBUTE, "keepdims"));
    EXPECT_TRUE(fails_with([&] { infer(op, {boolean({2})}); }, GENIE_ERR_DTYPE_MISMATCH));
  }
  EXPECT_EQ(out("reduce_sum", {i32({2, 3})}, axes({0})), "i32[3]");
  EXPECT_EQ(out("reduce_max", {i64({2, 3})}, axes({0})), "i64[3]");
  EXPECT_TRUE(fails_with([&] { infer("reduce_mean", {i32({2, 3})}); }, GENIE_ERR_DTYPE_MISMATCH, "float"));
}

TEST(Infer, Attention) {
  const ValueType q = f32({2, 8, 5, 64}), k = f32({2, 8, 7, 64}), v = f32({2, 8, 7, 32});
  EXPECT_EQ(out("attention", {q, k, v}), "f32[2, 8, 5, 32]");
  EXPECT_EQ(out("attention", {q, k, v, kOmitted}), "f32[2, 8, 5, 32]");
  EXPECT_EQ(out("attention", {q, k, v, boolean({5, 7})}), "f32[2, 8, 5, 32]");
  EXPECT_EQ(out("attention", {q, k, v, f32({2, 1, 1, 7})}, attrs({{"causal", int64_t{1}}, {"scale", 0.125}})),
            "f32[2, 8, 5, 32]");
  EXPECT_EQ(out("attention", {f16({5, 4}), f16({6, 4}), f16({6, 3})}), "f16[5, 3]");
  EXPECT_TRUE(fails_with(
      [&] {
        infer("attention", {q, k, v, boolean({5, 6})});
      },
      GENIE_ERR_SHAPE_MISMATCH, "mask"));
  EXPECT_TRUE(fails_with(
      [&] {
        infer("attention", {q, k, v, boolean({3, 2, 8, 5, 7})});
      },
      GENIE_ERR_SHAPE_MISMATCH));
  EXPECT_TRUE(fails_with(
      [&] {
        infer("attention", {q, k, v, i32({5, 7})});
      },
      GENIE_ERR_DTYPE_MISMATCH, "mask"));
  EXPECT_TRUE(fails_with([&] { infer("attention", {q, k, v, f16({5, 7})}); }, GENIE_ERR_DTYPE_MISMATCH));
  EXPECT_TRUE(fails_with(
      [&] {
        infer("attention", {q, f32({2, 8, 7, 32}), v});
      },
      GENIE_ERR_SHAPE_MISMATCH, "head"));
  EXPECT_TRUE(fails_with([&] { infer("attention", {q, k, f32({2, 8, 6, 32})}); }, GENIE_ERR_SHAPE_MISMATCH));
  EXPECT_TRUE(fails_with(
      [&] {
        infer("attention", {q, f32({1, 8, 7, 64}), v});
      },
      GENIE_ERR_SHAPE_MISMATCH, "leading"));
  EXPECT_TRUE(fails_with([&] { infer("attention", {q, f32({8, 7, 64}), v}); }, GENIE_ERR_SHAPE_MISMATCH));
  EXPECT_TRUE(fails_with(
      [] {
        infer("attention", {f32({4}), f32({4}), f32({4})});
      },
      GENIE_ERR_SHAPE_MISMATCH));
  EXPECT_TRUE(fails_with([&] { infer("attention", {q, f16({2, 8, 7, 64}), v}); }, GENIE_ERR_DTYPE_MISMATCH));
  EXPECT_TRUE(fails_with(
      [&] {
        infer("attention", {q, k, v}, attrs({{"causal", int64_t{2}}}));
      },
      GENIE_ERR_INVALID_ATTRIBUTE));
  EXPECT_TRUE(fails_with(
      [&] {
        infer("attention", {q, k, v}, attrs({{"scale", HUGE_VAL}}));
      },
      GENIE_ERR_INVALID_ATTRIBUTE, "scale"));
}

TEST(Infer, Conv2d) {
  const ValueType x = f32({1, 3, 32, 32}), w = f32({16, 3, 3, 3});
  auto ints = [](int64_t a, int64_t b) { return std::vector<int64_t>{a, b}; };
  EXPECT_EQ(out("conv2d", {x, w}), "f32[1, 16, 30, 30]");
  EXPECT_EQ(out("conv2d", {x, w, f32({16})}, attrs({{"padding", ints(1, 1)}})), "f32[1, 16, 32, 32]");
  EXPECT_EQ(out("conv2d", {x, w}, attrs({{"stride", ints(2, 2)}, {"padding", ints(1, 1)}})),
            "f32[1, 16, 16, 16]");
  EXPECT_EQ(out("conv2d", {x, w}, attrs({{"dilation", ints(2, 2)}})), "f32[1, 16, 28, 28]");
  EXPECT_EQ(out("conv2d", {x, w}, attrs({{"stride", ints(2, 1)}})), "f32[1, 16, 15, 30]");
  EXPECT_EQ(out("conv2d", {f32({2, 4, 8, 8}), f32({8, 2, 3, 3})}, attrs({{"groups", int64_t{2}}})),
            "f32[2, 8, 6, 6]");
  EXPECT_EQ(out("conv2d", {f32({1, 4, 5, 5}), f32({4, 1, 5, 5})}, attrs({{"groups", int64_t{4}}})),
            "f32[1, 4, 1, 1]");
  EXPECT_TRUE(fails_with(
      [&] {
        infer("conv2d", {x, f32({16, 4, 3, 3})});
      },
      GENIE_ERR_SHAPE_MISMATCH, "groups"));
  EXPECT_TRUE(fails_with(
      [&] {
        infer("conv2d", {f32({1, 4, 8, 8}), f32({6, 2, 3, 3})}, attrs({{"groups", int64_t{4}}}));
      },
      GENIE_ERR_SHAPE_MISMATCH));
  EXPECT_TRUE(fails_with([&] { infer("conv2d", {x, w, f32({15})}); }, GENIE_ERR_SHAPE_MISMATCH, "bias"));
  EXPECT_TRUE(fails_with(
      [&] {
        infer("conv2d", {f32({1, 3, 2, 2}), w});
      },
      GENIE_ERR_SHAPE_MISMATCH, "does not fit"));
  EXPECT_TRUE(fails_with(
      [&] {
        infer("conv2d", {f32({3, 32, 32}), w});
      },
      GENIE_ERR_SHAPE_MISMATCH, "rank 4"));
  EXPECT_TRUE(fails_with(
      [&] {
        infer("conv2d", {x, f32({16, 3, 0, 3})});
      },
      GENIE_ERR_SHAPE_MISMATCH, "empty"));
  EXPECT_TRUE(fails_with(
      [&] {
        infer("conv2d", {x, w}, attrs({{"stride", ints(0, 1)}}));
      },
      GENIE_ERR_INVALID_ATTRIBUTE, "stride"));
  EXPECT_TRUE(fails_with(
      [&] {
        infer("conv2d", {x, w}, attrs({{"padding", std::vector<int64_t>{1, 1, 1}}}));
      },
      GENIE_ERR_INVALID_ATTRIBUTE, "2 entries"));
  EXPECT_TRUE(fails_with(
      [&] {
        infer("conv2d", {x, w}, attrs({{"groups", int64_t{0}}}));
      },
      GENIE_ERR_INVALID_ATTRIBUTE));
  EXPECT_TRUE(fails_with(
      [&] {
        infer("conv2d", {x, w}, attrs({{"padding", ints(int64_t{1} << 62, 0)}}));
      },
      GENIE_ERR_TOO_LARGE));
  EXPECT_TRUE(fails_with(
      [&] {
        infer("conv2d", {x, w}, attrs({{"dilation", ints(INT64_MAX, 1)}}));
      },
      GENIE_ERR_TOO_LARGE));
  EXPECT_TRUE(fails_with([&] { infer("conv2d", {x, i32({16, 3, 3, 3})}); }, GENIE_ERR_DTYPE_MISMATCH));
}

TEST(Infer, Pool2d) {
  const ValueType x = f16({1, 3, 32, 32});
  auto ints = [](int64_t a, int64_t b) { return std::vector<int64_t>{a, b}; };
  for (const char* op : {"max_pool2d", "avg_pool2d"}) {
    SCOPED_TRACE(op);
    EXPECT_EQ(out(op, {x}, attrs({{"kernel", ints(2, 2)}})), "f16[1, 3, 16, 16]");
    EXPECT_EQ(out(op, {x}, attrs({{"kernel", ints(3, 3)}, {"stride", ints(2, 2)}, {"padding", ints(1, 1)}})),
              "f16[1, 3, 16, 16]");
    EXPECT_EQ(out(op, {x}, attrs({{"kernel", ints(3, 2)}, {"stride", ints(1, 1)}})), "f16[1, 3, 30, 31]");
    EXPECT_EQ(out(op, {f32({1, 1, 5, 5})}, attrs({{"kernel", ints(2, 2)}})), "f32[1, 1, 2, 2]");  // floor
    EXPECT_TRUE(fails_with(
        [&] {
          infer(op, {x}, attrs({{"kernel", ints(3, 3)}, {"padding", ints(2, 0)}}));
        },
        GENIE_ERR_INVALID_ATTRIBUTE, "half"));
    EXPECT_TRUE(fails_with([&] { infer(op, {x}); }, GENIE_ERR_INVALID_ATTRIBUTE, "'kernel'"));
    EXPECT_TRUE(fails_with(
        [&] {
          infer(op, {x}, attrs({{"kernel", ints(0, 2)}}));
        },
        GENIE_ERR_INVALID_ATTRIBUTE));
    EXPECT_TRUE(fails_with(
        [&] {
          infer(op, {x}, attrs({{"kernel", ints(33, 2)}}));
        },
        GENIE_ERR_SHAPE_MISMATCH));
    EXPECT_TRUE(fails_with(
        [&] {
          infer(op, {i32({1, 3, 4, 4})}, attrs({{"kernel", ints(2, 2)}}));
        },
        GENIE_ERR_DTYPE_MISMATCH));
  }
  for (const char* op : {"adaptive_avg_pool2d", "adaptive_max_pool2d"}) {
    SCOPED_TRACE(op);
    EXPECT_EQ(out(op, {x}, attrs({{"output_size", ints(7, 5)}})), "f16[1, 3, 7, 5]");
    EXPECT_EQ(out(op, {f32({2, 3, 4, 4})}, attrs({{"output_size", ints(8, 8)}})), "f32[2, 3, 8, 8]");
    EXPECT_TRUE(fails_with(
        [&] {
          infer(op, {x}, attrs({{"output_size", ints(0, 1)}}));
        },
        GENIE_ERR_INVALID_ATTRIBUTE));
    EXPECT_TRUE(fails_with([&] { infer(op, {x}); }, GENIE_ERR_INVALID_ATTRIBUTE, "'output_size'"));
    EXPECT_TRUE(fails_with(
        [&] {
          infer(op, {f32({3, 4, 4})}, attrs({{"output_size", ints(1, 1)}}));
        },
        GENIE_ERR_SHAPE_MISMATCH));
    EXPECT_TRUE(fails_with(
        [&] {
          infer(op, {f32({1, 3, 0, 4})}, attrs({{"output_size", ints(1, 1)}}));
        },
        GENIE_ERR_SHAPE_MISMATCH));
  }
}

}  // namespace
}  // namespace genie
