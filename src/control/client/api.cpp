// RemoteClient's methods: each builds a Call and hands it to the link.
#include "control/client/impl.hpp"
#include "control/client/rma.hpp"
#include "control/wire_json.hpp"
#include "control/wire_tag.hpp"
#include "core/trace.hpp"
#include "graph/graph.hpp"

namespace genie {

std::shared_ptr<RemoteClient> RemoteClient::connect(const Config& cfg, const std::string& node_id) {
  check(!cfg.master_addr.empty(), GENIE_ERR_INVALID_ARGUMENT, "no master address configured");
  std::shared_ptr<RemoteClient> client(new RemoteClient());
  client->impl_ = std::make_shared<Impl>(cfg, node_id);
  Impl& im = *client->impl_;
  im.loop = std::make_unique<LoopThread>();
  im.loop->post([&im] {
    im.init_timers();
    im.arm_deadline();
    im.begin_attempt();
  });
  {
    std::unique_lock<std::mutex> lk(im.mu);
    // The loop's deadline timer ends the attempt; the margin only guards
    // against a loop that never ran it.
    const bool settled = im.cv.wait_for(lk, im.timeout + std::chrono::seconds(5),
                                        [&] { return im.state != Impl::State::Connecting; });
    if (!settled) fail(GENIE_ERR_TIMEOUT, "no answer from ", im.addr, " within ", im.timeout.count(), " ms");
    if (im.state == Impl::State::Failed) throw Error(im.fail_status, im.fail_detail);
  }
  log(LogLevel::Info, "client ", node_id, ": connected to ", im.server_node, " at ", im.addr);
  return client;
}

std::string RemoteClient::data_transport() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->data_endpoint.transport;
}

RemoteClient::~RemoteClient() {
  if (impl_) impl_->close();
}

void RemoteClient::close() {
  if (impl_) impl_->close();
}

uint64_t RemoteClient::tensor_alloc(DType dtype, const Shape& shape, const std::string& device) {
  wire::TensorAlloc m;
  m.set_dtype(static_cast<int32_t>(dtype));
  for (int64_t d : shape) m.add_shape(d);
  m.set_device(device);
  const bool ask = impl_->local_wanted();
  const uint64_t epoch = ask ? impl_->ready_epoch() : 0;
  m.set_local_grant(ask);
  auto call = std::make_shared<Call>(MsgType::TensorAlloc, Link::Control);
  impl_->transact(call, wire::encode_msg(m));
  const auto r = wire::parse_msg<wire::TensorAllocReply>(call->reply, call->reply_type);
  if (ask && r.has_grant()) impl_->local_granted(r.tensor_id(), r.grant(), epoch);
  return r.tensor_id();
}

namespace {

// Which of tensor_write/_read's paths moved the bytes, for its trace span.
enum class Path { Local, Rma, Direct, Loop };

// The span of one tensor write or read on this process's "transfers" row
// (core/trace.hpp): its bytes, the transport that carried them and the
// tensor's semantic tag. Called only while a trace is recorded.
void trace_tensor_io(bool write, Path path, const std::string& data_transport, uint64_t id, size_t nbytes,
                     const dataplane::SemanticTag& tag, const std::string& server, uint64_t t0) {
  trace::Transfer t;
  t.value = cat("tensor ", id);
  switch (path) {
    case Path::Local: t.transport = "cma (one-sided)"; break;
    case Path::Rma: t.transport = cat(data_transport, " (rma)"); break;
    case Path::Direct: t.transport = "tcp (direct link)"; break;
    case Path::Loop: t.transport = data_transport; break;
  }
  t.role = role_name(static_cast<TensorRole>(tag.role));
  t.phase = phase_name(static_cast<Phase>(tag.phase));
  t.from = write ? "client" : server;
  t.to = write ? server : "client";
  t.bytes = nbytes;
  t.direction = write ? "write" : "read";
  trace::transfer(t, t0, trace::now_ns());
}

}  // namespace

