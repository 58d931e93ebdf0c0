#include "capi/context.hpp"

#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <random>
#include <unordered_map>

#include "core/error.hpp"
#include "core/log.hpp"

namespace genie {

// ---------------------------------------------------------------------------
// FutureState
// ---------------------------------------------------------------------------

void FutureState::complete(ExecResult&& r) {
  genie_future_callback_t cb = nullptr;
  void* user = nullptr;
  genie_future_t* handle = nullptr;
  genie_status_t status;
  {
    std::lock_guard<std::mutex> lk(mu_);
    result_ = std::move(r);
    done_ = true;
    status = result_.status;
    if (cb_ && handle_) {
      cb = cb_;
      user = user_;
      handle = handle_;
      cb_running_ = true;
    }
  }
  cv_.notify_all();
  if (cb) {
    cb(handle, status, user);
    {
      std::lock_guard<std::mutex> lk(mu_);
      cb_running_ = false;
    }
    cv_.notify_all();
  }
}

genie_status_t FutureState::wait(int64_t timeout_ms) {
  std::unique_lock<std::mutex> lk(mu_);
  if (timeout_ms < 0) {
    cv_.wait(lk, [this] { return done_; });
  } else if (!cv_.wait_for(lk, std::chrono::milliseconds(timeout_ms), [this] { return done_; })) {
    throw Error(GENIE_ERR_TIMEOUT, cat("future still running after ", timeout_ms, " ms"));
  }
  if (result_.status != GENIE_OK) throw Error(result_.status, result_.detail);
  return GENIE_OK;
}

genie_status_t FutureState::poll() {
  std::lock_guard<std::mutex> lk(mu_);
  if (!done_) return GENIE_IN_PROGRESS;
  if (result_.status != GENIE_OK) throw Error(result_.status, result_.detail);
  return GENIE_OK;
}

void FutureState::set_callback(genie_future_callback_t cb, void* user, genie_future_t* handle) {
  check(cb != nullptr, GENIE_ERR_INVALID_ARGUMENT, "callback is NULL");
  genie_status_t status;
  {
    std::lock_guard<std::mutex> lk(mu_);
    check(cb_ == nullptr, GENIE_ERR_INVALID_ARGUMENT, "a completion callback is already set");
    cb_ = cb;
    user_ = user;
    handle_ = handle;
    if (!done_) return;
    status = result_.status;
  }
  cb(handle, status, user);
}

void FutureState::detach() {
  std::unique_lock<std::mutex> lk(mu_);
  handle_ = nullptr;
  cb_ = nullptr;
  cv_.wait(lk, [this] { return !cb_running_; });
}

void FutureState::require_success() {
  check(done_, GENIE_ERR_INVALID_ARGUMENT, "the future has not completed yet: wait for it first");
  if (result_.status != GENIE_OK) throw Error(result_.status, result_.detail);
  ctx_->check_live();
}

TensorPtr FutureState::output(size_t index) {
  std::lock_guard<std::mutex> lk(mu_);
  require_success();
  check(index < result_.outputs.size(), GENIE_ERR_NOT_FOUND, "output index ", index, " out of range (",
        result_.outputs.size(), " outputs)");
  return result_.outputs[index];
}

TensorPtr FutureState::output(const std::string& name) {
  std::lock_guard<std::mutex> lk(mu_);
  require_success();
  for (size_t i = 0; i < names_.size(); ++i)
    if (names_[i] == name) return result_.outputs.at(i);
  fail(GENIE_ERR_NOT_FOUND, "no output named '", name, "'");
}

uint64_t FutureState::exec_ns() {
  std::lock_guard<std::mutex> lk(mu_);
  check(done_, GENIE_ERR_INVALID_ARGUMENT, "the future has not completed yet");
  return result_.exec_ns;
}

// ---------------------------------------------------------------------------
// Context
// ---------------------------------------------------------------------------

namespace {
std::string generate_node_id() {
  char host[256] = "host";
  if (gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "host");
  std::string h;
  for (char* p = host; *p; ++p)
    if (std::isalnum(static_cast<unsigned char>(*p)) || *p == '-' || *p == '.' || *p == '_') h += *p;
  if (h.empty()) h = "host";
  std::random_device rd;
  char suffix[32];
  std::snprintf(suffix, sizeof suffix, "-%d-%04x", static_cast<int>(getpid()), rd() & 0xffffu);
  return h.substr(0, 200) + suffix;
}
}  // namespace

Context::Context(Config cfg) : cfg_(std::move(cfg)) {
  node_id_ = cfg_.node_id.empty() ? generate_node_id() : cfg_.node_id;
  if (!embedded())
    fail(GENIE_ERR_UNSUPPORTED, "remote mode (master ", cfg_.master_addr, ":", cfg_.master_port,
         ") is not available in this build: unset GENIE_MASTER_ADDR to run embedded");
  exec_ = std::make_unique<Executor>(cfg_.num_threads);
  log(LogLevel::Info, "context ", node_id_, ": embedded mode, role ", role_str(cfg_.role), ", ",
      cfg_.num_threads, " worker threads (0 = all cores)");
}

Context::~Context() { shutdown(); }

void Context::check_live() const {
  check(live_.load(std::memory_order_acquire), GENIE_ERR_SHUTDOWN, "the context has been shut down");
}

Device Context::resolve_device(const char* text) const {
  Device d = parse_device(text);
  switch (d.kind) {
    case Device::Kind::Cpu:
      check(d.node.empty() || d.node == node_id_, GENIE_ERR_UNSUPPORTED, "device '", d.str(), "': node '",
            d.node, "' is not reachable in embedded mode (no master configured)");
      check(d.index == 0, GENIE_ERR_UNSUPPORTED, "device '", d.str(),
            "': this node has one CPU device, cpu:0");
      d.node.clear();
      return d;
    case Device::Kind::Gpu:
      fail(GENIE_ERR_UNSUPPORTED, "device '", d.str(), "': no GPU support in this build");
    case Device::Kind::Remote:
      fail(GENIE_ERR_UNSUPPORTED, "device '", d.str(),
           "': embedded mode has no remote devices (set GENIE_MASTER_ADDR to use a server)");
  }
  fail(GENIE_ERR_INTERNAL, "unreachable");
}

std::shared_ptr<FutureState> Context::submit(const Graph& graph, const std::vector<std::string>& names,
                                             const std::vector<TensorPtr>& tensors) {
  // Bind by name: every graph input exactly once, nothing else.
  std::unordered_map<std::string, size_t> by_name;
  for (size_t i = 0; i < names.size(); ++i) {
    const ValueId v = graph.find_value(names[i]);
    check(v != kNone && graph.value(v).kind == ValueKind::Input, GENIE_ERR_INVALID_GRAPH, "'", names[i],
          "' is not an input of the graph");
    check(by_name.emplace(names[i], i).second, GENIE_ERR_INVALID_GRAPH, "input '", names[i],
          "' is bound twice");
  }
  std::vector<TensorPtr> bound;
  std::unordered_map<ValueId, Shape> shapes;
  for (ValueId in : graph.inputs()) {
    const Value& val = graph.value(in);
    auto it = by_name.find(val.name);
    check(it != by_name.end(), GENIE_ERR_INVALID_GRAPH, "graph input '", val.name,
          "' is not bound to a tensor");
    const TensorPtr& t = tensors[it->second];
    if (t->dtype() != val.dtype)
      fail(GENIE_ERR_DTYPE_MISMATCH, "input '", val.name, "' is declared ", dtype_name(val.dtype),
           " but the tensor is ", dtype_name(t->dtype()));
    bool ok = t->shape().size() == val.shape.size();
    for (size_t d = 0; ok && d < val.shape.size(); ++d)
      ok = val.shape[d] == -1 || val.shape[d] == t->shape()[d];
    if (!ok)
      fail(GENIE_ERR_SHAPE_MISMATCH, "input '", val.name, "' is declared ", shape_str(val.shape),
           " but the tensor is ", shape_str(t->shape()));
    shapes.emplace(in, t->shape());
    bound.push_back(t);
  }
  auto snapshot = std::make_shared<Graph>(graph);
  snapshot->validate(&shapes);

  std::vector<std::string> out_names;
  for (ValueId o : snapshot->outputs()) out_names.push_back(snapshot->value(o).name);
  auto state = std::make_shared<FutureState>(shared_from_this(), std::move(out_names));

  std::shared_lock<std::shared_mutex> lk(run_mu_);
  check_live();
  exec_->run(snapshot, std::move(bound), [state](ExecResult&& r) { state->complete(std::move(r)); });
  return state;
}

void Context::shutdown() {
  std::unique_lock<std::shared_mutex> lk(run_mu_);
  if (!live_.exchange(false)) return;
  exec_.reset();  // waits for graphs in flight; their futures complete normally
  log(LogLevel::Info, "context ", node_id_, ": shut down");
}

}  // namespace genie
