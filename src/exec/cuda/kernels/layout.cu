// Layout kernels: reshape, flatten, transpose, permute, slice, concat,
// split, embedding. They move elements and never look at values (except
// embedding ids), so they work on every dtype by element size.
#include <numeric>

#include "exec/cuda/kernels/device_util.cuh"

namespace genie::cuda {

namespace {

// Calls f(E{}) with an unsigned type of the dtype's element size.
template <class F>
void visit_size(const KernelArgs& a, DType t, F&& f) {
  switch (dtype_size(t)) {
    case 1: return f(uint8_t{});
    case 2: return f(uint16_t{});
    case 4: return f(uint32_t{});
    case 8: return f(uint64_t{});
    default: unsupported(a, t);
  }
}

// Tensors are contiguous, so a reshape is a copy of the bytes.
void copy_bytes(const KernelArgs& k) {
  const TensorData& x = *k.in[0];
  TensorData& out = *k.out[0];
  expect_dtype(k, out, x.dtype());
  if (out.nbytes() != x.nbytes())
    fail(GENIE_ERR_SHAPE_MISMATCH, k.op, ": cannot view ", shape_str(x.shape()), " as ",
         shape_str(out.shape()));
  if (x.nbytes() == 0) return;
  check_cuda(cudaMemcpyAsync(out.bytes(), x.bytes(), x.nbytes(), cudaMemcpyDeviceToDevice, stream_of(k)),
             k.op.c_str());
}

// out[i] = x[offset + ix(i)] over the output's elements: transpose, permute
// and slice.
template <class E>
__global__ void gather_kernel(const E* __restrict__ x, E* __restrict__ out, int64_t n, Indexer<1> ix) {
  for (int64_t i = grid_start(); i < n; i += grid_stride()) out[i] = x[ix.offset(i)];
}

void gather(const KernelArgs& k, const std::vector<int64_t>& src_strides, int64_t src_offset) {
  const TensorData& x = *k.in[0];
  TensorData& out = *k.out[0];
  expect_dtype(k, out, x.dtype());
  const int64_t n = out.numel();
  if (n == 0) return;
  const Indexer<1> ix = make_indexer<1>(out.shape(), {src_strides});
  visit_size(k, x.dtype(), [&](auto tag) {
    using E = decltype(tag);
    gather_kernel<E>
        <<<blocks_for(n), kThreads, 0, stream_of(k)>>>(dev<E>(x) + src_offset, dev<E>(out), n, ix);
    check_launch(k.op.c_str());
  });
}

void permute_by(const KernelArgs& k, const std::vector<int64_t>& perm) {
  const Shape& xs = k.in[0]->shape();
  const Shape& os = k.out[0]->shape();
  std::vector<int64_t> st = permuted_strides(xs, perm);
  bool fits = os.size() == xs.size();
  for (size_t i = 0; fits && i < perm.size(); ++i) fits = os[i] == xs[static_cast<size_t>(perm[i])];
  if (!fits)
    fail(GENIE_ERR_SHAPE_MISMATCH, k.op, ": output ", shape_str(os), " is not a permutation of ",
         shape_str(xs));
  gather(k, st, 0);
}

void permute(const KernelArgs& k) {
  if (!k.attrs.has("perm")) fail(GENIE_ERR_INVALID_ATTRIBUTE, "permute: attribute 'perm' is required");
  permute_by(k, k.attrs.get_ints("perm", {}));
}

void transpose(const KernelArgs& k) {
  const auto rank = static_cast<int64_t>(k.in[0]->shape().size());
  if (rank < 2) return copy_bytes(k);  // every swap of a single dim is the identity
  std::vector<int64_t> perm(static_cast<size_t>(rank));
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[static_cast<size_t>(normalize_axis(k.attrs.get_int("dim0", -2), rank, "dim0"))],
            perm[static_cast<size_t>(normalize_axis(k.attrs.get_int("dim1", -1), rank, "dim1"))]);
  permute_by(k, perm);
}

void slice(const KernelArgs& k) {
  const Shape& xs = k.in[0]->shape();
  const Shape& os = k.out[0]->shape();
  if (!k.attrs.has("axis")) fail(GENIE_ERR_INVALID_ATTRIBUTE, "slice: attribute 'axis' is required");
  const auto axis =
      static_cast<size_t>(normalize_axis(k.attrs.get_int("axis", 0), static_cast<int64_t>(xs.size())));
  const int64_t len = xs[axis];
  const int64_t step = k.attrs.get_int("step", 1);
  const SliceRange r = slice_range(len, k.attrs.get_int("start", 0), k.attrs.get_int("end", len), step);
  Shape want = xs;
  want[axis] = r.count;
  if (os != want)
    fail(GENIE_ERR_SHAPE_MISMATCH, "slice: output ", shape_str(os), " should be ", shape_str(want));
  std::vector<int64_t> st = strides_of(xs);
  const int64_t offset = r.start * st[axis];
  st[axis] *= step;
  gather(k, st, offset);
}

// --- concat, split -----------------------------------------------------------

// dst[o·dst_row + j] = src[o·src_row + j] for o < rows, j < len.
template <class E>
__global__ void copy_rows(const E* __restrict__ src, int64_t src_row, E* __restrict__ dst, int64_t dst_row,
                          int64_t rows, int64_t len) {
  const int64_t n = rows * len;
  for (int64_t i = grid_start(); i < n; i += grid_stride()) {
    const int64_t o = i / len;
    const int64_t j = i - o * len;
    dst[o * dst_row + j] = src[o * src_row + j];
  }
}

template <class E>
void launch_copy_rows(const KernelArgs& k, const E* src, int64_t src_row, E* dst, int64_t dst_row,
                      int64_t rows, int64_t len) {
  if (rows * len == 0) return;
  copy_rows<E><<<blocks_for(rows * len), kThreads, 0, stream_of(k)>>>(src, src_row, dst, dst_row, rows, len);
  check_launch(k.op.c_str());
}

std::vector<Shape> shapes_of(const KernelArgs& k, const std::vector<const TensorData*>& parts, DType dtype) {
  std::vector<Shape> s;
  for (const TensorData* p : parts) {
    expect_dtype(k, *p, dtype);
    s.push_back(p->shape());
  }
  return s;
}

void concat(const KernelArgs& k) {
  TensorData& out = *k.out[0];
  const AxisTiling t = tile_axis(out.shape(), shapes_of(k, k.in, out.dtype()), k.attrs.get_int("axis", 0));
  visit_size(k, out.dtype(), [&](auto tag) {
    using E = decltype(tag);
    int64_t at = 0;
    for (size_t p = 0; p < k.in.size(); ++p) {
      launch_copy_rows<E>(k, dev<E>(*k.in[p]), t.part_rows[p], dev<E>(out) + at, t.whole_row, t.outer,
                          t.part_rows[p]);
      at += t.part_rows[p];
    }
  });
}

// The split points come from the output shapes, which the graph derived from `sizes`.
void split(const KernelArgs& k) {
  const TensorData& x = *k.in[0];
  const AxisTiling t =
      tile_axis(x.shape(), shapes_of(k, {k.out.begin(), k.out.end()}, x.dtype()), k.attrs.get_int("axis", 0));
  visit_size(k, x.dtype(), [&](auto tag) {
    using E = decltype(tag);
    int64_t at = 0;
    for (size_t p = 0; p < k.out.size(); ++p) {
      launch_copy_rows<E>(k, dev<E>(x) + at, t.whole_row, dev<E>(*k.out[p]), t.part_rows[p], t.outer,
                          t.part_rows[p]);
      at += t.part_rows[p];
    }
  });
}

// --- embedding ---------------------------------------------------------------

// out[r, c] = weight[ids[r], c] over `cols` columns per id (d, or 1 when
// d == 0: the ids are still checked, nothing is written); an id outside
// [0, vocab) reports its position r to the error word and leaves zeros.
template <class Id, class E>
__global__ void embedding_kernel(const Id* __restrict__ ids, const E* __restrict__ weight,
                                 E* __restrict__ out, int64_t n_ids, int64_t d, int64_t cols, int64_t vocab,
                                 unsigned long long* error) {
  const int64_t n = n_ids * cols;
  for (int64_t i = grid_start(); i < n; i += grid_stride()) {
    const int64_t r = i / cols;
    const auto id = static_cast<int64_t>(ids[r]);
    const bool valid = id >= 0 && id < vocab;
    if (!valid) report_error(error, r);
    if (d > 0) out[i] = valid ? weight[id * d + (i - r * d)] : E{};
  }
}

void embedding(const KernelArgs& k) {
  const TensorData& ids = *k.in[0];
  const TensorData& weight = *k.in[1];
  TensorData& out = *k.out[0];
  expect_dtype(k, out, weight.dtype());
  if (weight.shape().size() != 2 || out.numel() != ids.numel() * weight.shape()[1])
    fail(GENIE_ERR_SHAPE_MISMATCH, "embedding: weight ", shape_str(weight.shape()), " and ids ",
         shape_str(ids.shape()), " do not give ", shape_str(out.shape()));
  if (ids.dtype() != DType::I32 && ids.dtype() != DType::I64) unsupported(k, ids.dtype());
  if (ids.numel() == 0) return;
  const int64_t vocab = weight.shape()[0];
  const int64_t d = weight.shape()[1];
  const int64_t cols = d > 0 ? d : 1;
  DeviceErrorWord word(stream_of(k));
  visit_size(k, weight.dtype(), [&](auto tag) {
    using E = decltype(tag);
    auto launch = [&](auto id_tag) {
      using Id = decltype(id_tag);
      embedding_kernel<Id, E><<<blocks_for(ids.numel() * cols), kThreads, 0, stream_of(k)>>>(
          dev<Id>(ids), dev<E>(weight), dev<E>(out), ids.numel(), d, cols, vocab, word.get());
      check_launch("embedding");
    };
    if (ids.dtype() == DType::I32) {
      launch(int32_t{});
    } else {
      launch(int64_t{});
    }
  });
  const unsigned long long at = word.read();
  if (at != DeviceErrorWord::kNone)
    fail(GENIE_ERR_INVALID_ARGUMENT, "embedding: the id at index ", at, " is outside the vocabulary [0, ",
         vocab, ")");
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

}  // namespace genie::cuda