void RemoteClient::tensor_write(uint64_t id, size_t offset, const void* src, size_t nbytes,
                                const dataplane::SemanticTag& tag) {
  check(src != nullptr || nbytes == 0, GENIE_ERR_INVALID_ARGUMENT, "src is NULL");
  const uint64_t t0 = trace::on() ? trace::now_ns() : 0;
  Path path = Path::Local;
  if (!impl_->local_transfer(true, id, offset, const_cast<void*>(src), nbytes) &&
      (path = Path::Rma, !impl_->rma_transfer(true, id, offset, const_cast<void*>(src), nbytes, tag)) &&
      (path = Path::Direct, !impl_->direct_transfer(true, id, offset, const_cast<void*>(src), nbytes))) {
    path = Path::Loop;
    wire::TensorWrite m;
    m.set_tensor_id(id);
    m.set_offset(offset);
    auto call = std::make_shared<Call>(MsgType::TensorWrite, Link::Data);
    call->tag = tag;
    // The caller blocks until the reply, so its buffer can be the payload.
    impl_->transact(call, wire::encode_msg(m), src, nbytes);
  }
  impl_->tensor_bytes_written.fetch_add(nbytes, std::memory_order_relaxed);
  if (t0 != 0 && trace::on())
    trace_tensor_io(true, path, data_transport(), id, nbytes, tag, impl_->server_node, t0);
}

void RemoteClient::tensor_read(uint64_t id, size_t offset, void* dst, size_t nbytes,
                               const dataplane::SemanticTag& tag) {
  check(dst != nullptr || nbytes == 0, GENIE_ERR_INVALID_ARGUMENT, "dst is NULL");
  const uint64_t t0 = trace::on() ? trace::now_ns() : 0;
  Path path = Path::Local;
  if (!impl_->local_transfer(false, id, offset, dst, nbytes) &&
      (path = Path::Rma, !impl_->rma_transfer(false, id, offset, dst, nbytes, tag)) &&
      (path = Path::Direct, !impl_->direct_transfer(false, id, offset, dst, nbytes))) {
    path = Path::Loop;
    wire::TensorRead m;
    m.set_tensor_id(id);
    m.set_offset(offset);
    m.set_nbytes(nbytes);
    auto call = std::make_shared<Call>(MsgType::TensorRead, Link::Data);
    call->tag = tag;
    call->dst = dst;
    call->nbytes = nbytes;
    impl_->transact(call, wire::encode_msg(m));
  }
  impl_->tensor_bytes_read.fetch_add(nbytes, std::memory_order_relaxed);
  if (t0 != 0 && trace::on())
    trace_tensor_io(false, path, data_transport(), id, nbytes, tag, impl_->server_node, t0);
}

uint64_t RemoteClient::direct_transfers() const {
  return impl_->direct.calls.load(std::memory_order_relaxed);
}

uint64_t RemoteClient::local_transfers() const { return impl_->local.calls.load(std::memory_order_relaxed); }

std::string RemoteClient::tensor_export(uint64_t id) {
  wire::TensorExport m;
  m.set_tensor_id(id);
  auto call = std::make_shared<Call>(MsgType::TensorExport, Link::Control);
  impl_->transact(call, wire::encode_msg(m));
  return wire::parse_msg<wire::TensorExportReply>(call->reply, call->reply_type).ticket();
}

void RemoteClient::tensor_fetch(const std::string& ticket, void* dst, size_t nbytes,
                                const dataplane::SemanticTag& tag) {
  check(dst != nullptr || nbytes == 0, GENIE_ERR_INVALID_ARGUMENT, "dst is NULL");
  wire::TensorFetch m;
  m.set_ticket(ticket);
  m.set_nbytes(nbytes);
  wire::put_tag(tag, &m);
  auto call = std::make_shared<Call>(MsgType::TensorFetch, Link::Data);
  call->tag = tag;
  call->dst = dst;
  call->nbytes = nbytes;
  impl_->transact(call, wire::encode_msg(m));
}

void RemoteClient::tensor_import(uint64_t id, const std::string& host, int port, const std::string& ticket,
                                 const std::string& source_node, const dataplane::SemanticTag& tag) {
  wire::TensorImport m;
  m.set_tensor_id(id);
  m.set_host(host);
  m.set_port(port);
  m.set_ticket(ticket);
  m.set_source_node(source_node);
  wire::put_tag(tag, &m);
  auto call = std::make_shared<Call>(MsgType::TensorImport, Link::Control);
  impl_->transact(call, wire::encode_msg(m));
}

