// `genie run GRAPH.json|MODEL.onnx`: load a graph (or import an ONNX model,
// its initializers uploaded once as resident weights), bind every input
// (from a .npy file or with seeded values), run it, print each output's
// shape, dtype and checksum, and the latency.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include <genie_seed.h>
#include "cli.hpp"
#include "npy.hpp"

namespace genie_cli {

void print_run_usage(std::FILE* out) {
  std::fprintf(out,
               "usage: genie run GRAPH.json|MODEL.onnx [--input NAME=FILE.npy]... [--repeat N]\n"
               "                 [--threads N]\n"
               "\n"
               "Loads a graph (docs/graph-format.md), or imports an ONNX model (a file\n"
               "whose name ends in .onnx; docs/onnx.md), binds each graph input to a tensor\n"
               "on \"cpu\", submits it N times (default 1) and prints, for each output:\n"
               "  output NAME shape [D0, D1, ...] dtype DTYPE\n"
               "  checksum NAME VALUE\n"
               "then the latency from submission to completion: p50 and min over the runs.\n"
               "An ONNX model's initializers are uploaded once, before the runs, to the\n"
               "context's default device, and bound as the graph's weight inputs.\n"
               "\n"
               "  --input NAME=FILE.npy  values of input NAME from a .npy file: C order,\n"
               "                         little-endian <f4 <f2 <i4 <i8 or |b1, the dtype\n"
               "                         and shape the graph declares (a -1 dimension takes\n"
               "                         the file's size). bf16 inputs cannot come from .npy.\n"
               "  --repeat N             submissions to run and time (default 1)\n"
               "  --threads N            Genie worker threads (0 = all cores); the\n"
               "                         GENIE_NUM_THREADS environment variable overrides it\n"
               "\n"
               "Inputs without --input get seeded values, a function of the input's name,\n"
               "dtype and shape only (include/genie_seed.h): state = FNV-1a 64 of the\n"
               "name, splitmix64 stream; floats uniform in [-s, s) with s = 1/sqrt(last\n"
               "dimension) (1 for a scalar); integers next() %% 16; bools next() & 1. Every\n"
               "dimension must then be static.\n"
               "\n"
               "checksum = the sum of all elements, each converted to double, added in\n"
               "index order in double precision, printed with %%.6g. Equal outputs give equal\n"
               "checksums on any machine; a last digit may differ where a BLAS rounds\n"
               "differently.\n");
}

namespace {

struct RunOptions {
  std::string graph_path;
  std::vector<std::string> input_args;  // "NAME=FILE", split once the input names are known
  int repeat = 1;
  int threads = -1;  // -1: not given
  bool help = false;
};

RunOptions parse_args(int argc, char** argv) {
  RunOptions o;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      o.help = true;
      return o;
    }
    if (a == "--input" || a == "--repeat" || a == "--threads") {
      if (i + 1 >= argc) usage_error(a + " needs a value");
      const char* v = argv[++i];
      if (a == "--input")
        o.input_args.emplace_back(v);
      else if (a == "--repeat")
        o.repeat = static_cast<int>(parse_long(a, v, 1, 1000000));
      else
        o.threads = static_cast<int>(parse_long(a, v, 0, 1024));
    } else if (a.size() > 1 && a[0] == '-') {
      usage_error("unknown option '" + a + "' (try 'genie help run')");
    } else if (o.graph_path.empty()) {
      o.graph_path = a;
    } else {
      usage_error("one graph at a time: unexpected argument '" + a + "'");
    }
  }
  if (o.graph_path.empty()) usage_error("run needs a graph file (try 'genie help run')");
  return o;
}

std::string join(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
  return s.empty() ? "(none)" : s;
}

// "1 node", "19 nodes".
std::string count(size_t n, const char* noun) { return std::to_string(n) + " " + noun + (n == 1 ? "" : "s"); }

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// Maps each --input NAME=FILE to a graph input. Names may themselves
// contain '=', so the split is the first '=' whose left side is an input.
std::map<std::string, std::string> resolve_inputs(const std::vector<std::string>& args,
                                                  const std::vector<std::string>& inputs) {
  std::map<std::string, std::string> files;
  for (const std::string& arg : args) {
    size_t eq = arg.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == arg.size())
      usage_error("--input needs NAME=FILE.npy, got '" + arg + "'");
    const size_t first_eq = eq;
    while (eq != std::string::npos &&
           std::find(inputs.begin(), inputs.end(), arg.substr(0, eq)) == inputs.end())
      eq = arg.find('=', eq + 1);
    if (eq == std::string::npos)
      usage_error("unknown input '" + arg.substr(0, first_eq) + "': the graph's inputs are " + join(inputs));
    const std::string name = arg.substr(0, eq);
    if (!files.emplace(name, arg.substr(eq + 1)).second) usage_error("input '" + name + "' is given twice");
  }
  return files;
}

