// conv2d through cuDNN (NCHW; stride, padding, dilation, groups; the bias
// added by a kernel of the backend's own, bias.cu). f16 and bf16 accumulate in f32 on tensor
// cores; f32 uses them (TF32) only when GENIE_CUDA_ALLOW_TF32=1.
#include <cudnn.h>

#include <array>
#include <climits>
#include <map>
#include <mutex>
#include <tuple>

#include "exec/cuda/bias.hpp"
#include "exec/cuda/blas.hpp"
#include "exec/cuda/cuda_kernels.hpp"
#include "exec/cuda/plugin_util.hpp"

namespace genie::cuda {

namespace {

constexpr size_t kMaxWorkspace = size_t{256} << 20;

void check_dnn(cudnnStatus_t s, const char* what) {
  if (s == CUDNN_STATUS_SUCCESS) return;
  fail(s == CUDNN_STATUS_ALLOC_FAILED ? GENIE_ERR_OUT_OF_MEMORY
       : s == CUDNN_STATUS_NOT_SUPPORTED ? GENIE_ERR_UNSUPPORTED
                                          : GENIE_ERR_INTERNAL,
       "cuDNN ", what, ": ", cudnnGetErrorString(s));
}

// A handle per stream (a handle's stream is its own state; streams are few
// and pooled by the backend, so the map stays small).
cudnnHandle_t handle_for(cudaStream_t s) {
  static std::mutex mu;
  static std::map<cudaStream_t, cudnnHandle_t> handles;
  std::lock_guard<std::mutex> lk(mu);
  cudnnHandle_t& h = handles[s];
  if (h == nullptr) {
    cudnnHandle_t created = nullptr;
    check_dnn(cudnnCreate(&created), "cudnnCreate");
    if (cudnnSetStream(created, s) != CUDNN_STATUS_SUCCESS) {
      cudnnDestroy(created);
      fail(GENIE_ERR_INTERNAL, "cuDNN: cudnnSetStream failed");
    }
    h = created;
  }
  return h;
}

cudnnDataType_t dnn_type(DType t) {
  switch (t) {
    case DType::F32: return CUDNN_DATA_FLOAT;
    case DType::F16: return CUDNN_DATA_HALF;
    case DType::BF16: return CUDNN_DATA_BFLOAT16;
    default: fail(GENIE_ERR_INVALID_ARGUMENT, "conv2d takes f32, f16 or bf16, not ", dtype_name(t));
  }
}

struct Descs {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  ~Descs() {
    if (x) cudnnDestroyTensorDescriptor(x);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
  }
};

int as_int(int64_t v, const char* what) {
  check(v >= 0 && v <= INT_MAX, GENIE_ERR_TOO_LARGE, "conv2d: ", what, " ", v, " exceeds cuDNN's range");
  return static_cast<int>(v);
}

using AlgoKey = std::tuple<int, int, std::array<int64_t, 4>, std::array<int64_t, 4>, std::array<int64_t, 7>, int>;

void conv2d(const KernelArgs& args) {
  const TensorData& x = *args.in[0];
  const TensorData& w = *args.in[1];
  const TensorData* bias = args.in.size() > 2 ? args.in[2] : nullptr;
  TensorData& out = *args.out[0];
  const DType dt = x.dtype();
  check(w.dtype() == dt && out.dtype() == dt && (!bias || bias->dtype() == dt), GENIE_ERR_INVALID_ARGUMENT,
        "conv2d: operands must share one dtype (", dtype_name(dt), ")");
  const Shape& sx = x.shape();
  const Shape& sw = w.shape();
  const Shape& so = out.shape();
  if (!(sx.size() == 4 && sw.size() == 4 && so.size() == 4))
    fail(GENIE_ERR_SHAPE_MISMATCH, "conv2d: x, weight and output must be 4-D (NCHW), got ", shape_str(sx),
         ", ", shape_str(sw), ", ", shape_str(so));
  const int64_t groups = args.attrs.get_int("groups", 1);
  const auto stride = attr_pair(args.attrs, args.op, "stride", {1, 1});
  const auto pad = attr_pair(args.attrs, args.op, "padding", {0, 0});
  const auto dil = attr_pair(args.attrs, args.op, "dilation", {1, 1});
  if (!(groups >= 1 && sx[1] == sw[1] * groups && sw[0] % groups == 0 && so[0] == sx[0] && so[1] == sw[0] &&
        stride[0] > 0 && stride[1] > 0 && dil[0] > 0 && dil[1] > 0 && pad[0] >= 0 && pad[1] >= 0))
    fail(GENIE_ERR_SHAPE_MISMATCH, "conv2d: x ", shape_str(sx), ", weight ", shape_str(sw), " and output ",
         shape_str(so), " do not fit the attributes");
  const int64_t ho = (sx[2] + 2 * pad[0] - dil[0] * (sw[2] - 1) - 1) / stride[0] + 1;
  const int64_t wo = (sx[3] + 2 * pad[1] - dil[1] * (sw[3] - 1) - 1) / stride[1] + 1;
  if (!(so[2] == ho && so[3] == wo))
    fail(GENIE_ERR_SHAPE_MISMATCH, "conv2d: output ", shape_str(so), " should be [", so[0], ", ", so[1], ", ",
         ho, ", ", wo, "]");
  if (bias && bias->numel() != sw[0])
    fail(GENIE_ERR_SHAPE_MISMATCH, "conv2d: bias ", shape_str(bias->shape()), " does not match ", sw[0],
         " output channels");
  if (out.numel() == 0) return;
  cudaStream_t s = stream_of(args);
  Lane& lane = static_cast<CudaQueue*>(args.queue)->lane();
  if (x.numel() == 0 || w.numel() == 0) {
    // No input channels: the output is the bias (or zero).
    check_cuda(cudaMemsetAsync(out.bytes(), 0, out.nbytes(), s), "cudaMemsetAsync");
    if (!bias) return;
  }
  cudnnHandle_t h = handle_for(s);
  const cudnnDataType_t type = dnn_type(dt);
  Descs d;
  check_dnn(cudnnCreateTensorDescriptor(&d.x), "cudnnCreateTensorDescriptor");
  check_dnn(cudnnCreateTensorDescriptor(&d.y), "cudnnCreateTensorDescriptor");
  check_dnn(cudnnCreateFilterDescriptor(&d.w), "cudnnCreateFilterDescriptor");
  check_dnn(cudnnCreateConvolutionDescriptor(&d.conv), "cudnnCreateConvolutionDescriptor");
  check_dnn(cudnnSetTensor4dDescriptor(d.x, CUDNN_TENSOR_NCHW, type, as_int(sx[0], "N"), as_int(sx[1], "C"),
                                       as_int(sx[2], "H"), as_int(sx[3], "W")),
            "x descriptor");
  check_dnn(cudnnSetTensor4dDescriptor(d.y, CUDNN_TENSOR_NCHW, type, as_int(so[0], "N"), as_int(so[1], "O"),
                                       as_int(so[2], "Ho"), as_int(so[3], "Wo")),
            "output descriptor");
  const float one = 1.f, zero = 0.f;
  if (x.numel() != 0 && w.numel() != 0) {
    check_dnn(cudnnSetFilter4dDescriptor(d.w, type, CUDNN_TENSOR_NCHW, as_int(sw[0], "O"), as_int(sw[1], "C/groups"),
                                         as_int(sw[2], "kh"), as_int(sw[3], "kw")),
              "weight descriptor");
    check_dnn(cudnnSetConvolution2dDescriptor(d.conv, as_int(pad[0], "padding"), as_int(pad[1], "padding"),
                                              as_int(stride[0], "stride"), as_int(stride[1], "stride"),
                                              as_int(dil[0], "dilation"), as_int(dil[1], "dilation"),
                                              CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
              "convolution descriptor");
    check_dnn(cudnnSetConvolutionGroupCount(d.conv, as_int(groups, "groups")), "group count");
    const cudnnMathType_t math = dt != DType::F32 ? CUDNN_TENSOR_OP_MATH
                                 : tf32_allowed() ? CUDNN_DEFAULT_MATH
                                                  : CUDNN_FMA_MATH;
    check_dnn(cudnnSetConvolutionMathType(d.conv, math), "math type");

    const AlgoKey key{lane.stream->device, static_cast<int>(dt), {sx[0], sx[1], sx[2], sx[3]},
                      {sw[0], sw[1], sw[2], sw[3]}, {stride[0], stride[1], pad[0], pad[1], dil[0], dil[1], groups},
                      static_cast<int>(math)};
    static std::mutex mu;
    static std::map<AlgoKey, std::pair<cudnnConvolutionFwdAlgo_t, size_t>> cache;
    std::pair<cudnnConvolutionFwdAlgo_t, size_t> algo{};
    bool found = false;
    {
      std::lock_guard<std::mutex> lk(mu);
      auto it = cache.find(key);
      if (it != cache.end()) algo = it->second, found = true;
    }
    if (!found) {
      cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
      int count = 0;
      check_dnn(cudnnGetConvolutionForwardAlgorithm_v7(h, d.x, d.w, d.conv, d.y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                                       &count, perf),
                "cudnnGetConvolutionForwardAlgorithm_v7");
      for (int i = 0; i < count && !found; ++i) {
        if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > kMaxWorkspace) continue;
        // The heuristic's figure may differ from what the algorithm needs here.
        size_t ws = 0;
        if (cudnnGetConvolutionForwardWorkspaceSize(h, d.x, d.w, d.conv, d.y, perf[i].algo, &ws) !=
                CUDNN_STATUS_SUCCESS ||
            ws > kMaxWorkspace)
          continue;
        algo = {perf[i].algo, ws};
        found = true;
      }
      if (!found)
        fail(GENIE_ERR_UNSUPPORTED, "cuDNN has no ", dtype_name(dt), " algorithm for conv2d of x ",
             shape_str(sx), " by weight ", shape_str(sw));
      std::lock_guard<std::mutex> lk(mu);
      cache.emplace(key, algo);
    }
    void* ws = algo.second > 0 ? lane.workspace(algo.second) : nullptr;
    check_dnn(cudnnConvolutionForward(h, &one, d.x, x.bytes(), d.w, w.bytes(), d.conv, algo.first, ws, algo.second,
                                      &zero, d.y, out.bytes()),
              "cudnnConvolutionForward");
  }
  if (bias) launch_channel_bias(out.bytes(), bias->bytes(), dt, so[0], so[1], so[2] * so[3], s);
}

}  // namespace

void add_conv_kernels(KernelTable& t) { t["conv2d"] = conv2d; }

}  // namespace genie::cuda