void RemoteClient::tensor_free(uint64_t id) noexcept {
  impl_->local_forget(id);  // before the server may reuse the memory
  impl_->queue_free(id);
}

namespace {

template <class Msg>
void add_bindings(Msg* m, const std::vector<std::pair<std::string, uint64_t>>& bindings) {
  m->mutable_bindings()->Reserve(static_cast<int>(bindings.size()));
  for (const auto& [name, id] : bindings) {
    wire::Binding* b = m->add_bindings();
    b->set_name(name);
    b->set_tensor_id(id);
  }
}

// The bytes of a length-delimited field holding `len` bytes (its tag < 16).
size_t field_bytes(size_t len) {
  return 1 + google::protobuf::io::CodedOutputStream::VarintSize64(len) + len;
}

}  // namespace

// The encoded wire::SubmitInline of `extras` (empty when it is).
static std::string encode_extras(const SubmitExtras& extras) {
  if (extras.empty()) return {};
  size_t total = 0;
  wire::SubmitInline m;
  for (const InlineInput& in : extras.inputs) {
    check(in.nbytes <= wire::kMaxInlineTensorBytes && total + in.nbytes <= wire::kMaxInlineBytes,
          GENIE_ERR_INTERNAL, "inline input '", in.name, "' of ", in.nbytes, " bytes is past the bounds");
    total += in.nbytes;
    wire::InlineTensor* t = m.add_inline_inputs();
    t->set_name(in.name);
    t->set_dtype(static_cast<int32_t>(in.dtype));
    for (int64_t d : in.shape) t->add_shape(d);
    t->set_data(in.data, in.nbytes);
  }
  for (uint32_t i : extras.return_outputs) m.add_return_outputs(i);
  return wire::encode_msg(m);
}

std::shared_ptr<RemoteClient::Submission> RemoteClient::submit(
    const std::string& graph_json, std::vector<std::pair<std::string, uint64_t>> bindings,
    std::function<void(RemoteResult&&)> done, bool want_spans, const SubmitExtras& extras) {
  Impl& im = *impl_;
  check(extras.empty() || inline_tensors(), GENIE_ERR_INTERNAL,
        "inline tensors for a server that does not take them");
  auto call = std::make_shared<Call>(MsgType::GraphSubmit, Link::Control);
  call->done = std::move(done);
  call->trace = want_spans && trace_spans();
  call->inline_extra = encode_extras(extras);
  // What the full message takes (graph_bytes_full), counted without
  // encoding the JSON, or the bindings twice.
  size_t full_bytes = wire::kHeaderSize + field_bytes(graph_json.size());
  std::string msg;
  if (im.cfg.graph_deltas) {
    delta::Encoded e = im.encoder.encode(graph_json);
    if (e.is_delta) {
      size_t bytes = 0;
      for (const delta::Patch& p : e.patches) bytes += p.json.size();
      wire::ReusedMsg<wire::GraphSubmitDelta> delta(bytes);
      wire::GraphSubmitDelta& d = *delta;
      d.set_base_hash(*e.base_digest);
      d.set_graph_hash(*e.digest);
      for (delta::Patch& p : e.patches) {
        wire::LeafPatch* lp = d.add_patches();
        lp->set_leaf(p.leaf);
        lp->set_json(std::move(p.json));
      }
      add_bindings(&d, bindings);
      d.set_trace(call->trace);
      for (const wire::Binding& b : d.bindings()) full_bytes += field_bytes(b.ByteSizeLong());
      msg = wire::encode_msg(d);
      call->send_type = MsgType::GraphSubmitDelta;
      call->full_json = std::move(e.text);
      call->bindings = std::move(bindings);  // for sending it in full instead
      call->base_digest = std::move(e.base_digest);
      call->graph_digest = std::move(e.digest);
    }
  }
  if (msg.empty()) {
    wire::ReusedMsg<wire::GraphSubmit> m(graph_json.size());
    wire::GraphSubmit& full = *m;
    add_bindings(&full, bindings);
    full_bytes += full.ByteSizeLong();
    full.set_keep_as_base(im.cfg.graph_deltas);
    full.set_trace(call->trace);
    full.set_graph_json(graph_json);
    msg = wire::encode_msg(full);
  }
  // A parser merges the concatenated encodings (wire::SubmitInline).
  msg += call->inline_extra;
  full_bytes += call->inline_extra.size();
  const size_t sent = wire::kHeaderSize + msg.size();
  // Read before the loop owns the call (a fallback changes its send_type).
  const bool as_delta = call->send_type == MsgType::GraphSubmitDelta;
  // Throws before sending, or it is on its way.
  const bool direct = im.submit(call, std::move(msg));
  (as_delta ? im.graph_submits_delta : im.graph_submits_full).fetch_add(1, std::memory_order_relaxed);
  im.graph_bytes_sent.fetch_add(sent, std::memory_order_relaxed);
  im.graph_bytes_full.fetch_add(full_bytes, std::memory_order_relaxed);
  if (!direct) return nullptr;
  return std::make_shared<Submission>(std::move(call), impl_);
}

