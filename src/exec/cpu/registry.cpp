#include "exec/cpu/registry.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "exec/cpu/kernel_util.hpp"
#include "exec/cpu/kernels.hpp"

namespace genie::cpu {

namespace {

const KernelTable& kernel_table() {
  // Built once (thread-safe static initialisation) and read-only afterwards.
  static const KernelTable table = [] {
    KernelTable t;
    add_elementwise_kernels(t);
    add_matmul_kernels(t);
    add_norm_kernels(t);
    add_layout_kernels(t);
    add_reduce_kernels(t);
    add_attention_kernels(t);
    add_conv_kernels(t);
    return t;
  }();
  return table;
}

}  // namespace

KernelFn find_kernel(const std::string& op) {
  const KernelTable& t = kernel_table();
  auto it = t.find(op);
  return it == t.end() ? nullptr : it->second;
}

std::vector<std::string> kernel_names() {
  std::vector<std::string> names;
  for (const auto& [op, fn] : kernel_table()) names.push_back(op);
  std::sort(names.begin(), names.end());
  return names;
}

void unsupported_dtype(const KernelArgs& a, DType t) {
  fail(GENIE_ERR_DTYPE_MISMATCH, "cpu kernel '", a.op, "' does not support dtype ", dtype_name(t));
}

std::vector<int64_t> broadcast_strides(const Shape& in, const Shape& out) {
  // Validation has checked this already; re-checking here is cheap and keeps a
  // mismatched call from reading out of bounds.
  auto mismatch = [&] {
    fail(GENIE_ERR_SHAPE_MISMATCH, "shape ", shape_str(in), " does not broadcast to ", shape_str(out));
  };
  if (in.size() > out.size()) mismatch();
  const std::vector<int64_t> own = strides_of(in);
  std::vector<int64_t> st(out.size(), 0);
  const size_t lead = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != 1 && in[i] != out[lead + i]) mismatch();
    st[lead + i] = in[i] == 1 ? 0 : own[i];
  }
  return st;
}

int64_t dims_product(const Shape& s, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i) p *= s[i];
  return p;
}

}  // namespace genie::cpu
