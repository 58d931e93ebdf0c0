// Layout kernels: reshape, flatten, transpose, permute, concat, split, slice,
// embedding. They move bytes and never look at values (except embedding ids),
// so they work on every dtype by element size.
#include <algorithm>
#include <cstring>
#include <numeric>

#include "exec/cpu/kernel_util.hpp"

namespace genie::cpu {

namespace {

// Tensors are contiguous, so a reshape is a copy of the bytes.
void copy_bytes(const KernelArgs& a) {
  const TensorData& x = *a.in[0];
  TensorData& out = *a.out[0];
  expect_dtype(a, out, x.dtype());
  if (out.nbytes() != x.nbytes())
    fail(GENIE_ERR_SHAPE_MISMATCH, a.op, ": cannot view ", shape_str(x.shape()), " as ",
         shape_str(out.shape()));
  std::memcpy(out.bytes(), x.bytes(), x.nbytes());
}

template <class E>
void gather_strided(const KernelArgs& a, const TensorData& x, TensorData& out, const std::vector<int64_t>& src_strides,
                    int64_t src_offset) {
  const E* px = reinterpret_cast<const E*>(x.bytes()) + src_offset;
  E* po = reinterpret_cast<E*>(out.bytes());
  const Shape& s = out.shape();
  parallel_rows(a, make_loop<2>(s, {strides_of(s), src_strides}), kGrainCheap,
               [&](const auto& off, int64_t n, const auto& st) {
                 E* o = po + off[0];
                 const E* src = px + off[1];
                 if (st[1] == 1) {
                   std::copy_n(src, n, o);
                 } else {
                   for (int64_t i = 0; i < n; ++i) o[i] = src[i * st[1]];
                 }
               });
}

// out[i...] = x[src_offset + Σ i_d · src_strides[d]] over the output's shape:
// the one loop behind transpose, permute and slice.
void gather(const KernelArgs& a, const std::vector<int64_t>& src_strides, int64_t src_offset) {
  const TensorData& x = *a.in[0];
  TensorData& out = *a.out[0];
  expect_dtype(a, out, x.dtype());
  switch (dtype_size(x.dtype())) {
    case 1:
      return gather_strided<uint8_t>(a, x, out, src_strides, src_offset);
    case 4:
      return gather_strided<uint32_t>(a, x, out, src_strides, src_offset);
    case 8:
      return gather_strided<uint64_t>(a, x, out, src_strides, src_offset);
    default:
      unsupported_dtype(a, x.dtype());
  }
}

void permute_by(const KernelArgs& a, const std::vector<int64_t>& perm) {
  const Shape& xs = a.in[0]->shape();
  const Shape& os = a.out[0]->shape();
  std::vector<bool> seen(xs.size());
  bool valid = perm.size() == xs.size() && os.size() == xs.size();
  for (size_t i = 0; valid && i < perm.size(); ++i) {
    valid =
        perm[i] >= 0 && perm[i] < static_cast<int64_t>(xs.size()) && !seen[perm[i]] && os[i] == xs[perm[i]];
    if (valid) seen[perm[i]] = true;
  }
  if (!valid)
    fail(GENIE_ERR_INVALID_ATTRIBUTE, a.op, ": invalid permutation of ", shape_str(xs), " into ",
         shape_str(os));
  const std::vector<int64_t> own = strides_of(xs);
  std::vector<int64_t> src(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) src[i] = own[perm[i]];
  gather(a, src, 0);
}

void permute(const KernelArgs& a) {
  if (!a.attrs.has("perm")) fail(GENIE_ERR_INVALID_ATTRIBUTE, "permute: attribute 'perm' is required");
  permute_by(a, a.attrs.get_ints("perm", {}));
}

void transpose(const KernelArgs& a) {
  const auto rank = static_cast<int64_t>(a.in[0]->shape().size());
  // With a single dim every swap is the identity (and the default -2 has no meaning).
  if (rank < 2) return copy_bytes(a);
  std::vector<int64_t> perm(rank);
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[normalize_axis(a.attrs.get_int("dim0", -2), rank, "dim0")],
            perm[normalize_axis(a.attrs.get_int("dim1", -1), rank, "dim1")]);
  permute_by(a, perm);
}

void slice(const KernelArgs& a) {
  const Shape& xs = a.in[0]->shape();
  const Shape& os = a.out[0]->shape();
  if (!a.attrs.has("axis")) fail(GENIE_ERR_INVALID_ATTRIBUTE, "slice: attribute 'axis' is required");
  const auto axis = static_cast<size_t>(normalize_axis(a.attrs.get_int("axis", 0), xs.size()));
  const int64_t len = xs[axis];
  const int64_t step = a.attrs.get_int("step", 1);
  check(step > 0, GENIE_ERR_INVALID_ATTRIBUTE, "slice: step must be > 0, got ", step);
  // Python's slice.indices for a positive step.
  auto clamp_index = [len](int64_t i) { return std::clamp(i < 0 ? i + len : i, int64_t{0}, len); };
  const int64_t start = clamp_index(a.attrs.get_int("start", 0));
  const int64_t end = clamp_index(a.attrs.get_int("end", len));
  const int64_t count = end > start ? (end - start + step - 1) / step : 0;
  Shape want = xs;
  want[axis] = count;
  if (os != want)
    fail(GENIE_ERR_SHAPE_MISMATCH, "slice: output ", shape_str(os), " should be ", shape_str(want));
  std::vector<int64_t> src = strides_of(xs);
  const int64_t offset = start * src[axis];
  src[axis] *= step;
  gather(a, src, offset);
}

// concat and split: `whole` cut along `axis` into `parts`, seen as `outer`
// rows of bytes, each part taking a slice of every row.
struct Tiling {
  int64_t outer;
  size_t whole_row;
  std::vector<size_t> part_rows;
};

Tiling tiling(const KernelArgs& a, const TensorData& whole, const std::vector<const TensorData*>& parts) {
  const Shape& ws = whole.shape();
  const auto axis = static_cast<size_t>(normalize_axis(a.attrs.get_int("axis", 0), ws.size()));
  const auto inner_bytes =
      static_cast<size_t>(dims_product(ws, axis + 1, ws.size())) * dtype_size(whole.dtype());
  Tiling t{dims_product(ws, 0, axis), static_cast<size_t>(ws[axis]) * inner_bytes, {}};
  int64_t total = 0;
  for (const TensorData* p : parts) {
    expect_dtype(a, *p, whole.dtype());
    const Shape& ps = p->shape();
    bool fits = ps.size() == ws.size();
    for (size_t d = 0; fits && d < ws.size(); ++d) fits = d == axis || ps[d] == ws[d];
    if (!fits)
      fail(GENIE_ERR_SHAPE_MISMATCH, a.op, ": ", shape_str(ps), " is not a piece of ", shape_str(ws),
           " along axis ", axis);
    total += ps[axis];
    t.part_rows.push_back(static_cast<size_t>(ps[axis]) * inner_bytes);
  }
  if (total != ws[axis]) fail(GENIE_ERR_SHAPE_MISMATCH, a.op, ": pieces do not add up to ", shape_str(ws));
  return t;
}

void concat(const KernelArgs& a) {
  TensorData& out = *a.out[0];
  const Tiling t = tiling(a, out, a.in);
  size_t at = 0;
  for (size_t p = 0; p < a.in.size(); ++p) {
    const size_t len = t.part_rows[p];
    for (int64_t o = 0; o < t.outer; ++o)
      std::memcpy(out.bytes() + o * t.whole_row + at, a.in[p]->bytes() + o * len, len);
    at += len;
  }
}

// The split points come from the output shapes, which the graph derived from `sizes`.
void split(const KernelArgs& a) {
  const TensorData& x = *a.in[0];
  const Tiling t = tiling(a, x, {a.out.begin(), a.out.end()});
  // Rows of the input are independent: split them, each copying its slice to every part.
  const int64_t grain = (kGrainCheap * 4 + static_cast<int64_t>(t.whole_row) - 1) /
                        std::max<int64_t>(static_cast<int64_t>(t.whole_row), 1);
  parallel_for(a, t.outer, grain, [&](int64_t begin, int64_t end) {
    size_t at = 0;
    for (size_t p = 0; p < a.out.size(); ++p) {
      const size_t len = t.part_rows[p];
      for (int64_t o = begin; o < end; ++o)
        std::memcpy(a.out[p]->bytes() + o * len, x.bytes() + o * t.whole_row + at, len);
      at += len;
    }
  });
}

template <class Id>
void embedding_rows(const TensorData& ids, const TensorData& weight, TensorData& out) {
  const int64_t vocab = weight.shape()[0];
  const auto row_bytes = static_cast<size_t>(weight.shape()[1]) * dtype_size(weight.dtype());
  const Id* p = ids.data<Id>();
  for (int64_t i = 0, n = ids.numel(); i < n; ++i) {
    const auto id = static_cast<int64_t>(p[i]);
    check(id >= 0 && id < vocab, GENIE_ERR_INVALID_ARGUMENT, "embedding: id ", id, " at index ", i,
          " is outside the vocabulary [0, ", vocab, ")");
    std::memcpy(out.bytes() + i * row_bytes, weight.bytes() + id * row_bytes, row_bytes);
  }
}

void embedding(const KernelArgs& a) {
  const TensorData& ids = *a.in[0];
  const TensorData& weight = *a.in[1];
  TensorData& out = *a.out[0];
  expect_dtype(a, out, weight.dtype());
  if (weight.shape().size() != 2 || out.numel() != ids.numel() * weight.shape()[1])
    fail(GENIE_ERR_SHAPE_MISMATCH, "embedding: weight ", shape_str(weight.shape()), " and ids ",
         shape_str(ids.shape()), " do not give ", shape_str(out.shape()));
  switch (ids.dtype()) {
    case DType::I32:
      return embedding_rows<int32_t>(ids, weight, out);
    case DType::I64:
      return embedding_rows<int64_t>(ids, weight, out);
    default:
      unsupported_dtype(a, ids.dtype());
  }
}

}  // namespace

void add_layout_kernels(KernelTable& t) {
  t["reshape"] = copy_bytes;
  t["flatten"] = copy_bytes;
  t["transpose"] = transpose;
  t["permute"] = permute;
  t["slice"] = slice;
  t["concat"] = concat;
  t["split"] = split;
  t["embedding"] = embedding;
}

}  // namespace genie::cpu