void RemoteClient::collect(const Submission& s, std::chrono::steady_clock::time_point deadline) {
  impl_->direct_collect(s.call, deadline);
}

void RemoteClient::watch(const Submission& s) { impl_->direct_watch(s.call); }

void RemoteClient::drain() { impl_->direct_drain(); }

uint64_t RemoteClient::direct_submits() const {
  return impl_->direct.submits.load(std::memory_order_relaxed);
}

uint64_t RemoteClient::direct_frees_carried() const {
  return impl_->direct.frees_carried.load(std::memory_order_relaxed);
}

RemoteClient::GraphStats RemoteClient::graph_stats() const {
  const Impl& im = *impl_;
  GraphStats s;
  s.submits_full = im.graph_submits_full.load();
  s.submits_delta = im.graph_submits_delta.load();
  s.delta_fallbacks = im.delta_fallbacks.load();
  s.bytes_sent = im.graph_bytes_sent.load();
  s.bytes_full = im.graph_bytes_full.load();
  s.tensor_bytes_written = im.tensor_bytes_written.load();
  s.tensor_bytes_read = im.tensor_bytes_read.load();
  s.completion_bytes = im.completion_bytes.load();
  s.inline_output_bytes = im.inline_output_bytes.load();
  return s;
}

bool RemoteClient::inline_tensors() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->inline_tensors;
}

bool RemoteClient::trace_spans() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->trace_spans;
}

ClockOffset RemoteClient::server_clock() {
  Impl& im = *impl_;
  uint64_t epoch = 0;
  {
    std::lock_guard<std::mutex> lk(im.mu);
    if (!im.trace_spans) return {};
    epoch = im.link_epoch;
  }
  std::lock_guard<std::mutex> lk(im.clock_mu);
  const auto now = std::chrono::steady_clock::now();
  if (im.clock.known && im.clock_epoch == epoch && now - im.clock_at < kClockMaxAge) return im.clock;
  std::vector<ClockSample> samples;
  const std::string probe = wire::encode_msg(wire::ClockProbe());
  for (int i = 0; i < kClockProbes; ++i) {
    auto call = std::make_shared<Call>(MsgType::ClockProbe, Link::Control);
    ClockSample s;
    s.t0_ns = trace::now_ns();
    im.transact(call, probe);
    s.t1_ns = trace::now_ns();
    s.server_ns = wire::parse_msg<wire::ClockProbeReply>(call->reply, call->reply_type).server_ns();
    samples.push_back(s);
  }
  im.clock = estimate_clock_offset(samples);
  im.clock_at = now;
  im.clock_epoch = epoch;
  return im.clock;
}