struct Input {
  std::string name;
  genie_dtype_t dtype = GENIE_DTYPE_INVALID;
  std::vector<int64_t> shape;  // declared; -1 = dynamic
  std::string file;            // empty: seeded values
};

bool is_onnx_path(const std::string& path) {
  const std::string ext = ".onnx";
  return path.size() > ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0;
}

bool is_dynamic(const Input& in) {
  return std::any_of(in.shape.begin(), in.shape.end(), [](int64_t d) { return d < 0; });
}

// Allocates the tensor for `in` and writes its values (from its file or
// seeded).
TensorPtr make_input(genie_context_t* ctx, const Input& in) {
  std::vector<int64_t> shape = in.shape;
  std::string data;
  if (!in.file.empty()) {
    NpyArray arr = parse_npy(read_file(in.file, "input file"), in.file);
    if (arr.dtype != in.dtype)
      failure(in.file + ": holds " + genie_dtype_name(arr.dtype) + " (" + npy_descr(arr.dtype) +
              ") but input '" + in.name + "' is " + genie_dtype_name(in.dtype) + " (" + npy_descr(in.dtype) +
              ")");
    bool fits = arr.shape.size() == in.shape.size();
    for (size_t i = 0; fits && i < in.shape.size(); ++i)
      fits = in.shape[i] < 0 || in.shape[i] == arr.shape[i];
    if (!fits)
      failure(in.file + ": has shape " + shape_str(arr.shape) + " but input '" + in.name + "' is " +
              shape_str(in.shape) + " (-1 = any size)");
    shape = arr.shape;
    data = std::move(arr.data);
  } else {
    if (is_dynamic(in))
      failure("input '" + in.name + "' has a dynamic shape " + shape_str(in.shape) +
              ": give its values with --input " + in.name + "=FILE.npy");
  }
  // The tensor first: Genie refuses a size beyond the machine's memory with
  // OUT_OF_MEMORY before this program tries to hold the values.
  genie_tensor_t* raw = nullptr;
  check(genie_tensor_alloc(ctx, in.dtype, shape.data(), shape.size(), "cpu", &raw),
        "allocating input '" + in.name + "'");
  TensorPtr t(raw);
  if (in.file.empty()) {
    const size_t bytes = genie_seed_count(shape.data(), shape.size()) * genie_dtype_size(in.dtype);
    try {
      data.resize(bytes);
    } catch (const std::bad_alloc&) {
      failure("GENIE_ERR_OUT_OF_MEMORY: no memory for the " + std::to_string(bytes) + " seeded bytes of input '" +
              in.name + "'");
    }
    genie_seed_fill(in.name.c_str(), in.dtype, shape.data(), shape.size(), data.data());
  }
  check(genie_tensor_write(t.get(), 0, data.data(), data.size()), "writing input '" + in.name + "'");
  return t;
}

void print_output(genie_future_t* fut, size_t index, const std::string& name) {
  genie_tensor_t* raw = nullptr;
  check(genie_future_output(fut, index, &raw), "output '" + name + "'");
  TensorPtr t(raw);
  genie_dtype_t dtype = GENIE_DTYPE_INVALID;
  int64_t dims[GENIE_MAX_DIMS];
  size_t ndim = 0, nbytes = 0;
  check(genie_tensor_info(t.get(), &dtype, dims, &ndim, &nbytes), "output '" + name + "'");
  std::string data(nbytes, '\0');
  check(genie_tensor_read(t.get(), 0, data.data(), nbytes), "reading output '" + name + "'");
  std::printf("output %s shape %s dtype %s\n", name.c_str(),
              shape_str(std::vector<int64_t>(dims, dims + ndim)).c_str(), genie_dtype_name(dtype));
  std::printf("checksum %s %.6g\n", name.c_str(),
              genie_checksum(dtype, data.data(), nbytes / genie_dtype_size(dtype)));
}

}  // namespace

