// Frame dispatch: every frame of a connection to its handler, replies and
// errors, closing connections, and the end of sessions.
#include <algorithm>

#include "control/semantic_tag.hpp"
#include "control/wire_tag.hpp"
#include "core/trace.hpp"
#include "server/impl.hpp"
#include "server/master.hpp"
#include "server/rma.hpp"

namespace genie {

namespace {

// Replies queued to one connection and not yet taken by the kernel: a client
// that keeps sending requests without reading the replies is cut off here
// instead of growing the server's memory without bound. Bulk bytes are not
// copied into the queue, so this counts frames; ServerOptions::
// max_queued_reply_bytes bounds the bytes of their messages.
constexpr int kMaxQueuedReplies = 65536;

bool is_client_request(MsgType t) {
  switch (t) {
    case MsgType::TensorAlloc:
    case MsgType::TensorWrite:
    case MsgType::TensorRead:
    case MsgType::TensorFree:
    case MsgType::TensorExport:
    case MsgType::TensorFetch:
    case MsgType::TensorImport:
    case MsgType::TensorRmaWrite:
    case MsgType::TensorRmaRead:
    case MsgType::GraphSubmit:
    case MsgType::GraphSubmitDelta:
    case MsgType::ServerInfoRequest:
    case MsgType::Heartbeat:
    case MsgType::WorkerRegister:
    case MsgType::PlanExplain:
    case MsgType::ClockProbe:
    case MsgType::Goodbye: return true;
    default: return false;
  }
}

}  // namespace

// ---------------------------------------------------------------------------
// Frames
// ---------------------------------------------------------------------------

PayloadSink Server::Impl::answer_errors(Peer& p, uint64_t rid, const char* what,
                                        const std::function<void()>& handle) {
  try {
    handle();
  } catch (const Error& e) {
    send_error(p, rid, e.code(), e.detail());
  } catch (const std::bad_alloc&) {
    send_error(p, rid, GENIE_ERR_OUT_OF_MEMORY, cat("out of memory ", what));
  }
  return {};
}

PayloadSink Server::Impl::on_frame(const std::shared_ptr<Peer>& p, const wire::FrameHeader& h,
                                   std::string&& msg) {
  if (p->closing) return {};  // a payload is refused; the connection is closing anyway
  try {
    if (h.payload_len > 0 && h.type != MsgType::TensorWrite) {
      p->conn->close(GENIE_ERR_PROTOCOL,
                     cat(wire::type_name(h.type), " carries ", h.payload_len, " payload bytes"));
      return {};
    }
    if (p->state == Peer::State::Fresh || p->state == Peer::State::AwaitAuth) {
      if (h.payload_len > 0) {
        p->conn->close(GENIE_ERR_PROTOCOL, cat(wire::type_name(h.type), " before the handshake"));
        return {};
      }
      handshake(p, h, msg);
      return {};
    }
    if (p->session) p->session->last_active_ms = uv_now(loop.loop());
    return request(p, h, msg);
  } catch (const Error& e) {
    // Only handshake failures and protocol violations get here: request
    // errors are answered inside request().
    if (h.payload_len > 0) {
      p->conn->close(e.code(), e.detail());
      return {};
    }
    refuse(*p, h.request_id, e.code(), e.detail());
  } catch (const std::bad_alloc&) {
    refuse(*p, h.request_id, GENIE_ERR_OUT_OF_MEMORY, "out of memory", h.payload_len == 0);
  } catch (const std::exception& e) {
    refuse(*p, h.request_id, GENIE_ERR_INTERNAL, cat("internal error: ", e.what()), h.payload_len == 0);
  }
  return {};
}

PayloadSink Server::Impl::request(const std::shared_ptr<Peer>& p, const wire::FrameHeader& h,
                                  const std::string& msg) {
  const uint64_t rid = h.request_id;
  const bool control = p->state == Peer::State::Control;
  check(is_client_request(h.type), GENIE_ERR_PROTOCOL, "unexpected ", wire::type_name(h.type),
        " from a client");
  // Parsing errors are protocol violations (the caller closes the connection);
  // everything after parsing is an answerable request error.
  switch (h.type) {
    case MsgType::TensorAlloc: {
      const auto m = parse_msg<wire::TensorAlloc>(msg, h.type);
      return answer_errors(*p, rid, "allocating the tensor", [&] { tensor_alloc(*p, rid, m); });
    }
    case MsgType::TensorWrite: return tensor_write(p, h, parse_msg<wire::TensorWrite>(msg, h.type));
    case MsgType::TensorRead: {
      const auto m = parse_msg<wire::TensorRead>(msg, h.type);
      return answer_errors(*p, rid, "reading the tensor", [&] { tensor_read(*p, rid, m); });
    }
    case MsgType::TensorRmaWrite: {
      const auto m = parse_msg<wire::TensorRmaWrite>(msg, h.type);
      return answer_errors(*p, rid, "writing the tensor by RMA", [&] {
        tensor_rma(p, rid, true, m.tensor_id(), m.offset(), m.nbytes(), m.region(), wire::tag_of(m));
      });
    }
    case MsgType::TensorRmaRead: {
      const auto m = parse_msg<wire::TensorRmaRead>(msg, h.type);
      return answer_errors(*p, rid, "reading the tensor by RMA", [&] {
        tensor_rma(p, rid, false, m.tensor_id(), m.offset(), m.nbytes(), m.region(), wire::tag_of(m));
      });
    }
    case MsgType::TensorFree: {
      const auto m = parse_msg<wire::TensorFree>(msg, h.type);
      p->session->erase(m.tensor_id());
      return {};
    }
    case MsgType::TensorExport: {
      const auto m = parse_msg<wire::TensorExport>(msg, h.type);
      return answer_errors(*p, rid, "exporting the tensor", [&] { tensor_export(*p, rid, m); });
    }
    case MsgType::TensorFetch: {
      const auto m = parse_msg<wire::TensorFetch>(msg, h.type);
      return answer_errors(*p, rid, "fetching the tensor", [&] { tensor_fetch(*p, rid, m); });
    }
    case MsgType::TensorImport: {
      const auto m = parse_msg<wire::TensorImport>(msg, h.type);
      return answer_errors(*p, rid, "importing the tensor", [&] { tensor_import(p, rid, m); });
    }
    case MsgType::GraphSubmit: {
      // On the control connection or a data connection of the session
      // (Welcome.data_submit): its GraphDone goes back where it came from.
      wire::ReusedMsg<wire::GraphSubmit> full(msg.size());
      const wire::GraphSubmit& m = *full;
      parse_into(*full, msg, h.type);
      free_carried(*p->session, m.free_tensor_ids());
      if (m.trace()) want_spans(*p, rid);
      want_outputs(*p, rid, m.return_outputs());
      counters.graph_submits_full.fetch_add(1, std::memory_order_relaxed);
      counters.graph_submit_bytes.fetch_add(wire::kHeaderSize + msg.size(), std::memory_order_relaxed);
      try {
        if (m.keep_as_base()) {
          auto text = std::make_shared<const std::string>(m.graph_json());
          std::weak_ptr<Session> ws = p->session;
          graph_submit(p, rid, *text, m.bindings(), m.inline_inputs(), [this, text, ws] {
            // Only graphs that loaded.
            if (auto s = ws.lock()) bases.put(base_key(*s, delta::digest(*text)), text);
          });
        } else {
          graph_submit(p, rid, m.graph_json(), m.bindings(), m.inline_inputs());
        }
      } catch (const Error& e) {
        send_error(*p, rid, e.code(), e.detail());
      } catch (const std::bad_alloc&) {
        send_error(*p, rid, GENIE_ERR_OUT_OF_MEMORY, "out of memory loading the graph");
      }
      return {};
    }
    case MsgType::GraphSubmitDelta: {
      wire::ReusedMsg<wire::GraphSubmitDelta> delta(msg.size());
      wire::GraphSubmitDelta& m = *delta;
      parse_into(m, msg, h.type);
      free_carried(*p->session, m.free_tensor_ids());
      if (m.trace()) want_spans(*p, rid);
      want_outputs(*p, rid, m.return_outputs());
      counters.graph_submits_delta.fetch_add(1, std::memory_order_relaxed);
      counters.graph_submit_bytes.fetch_add(wire::kHeaderSize + msg.size(), std::memory_order_relaxed);
      bool unknown_base = false;
      try {
        const std::shared_ptr<const std::string> text = rebuild(*p->session, m, &unknown_base);
        metrics::add(metrics::Id::GraphDeltaSavedBytes, {}, double(text->size()) - double(msg.size()));
        graph_submit(p, rid, *text, m.bindings(), m.inline_inputs());
      } catch (const Error& e) {
        if (unknown_base) {
          p->traced.erase(rid);
          p->returning.erase(rid);
          counters.graph_delta_unknown_base.fetch_add(1, std::memory_order_relaxed);
          wire::ErrorReply r;
          r.set_status(e.code());
          r.set_detail(e.detail());
          r.set_reason(wire::REASON_UNKNOWN_BASE);
          send(*p, MsgType::ErrorReply, rid, r);
        } else {
          send_error(*p, rid, e.code(), e.detail());
        }
      } catch (const std::bad_alloc&) {
        send_error(*p, rid, GENIE_ERR_OUT_OF_MEMORY, "out of memory loading the graph");
      }
      return {};
    }
    case MsgType::WorkerRegister: {
      check(control, GENIE_ERR_PROTOCOL, "WorkerRegister on a data connection (send it on the control one)");
      const auto m = parse_msg<wire::WorkerRegister>(msg, h.type);
      worker_register(p, rid, m);
      return {};
    }
    case MsgType::PlanExplain: {
      check(control, GENIE_ERR_PROTOCOL, "PlanExplain on a data connection (send it on the control one)");
      const auto m = parse_msg<wire::PlanExplain>(msg, h.type);
      try {
        plan_explain(p, rid, m);
      } catch (const Error& e) {
        send_error(*p, rid, e.code(), e.detail());
      }
      return {};
    }
    case MsgType::ClockProbe: {
      parse_msg<wire::ClockProbe>(msg, h.type);
      wire::ClockProbeReply r;
      r.set_server_ns(trace::now_ns());
      send(*p, MsgType::ClockProbeReply, rid, r);
      return {};
    }
    case MsgType::ServerInfoRequest:
      parse_msg<wire::ServerInfoRequest>(msg, h.type);
      send(*p, MsgType::ServerInfo, rid, server_info());
      return {};
    case MsgType::Heartbeat: {
      check(control, GENIE_ERR_PROTOCOL, "Heartbeat on a data connection (send it on the control one)");
      const auto m = parse_msg<wire::Heartbeat>(msg, h.type);
      try {
        check(opts.cluster != nullptr, GENIE_ERR_UNSUPPORTED, "this server does not track cluster nodes");
        auto w = worker_nodes.find(p->session->client_node());
        check(w == worker_nodes.end() || w->second == p->session.get(), GENIE_ERR_AUTH, "node '",
              p->session->client_node(),
              "' is a worker registered by another session: only that session heartbeats for it");
        wire::HeartbeatReply r;
        opts.cluster->answer_heartbeat(p->name, p->session->client_node(), m, r);
        send(*p, MsgType::HeartbeatReply, rid, r);
      } catch (const Error& e) {
        send_error(*p, rid, e.code(), e.detail());
      }
      return {};
    }
    case MsgType::Goodbye:
      parse_msg<wire::Goodbye>(msg, h.type);
      if (control)
        end_session(p->session, "said goodbye");
      else
        close_when_flushed(*p, GENIE_OK, "goodbye");
      return {};
    default: break;
  }
  fail(GENIE_ERR_PROTOCOL, "unexpected ", wire::type_name(h.type));
}

// ---------------------------------------------------------------------------
// Sending and closing
// ---------------------------------------------------------------------------

bool Server::Impl::reply_room(Peer& p, uint64_t size) {
  if (p.pending_writes >= kMaxQueuedReplies) {
    p.conn->close(GENIE_ERR_PROTOCOL,
                  cat(p.pending_writes, " replies queued: the client does not read them"));
    return false;
  }
  if (p.pending_writes > 0 && p.pending_bytes + size > opts.max_queued_reply_bytes) {
    p.conn->close(GENIE_ERR_PROTOCOL,
                  cat(p.pending_bytes, " bytes of replies queued: the client does not read them"));
    return false;
  }
  // Server-wide: the connections with the most queued go first. Their
  // bytes stay counted until their writes end.
  uint64_t going = 0;
  while (queued_reply_bytes - std::min(going, queued_reply_bytes) + size >
         opts.max_queued_reply_bytes_total) {
    Peer* worst = nullptr;
    for (const auto& [raw, q] : peers)
      if (!q->conn->closed() && q->pending_writes > 0 && (!worst || q->pending_bytes > worst->pending_bytes))
        worst = q.get();
    if (worst == nullptr) break;  // one reply of any size always goes
    going += worst->pending_bytes;
    worst->conn->close(GENIE_ERR_PROTOCOL,
                       cat(worst->pending_bytes, " bytes of replies queued to it and ", queued_reply_bytes,
                           " to all connections, the server's limit: the client does not read them"));
    if (worst == &p) return false;
  }
  return true;
}

void Server::Impl::drop_waiting_reads(Peer& p) {
  const uint64_t n = p.reads_waiting.size() * wire::kHeaderSize;  // kWaitingReadBytes each
  p.pending_writes -= static_cast<int>(p.reads_waiting.size());
  p.pending_bytes -= n;
  queued_reply_bytes -= n;
  p.reads_waiting.clear();
}

void Server::Impl::free_carried(Session& s, const google::protobuf::RepeatedField<uint64_t>& ids) {
  // First, whatever becomes of the submission: the client does not send
  // them again (an unknown id is ignored, as in TensorFree).
  for (uint64_t id : ids) s.erase(id);
}

void Server::Impl::send(Peer& p, MsgType type, uint64_t rid, const google::protobuf::Message& msg,
                        const void* payload, uint64_t payload_len, std::shared_ptr<void> keep,
                        std::function<void(Peer&)> sent, const dataplane::SemanticTag& tag) {
  if (p.conn->closed()) return;
  std::string bytes = wire::encode_msg(msg);
  // Messages are the server's own copies; a payload is tensor memory that
  // exists anyway (reads are bounded by their window, read_window.cpp).
  const uint64_t size = wire::kHeaderSize + bytes.size();
  if (!reply_room(p, size)) return;
  const uint32_t flags = type == MsgType::ErrorReply ? wire::kFlagError : 0;
  ++p.pending_writes;
  p.pending_bytes += size;
  queued_reply_bytes += size;
  std::weak_ptr<Peer> wp = p.weak_from_this();
  p.conn->send_tagged(tag, type, rid, flags, std::move(bytes), payload, payload_len, std::move(keep),
                      [this, wp, size, sent = std::move(sent)](genie_status_t) {
                        queued_reply_bytes -= size;
                        auto peer = wp.lock();
                        if (!peer) return;
                        --peer->pending_writes;
                        peer->pending_bytes -= size;
                        if (sent) sent(*peer);
                        if (peer->closing && peer->pending_writes == 0 && !peer->conn->closed())
                          peer->conn->close(GENIE_OK, peer->close_detail);
                      });
}

void Server::Impl::count_tagged(const char* dir, const dataplane::SemanticTag& tag, uint64_t bytes) {
  metrics::add(metrics::Id::TensorBytes, {dir, phase_name(Phase(tag.phase)), role_name(TensorRole(tag.role))},
               bytes);
  if (tag == dataplane::SemanticTag() || bytes == 0) return;
  // A peer picks its tags: the keys it can make the server hold are bounded.
  constexpr size_t kMaxKeys = 1024;
  std::string key = cat(dir, " ", tag_name(tag));
  std::lock_guard<std::mutex> lk(data_mu);
  if (tagged_bytes.size() >= kMaxKeys && tagged_bytes.count(key) == 0) key = cat(dir, " other");
  tagged_bytes[key] += bytes;
}

void Server::Impl::send_error(Peer& p, uint64_t rid, genie_status_t status, const std::string& detail) {
  if (!p.traced.empty()) p.traced.erase(rid);
  if (!p.returning.empty()) p.returning.erase(rid);
  wire::ErrorReply e;
  e.set_status(status);
  e.set_detail(detail);
  send(p, MsgType::ErrorReply, rid, e);
}

void Server::Impl::refuse(Peer& p, uint64_t rid, genie_status_t status, const std::string& detail,
                          bool reply) {
  if (reply) send_error(p, rid, status, detail);
  close_when_flushed(p, status, detail);
}

void Server::Impl::close_when_flushed(Peer& p, genie_status_t status, const std::string& detail) {
  const auto keep = p.shared_from_this();  // on_close may drop the table's reference
  if (!p.closing) {
    p.closing = true;
    p.close_status = status;
    p.close_detail = detail;
  }
  if (p.pending_writes == 0 && !p.conn->closed()) p.conn->close(GENIE_OK, p.close_detail);
}

// ---------------------------------------------------------------------------
// Sessions
// ---------------------------------------------------------------------------

void Server::Impl::end_session(const std::shared_ptr<Session>& s, const char* why) {
  auto it = sessions.find(s->token());
  if (it == sessions.end() || it->second != s) return;
  log(LogLevel::Info, "server: session ", s->serial(), " of ", s->client_node(), " ended (", why,
      "), freeing ", s->num_tensors(), " tensors");
  worker_session_gone(*s);
  s->grace.reset();
  s->clear();
  sessions.erase(it);
  publish_sessions();
  std::vector<std::shared_ptr<Peer>> conns;
  if (s->control) conns.push_back(s->control->shared_from_this());
  for (Peer* d : s->data) conns.push_back(d->shared_from_this());
  s->control = nullptr;
  s->data.clear();
  for (auto& c : conns) close_when_flushed(*c, GENIE_OK, cat("session ended: ", why));
}

void Server::Impl::control_lost(const std::shared_ptr<Session>& s) {
  if (!sessions.count(s->token())) return;
  worker_session_gone(*s);  // a worker lives as long as its connection
  // Data connections serve the control connection's client: a reconnecting
  // client opens new ones.
  std::vector<std::shared_ptr<Peer>> data;
  for (Peer* d : s->data) data.push_back(d->shared_from_this());
  for (auto& d : data) close_when_flushed(*d, GENIE_OK, "control connection lost");
  if (stopping || opts.session_grace_ms == 0) {
    end_session(s, stopping ? "server stopping" : "connection lost, no grace period");
    return;
  }
  log(LogLevel::Info, "server: session ", s->serial(), " lost its connection; its ", s->num_tensors(),
      " tensors are kept for ", opts.session_grace_ms, " ms");
  s->grace = std::make_unique<Timer>(loop.loop());
  std::weak_ptr<Session> ws = s;
  s->grace->start(static_cast<uint64_t>(opts.session_grace_ms), [this, ws] {
    if (auto session = ws.lock()) end_session(session, "grace period expired");
  });
}

}  // namespace genie