std::string RemoteClient::server_info_json() {
  auto call = std::make_shared<Call>(MsgType::ServerInfoRequest, Link::Control);
  impl_->transact(call, wire::encode_msg(wire::ServerInfoRequest()));
  const auto info = wire::parse_msg<wire::ServerInfo>(call->reply, call->reply_type);
  std::unique_ptr<cJSON, void (*)(cJSON*)> o(cJSON_CreateObject(), cJSON_Delete);
  check(o != nullptr, GENIE_ERR_OUT_OF_MEMORY, "out of memory");
  // Every field of ServerInfo, counters as JSON numbers (exact up to 2^53).
  wire::add_fields_to_json(info, o.get());
  // This client's side of the same traffic.
  const GraphStats g = graph_stats();
  cJSON* c = cJSON_AddObjectToObject(o.get(), "client");
  check(c != nullptr, GENIE_ERR_OUT_OF_MEMORY, "out of memory");
  cJSON_AddBoolToObject(c, "graph_deltas", impl_->cfg.graph_deltas);
  cJSON_AddStringToObject(c, "data_transport", data_transport().c_str());
  cJSON_AddNumberToObject(c, "graph_submits_full", static_cast<double>(g.submits_full));
  cJSON_AddNumberToObject(c, "graph_submits_delta", static_cast<double>(g.submits_delta));
  cJSON_AddNumberToObject(c, "graph_delta_fallbacks", static_cast<double>(g.delta_fallbacks));
  cJSON_AddNumberToObject(c, "graph_bytes_sent", static_cast<double>(g.bytes_sent));
  cJSON_AddNumberToObject(c, "graph_bytes_full", static_cast<double>(g.bytes_full));
  cJSON_AddNumberToObject(c, "tensor_bytes_written", static_cast<double>(g.tensor_bytes_written));
  cJSON_AddNumberToObject(c, "tensor_bytes_read", static_cast<double>(g.tensor_bytes_read));
  cJSON_AddNumberToObject(c, "completion_bytes", static_cast<double>(g.completion_bytes));
  cJSON_AddNumberToObject(c, "inline_output_bytes", static_cast<double>(g.inline_output_bytes));
  cJSON_AddBoolToObject(c, "semantics", impl_->cfg.semantics);
  char* text = cJSON_PrintUnformatted(o.get());
  check(text != nullptr, GENIE_ERR_OUT_OF_MEMORY, "out of memory");
  std::string s(text);
  cJSON_free(text);
  return s;
}

void RemoteClient::heartbeat_async(std::string msg, std::function<void(genie_status_t, std::string&&)> done) {
  Impl& im = *impl_;
  auto call = std::make_shared<Call>(MsgType::Heartbeat, Link::Control);
  call->on_reply = std::move(done);
  if (msg.size() > im.max_message) {
    im.end_call(*call, GENIE_ERR_TOO_LARGE, "heartbeat exceeds the maximum message size");
    return;
  }
  im.start(call, im.next_id.fetch_add(1), std::move(msg), nullptr, 0);
}

LoopThread* RemoteClient::loop_thread() const { return impl_->loop.get(); }

bool RemoteClient::failed() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->state == Impl::State::Failed || impl_->state == Impl::State::Closed;
}

void RemoteClient::register_worker(const std::string& host, int port,
                                   const std::vector<sched::DeviceProfile>& devices) {
  wire::WorkerRegister m;
  m.set_node_id(impl_->node_id);
  m.set_host(host);
  m.set_port(static_cast<uint32_t>(port));
  for (const auto& d : devices) {
    wire::DeviceInfo* i = m.add_devices();
    i->set_device(d.device);
    i->set_peak_flops(d.peak_flops);
    i->set_mem_bw_bytes_per_s(d.mem_bw_bytes_per_s);
    i->set_mem_capacity_bytes(d.mem_capacity_bytes);
    i->set_mem_budget_bytes(d.mem_budget_bytes);
    i->set_op_overhead_s(d.op_overhead_s);
    i->set_vector_flops(d.vector_flops);
  }
  auto call = std::make_shared<Call>(MsgType::WorkerRegister, Link::Control);
  impl_->transact(call, wire::encode_msg(m));
}

std::string RemoteClient::plan_explain(const std::string& graph_json,
                                       const std::vector<std::pair<std::string, uint64_t>>& bindings) {
  wire::PlanExplain m;
  m.set_graph_json(graph_json);
  for (const auto& [name, id] : bindings) {
    wire::Binding* b = m.add_bindings();
    b->set_name(name);
    b->set_tensor_id(id);
  }
  auto call = std::make_shared<Call>(MsgType::PlanExplain, Link::Control);
  impl_->transact(call, wire::encode_msg(m));
  return wire::parse_msg<wire::PlanExplainReply>(call->reply, call->reply_type).json();
}

const std::string& RemoteClient::server_node_id() const { return impl_->server_node; }

const std::string& RemoteClient::server_instance() const { return impl_->server_instance; }

const std::vector<std::string>& RemoteClient::server_devices() const { return impl_->devices; }

bool RemoteClient::connected() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->state == Impl::State::Ready;
}

}  // namespace genie