int run_command(int argc, char** argv) {
  const RunOptions opt = parse_args(argc, argv);
  if (opt.help) {
    print_run_usage(stdout);
    return kExitOk;
  }
  const bool onnx = is_onnx_path(opt.graph_path);
  const std::string text = read_file(opt.graph_path, onnx ? "model" : "graph");

  genie_config_t* raw_config = nullptr;
  check(genie_config_create(&raw_config), "genie_config_create");
  const ConfigPtr config(raw_config);
  if (opt.threads >= 0) check(genie_config_set_num_threads(config.get(), opt.threads), "--threads");
  genie_context_t* raw_ctx = nullptr;
  check(genie_init(config.get(), &raw_ctx), "genie_init");
  const ContextPtr ctx(raw_ctx);  // declared before every tensor: shut down last

  genie_graph_t* raw_graph = nullptr;
  std::vector<TensorPtr> weights;  // an ONNX model's initializers, resident
  if (onnx) {
    genie_tensor_t** raw_weights = nullptr;
    size_t n_weights = 0;
    check(genie_graph_import_onnx(ctx.get(), text.data(), text.size(), nullptr, &raw_graph, &raw_weights,
                                  &n_weights),
          opt.graph_path);
    for (size_t i = 0; i < n_weights; ++i) weights.emplace_back(raw_weights[i]);
    genie_free(raw_weights);
  } else {
    check(genie_graph_from_json(text.data(), text.size(), &raw_graph), opt.graph_path);
  }
  const GraphPtr graph(raw_graph);
  std::vector<std::string> input_names, weight_names, output_names;
  size_t n_in = 0, n_out_declared = 0;
  check(genie_graph_num_inputs(graph.get(), &n_in), opt.graph_path);
  check(genie_graph_num_outputs(graph.get(), &n_out_declared), opt.graph_path);
  // The weights are the last inputs (genie_graph_import_onnx).
  for (size_t i = n_in - weights.size(); i < n_in; ++i) {
    const char* name = nullptr;
    check(genie_graph_input_name(graph.get(), i, &name), opt.graph_path);
    weight_names.emplace_back(name);
  }
  n_in -= weights.size();
  for (size_t i = 0; i < n_in; ++i) {
    const char* name = nullptr;
    check(genie_graph_input_name(graph.get(), i, &name), opt.graph_path);
    input_names.emplace_back(name);
  }
  for (size_t i = 0; i < n_out_declared; ++i) {
    const char* name = nullptr;
    check(genie_graph_output_name(graph.get(), i, &name), opt.graph_path);
    output_names.emplace_back(name);
  }
  std::map<std::string, std::string> files = resolve_inputs(opt.input_args, input_names);

  std::vector<Input> inputs;
  bool dynamic = false;
  for (const std::string& name : input_names) {
    Input in;
    in.name = name;
    int64_t dims[GENIE_MAX_DIMS];
    size_t ndim = 0;
    check(genie_graph_value_info(graph.get(), name.c_str(), &in.dtype, dims, &ndim),
          opt.graph_path + ": input '" + name + "'");
    in.shape.assign(dims, dims + ndim);
    if (auto f = files.find(name); f != files.end()) in.file = f->second;
    dynamic = dynamic || is_dynamic(in);
    inputs.push_back(std::move(in));
  }
  // With dynamic dimensions the graph's types are known only once the
  // inputs are bound: submission validates it then.
  if (!dynamic) check(genie_graph_validate(graph.get()), opt.graph_path);
  size_t n_nodes = 0;
  check(genie_graph_num_nodes(graph.get(), &n_nodes), opt.graph_path);

  std::vector<TensorPtr> tensors;
  std::vector<genie_tensor_t*> bound;
  std::vector<const char*> names;
  for (const Input& in : inputs) {
    tensors.push_back(make_input(ctx.get(), in));
    bound.push_back(tensors.back().get());
    names.push_back(in.name.c_str());
  }
  size_t weight_bytes = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    bound.push_back(weights[i].get());
    names.push_back(weight_names[i].c_str());
    size_t nbytes = 0;
    check(genie_tensor_info(weights[i].get(), nullptr, nullptr, nullptr, &nbytes), weight_names[i]);
    weight_bytes += nbytes;
  }
  std::printf("%s %s: %s, %s (%zu from .npy, the rest seeded), ", onnx ? "model" : "graph",
              opt.graph_path.c_str(), count(n_nodes, "node").c_str(), count(inputs.size(), "input").c_str(),
              files.size());
  if (onnx) std::printf("%s (%zu bytes, resident), ", count(weights.size(), "weight").c_str(), weight_bytes);
  std::printf("%s\n", count(output_names.size(), "output").c_str());

  FuturePtr fut;
  std::vector<double> ms;
  for (int r = 0; r < opt.repeat; ++r) {
    fut.reset();  // keep only the last run's outputs
    genie_future_t* raw_fut = nullptr;
    const auto t0 = std::chrono::steady_clock::now();
    check(genie_graph_submit(ctx.get(), graph.get(), names.data(), bound.data(), bound.size(), &raw_fut),
          "submitting " + opt.graph_path);
    fut.reset(raw_fut);
    check(genie_future_wait(fut.get(), -1), "running " + opt.graph_path);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }

  size_t n_out = 0;
  check(genie_future_num_outputs(fut.get(), &n_out), "genie_future_num_outputs");
  if (n_out != output_names.size())
    failure(opt.graph_path + ": the graph lists " + std::to_string(output_names.size()) +
            " outputs but the run produced " + std::to_string(n_out));
  for (size_t i = 0; i < n_out; ++i) print_output(fut.get(), i, output_names[i]);

  std::sort(ms.begin(), ms.end());
  std::printf("latency p50 %.3f ms min %.3f ms (%s)\n", ms[ms.size() / 2], ms.front(),
              count(ms.size(), "run").c_str());
  return kExitOk;
}

}  // namespace genie_cli
