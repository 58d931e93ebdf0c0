#include "dataplane/dpdk/session.hpp"

#include <algorithm>
#include <cstring>
#include <new>

#include "core/error.hpp"
#include "dataplane/frame.hpp"

namespace genie::dataplane::dpdk {
namespace {

constexpr uint64_t kMaxTensor = 1ull << 40;  // a larger tensor_size is a malformed packet

rte_ether_addr broadcast() {
  rte_ether_addr a;
  std::memset(a.addr_bytes, 0xff, sizeof a.addr_bytes);
  return a;
}

bool before(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b) < 0; }

}  // namespace

uint64_t Session::rto_ns(uint32_t tries) const {
  // GENIE_DPDK_RTO_MS until the first sample, then 4 round trips
  // plus 1 ms (at least 10 ms: a descheduled polling thread must not look
  // like loss), never more than GENIE_DPDK_RTO_MS.
  const uint64_t most = uint64_t{eng.config().rto_ms} * 1000000;
  const uint64_t base =
      srtt_ns_ == 0 ? most : std::min(most, std::max<uint64_t>(10000000, 4 * srtt_ns_ + 1000000));
  return std::min<uint64_t>(base << std::min<uint32_t>(tries, 16), 1000000000ull);
}

uint32_t Session::advertised_window() const {
  if (box->backlog.load(std::memory_order_relaxed) >= eng.config().backlog_limit) return 0;
  const uint32_t w = eng.config().window;
  return w - std::min<uint32_t>(w, static_cast<uint32_t>(ooo_.size()));
}

void Session::send_control(PacketType type, uint16_t flags, uint64_t sack) {
  PacketHeader h;
  h.type = type;
  h.flags = flags;
  h.dst_session = peer_id;
  h.src_session = id;
  h.seq = snd_nxt_;
  h.ack = rcv_nxt_;
  h.window = advertised_window();
  h.sack = sack;
  if (type == PacketType::Syn) h.tensor_id = endpoint_;
  advertised_zero_ = h.window == 0;
  eng.transmit(h, state == State::Connecting ? broadcast() : peer_mac, nullptr, 0, nullptr);
}

void Session::connect(uint16_t endpoint, uint32_t max_msg, std::string target) {
  endpoint_ = endpoint;
  max_message = max_msg;
  peer_name = std::move(target);
  const uint64_t now = eng.now_ns();
  connect_deadline_ = now + uint64_t{eng.config().connect_ms} * 1000000;
  syn_tries_ = 1;
  syn_sent_ns_ = now;
  send_control(PacketType::Syn, 0);
}

void Session::accept_syn(const PacketHeader& syn, const rte_ether_addr& src) {
  accepted_side = true;
  char mac[RTE_ETHER_ADDR_FMT_SIZE];
  rte_ether_format_addr(mac, sizeof mac, &src);
  peer_name = cat("DPDK session ", syn.src_session, " at ", mac);
  max_message = 0;
  peer_id = syn.src_session;
  peer_mac = src;
  peer_window_ = syn.window;
  state = State::Open;
  send_control(PacketType::SynAck, 0);
}

void Session::enqueue(std::shared_ptr<TxMsg> msg) {
  if (state == State::Closing || state == State::Done) {
    msg->owner = shared_from_this();
    return finish_msg(*msg, GENIE_ERR_CONNECTION);
  }
  msg->tid = next_tid_++;
  msg->size = msg->prefix.size() + msg->payload_len;
  const uint64_t p = eng.fragment_bytes();
  msg->frags = static_cast<uint32_t>((msg->size + p - 1) / p);
  msg->owner = shared_from_this();
  queue_.push_back(std::move(msg));
}

void Session::maybe_post(TxMsg& m) {
  if (!m.finished || m.posted || m.mbufs > 0) return;
  m.posted = true;
  Event e(Event::SendDone);
  e.status = m.result;
  e.done = std::move(m.done);
  e.keep = std::move(m.keep);
  box->post(std::move(e));
  std::shared_ptr<Session> self = std::move(m.owner);  // m may be the last holder of this session
  if (--unposted_ == 0 && closed_pending_) end(end_st_, end_detail_);
}

void Session::finish_msg(TxMsg& m, genie_status_t st) {
  if (m.finished) return;
  m.finished = true;
  m.result = st;
  ++unposted_;
  maybe_post(m);
}

void Session::released(TxMsg& m) {
  --m.mbufs;
  maybe_post(m);
}

void Session::ack_packet(TxPkt& p) {
  if (p.acked) return;
  p.acked = true;
  if (++p.msg->acked == p.msg->frags) finish_msg(*p.msg, GENIE_OK);
}

void Session::send_fragment(TxPkt& p, uint32_t seq, bool retransmit) {
  TxMsg& m = *p.msg;
  const uint64_t frag = eng.fragment_bytes();
  const uint64_t off = uint64_t{p.frag} * frag;
  const uint64_t len = std::min<uint64_t>(frag, m.size - off);
  PacketHeader h;
  h.type = PacketType::Data;
  h.flags = retransmit ? kFlagRetransmit : 0;
  h.dst_session = peer_id;
  h.src_session = id;
  h.seq = seq;
  h.ack = rcv_nxt_;
  h.window = advertised_window();
  h.payload_len = static_cast<uint16_t>(len);
  h.tensor_id = m.tid;
  h.tensor_size = m.size;
  h.frag_offset = off;
  h.frag_index = p.frag;
  h.frag_count = m.frags;
  // Bytes of the frame header and message go inline (copied into the
  // header mbuf); payload bytes are attached where they lie.
  const uint64_t pre = m.prefix.size();
  const uint64_t inline_end = std::min(off + len, pre);
  const uint16_t inline_len = off < pre ? static_cast<uint16_t>(inline_end - off) : 0;
  rte_mbuf* tail = nullptr;
  if (off + len > pre) {
    const uint64_t start = std::max(off, pre) - pre;
    const uint16_t plen = static_cast<uint16_t>(off + len - std::max(off, pre));
    auto* hold = new std::shared_ptr<TxMsg>(p.msg);
    tail = eng.attach(
        m.payload + start, plen,
        [](void* arg) {
          auto* held = static_cast<std::shared_ptr<TxMsg>*>(arg);
          std::shared_ptr<TxMsg> msg = std::move(*held);
          delete held;
          if (msg->owner) msg->owner->released(*msg);
        },
        hold);
    if (tail == nullptr) {
      delete hold;  // no mbuf: as if lost, the timer sends it again
      p.sent_ns = eng.now_ns();
      return;
    }
    ++m.mbufs;
  }
  eng.transmit(h, peer_mac, inline_len ? reinterpret_cast<const uint8_t*>(m.prefix.data()) + off : nullptr,
               inline_len, tail);
  p.sent_ns = eng.now_ns();
  if (retransmit) eng.stats().retransmits++;
}

void Session::on_packet(const PacketHeader& h, const rte_ether_addr& src, const rte_mbuf* m, uint32_t at) {
  switch (h.type) {
    case PacketType::SynAck:
      if (state == State::Connecting) {
        peer_id = h.src_session;
        peer_mac = src;
        peer_window_ = h.window;
        state = State::Open;
        box->post(Event(Event::Connected));
      }
      return;
    case PacketType::Data: return on_data(h, src, m, at);
    case PacketType::Ack:
      if (h.flags & kFlagProbe) ack_due_ = true;
      [[fallthrough]];
    case PacketType::Nack: return on_ack(h);
    case PacketType::Fin:
      if (state == State::Connecting || state == State::Done) return;
      send_control(PacketType::Ack, kFlagFinAck);
      if (state == State::Closing) return end(close_st_, close_detail_);
      return fail(GENIE_ERR_CONNECTION, cat("connection to ", peer_name, " closed by the peer"), false);
    case PacketType::Rst:
      if (state == State::Connecting) {
        Event e(Event::ConnectFailed);
        e.detail = cat("cannot connect to ", peer_name, ": refused (no DPDK listener at endpoint ", endpoint_,
                       " behind port ", eng.port_name(), ")");
        box->post(std::move(e));
        return end(GENIE_ERR_CONNECTION, cat("cannot connect to ", peer_name, ": refused"));
      }
      if (state == State::Closing) return end(close_st_, close_detail_);
      return fail(GENIE_ERR_CONNECTION, cat("connection to ", peer_name, " reset by the peer"), false);
    default: return;
  }
}

void Session::on_ack(const PacketHeader& h) {
  if (state != State::Open && state != State::Closing) return;
  peer_window_ = h.window;
  const int32_t d = static_cast<int32_t>(h.ack - snd_una_);
  if (d > 0 && static_cast<size_t>(d) <= unacked_.size()) {
    const TxPkt& last = unacked_[d - 1];
    if (last.tries == 0 && !last.nacked) {
      const uint64_t sample = eng.now_ns() - last.sent_ns;
      srtt_ns_ = srtt_ns_ == 0 ? sample : (7 * srtt_ns_ + sample) / 8;
    }
    for (int32_t i = 0; i < d; ++i) {
      ack_packet(unacked_.front());
      unacked_.pop_front();
    }
    snd_una_ = h.ack;
  }
  const uint64_t now = eng.now_ns();
  for (uint32_t i = 0; i < 64; ++i) {
    if (!(h.sack >> i & 1)) continue;
    const uint32_t seq = h.type == PacketType::Ack ? h.ack + 1 + i : h.ack + i;
    const uint32_t idx = seq - snd_una_;
    if (before(seq, snd_una_) || idx >= unacked_.size()) continue;
    TxPkt& p = unacked_[idx];
    if (h.type == PacketType::Ack) {
      ack_packet(p);
    } else if (!p.acked && !p.msg->finished &&
               (!p.nacked ||
                now - p.sent_ns > std::max<uint64_t>(uint64_t{eng.config().nack_us} * 1000, 2 * srtt_ns_))) {
      p.nacked = true;
      send_fragment(p, seq, true);  // the peer saw a later packet: this one, at once
    }
  }
  if ((h.flags & kFlagFinAck) && state == State::Closing && fin_sent_) end(close_st_, close_detail_);
}

void Session::on_data(const PacketHeader& h, const rte_ether_addr&, const rte_mbuf* m, uint32_t at) {
  if (state != State::Open && state != State::Closing) return;
  const int32_t d = static_cast<int32_t>(h.seq - rcv_nxt_);
  if (d < 0 || ooo_.count(h.seq) != 0) {
    eng.stats().duplicates++;
    ack_due_ = true;  // its ack may have been lost
    return;
  }
  if (static_cast<uint32_t>(d) >= eng.config().window) return;  // beyond the window: sent again later
  if (h.tensor_id < next_deliver_ || h.tensor_size < kFrameHeaderSize || h.tensor_size > kMaxTensor ||
      h.frag_offset > h.tensor_size || h.payload_len > h.tensor_size - h.frag_offset) {
    return fail(GENIE_ERR_PROTOCOL,
                cat("malformed DPDK data packet from ", peer_name, ": tensor ", h.tensor_id, " of ",
                    h.tensor_size, " bytes, fragment at ", h.frag_offset, " of ", h.payload_len, " bytes"),
                true);
  }
  RxTensor& t = rx_[h.tensor_id];
  if (!t.buf) {
    t.buf.reset(new (std::nothrow) char[h.tensor_size]);
    t.size = h.tensor_size;
    if (!t.buf) {
      return fail(GENIE_ERR_OUT_OF_MEMORY,
                  cat("cannot allocate ", h.tensor_size, " bytes for a tensor from ", peer_name), true);
    }
  } else if (t.size != h.tensor_size) {
    return fail(GENIE_ERR_PROTOCOL, cat("DPDK tensor ", h.tensor_id, " from ", peer_name, " changed size"),
                true);
  }
  char* dst = t.buf.get() + h.frag_offset;
  const void* src = rte_pktmbuf_read(m, at, h.payload_len, dst);
  if (src != dst) std::memcpy(dst, src, h.payload_len);
  t.got += h.payload_len;
  if (d == 0) {
    ++rcv_nxt_;
    while (!ooo_.empty() && *ooo_.begin() == rcv_nxt_) {
      ooo_.erase(ooo_.begin());
      ++rcv_nxt_;
    }
  } else {
    ooo_.insert(h.seq);
    const uint64_t now = eng.now_ns();
    if (now - nack_ns_ > uint64_t{eng.config().nack_us} * 1000) send_nack(now);
  }
  ack_due_ = true;
  deliver();
}

// Names what is missing below the highest sequence number held.
void Session::send_nack(uint64_t now) {
  const uint32_t top = *ooo_.rbegin();
  uint64_t missing = 0;
  for (uint32_t i = 0; i < 64 && before(rcv_nxt_ + i, top); ++i)
    if (ooo_.count(rcv_nxt_ + i) == 0) missing |= uint64_t{1} << i;
  nack_ns_ = now;
  eng.stats().nacks_sent++;
  send_control(PacketType::Nack, 0, missing);
}

void Session::deliver() {
  while (!rx_.empty() && rx_.begin()->first == next_deliver_ &&
         rx_.begin()->second.got == rx_.begin()->second.size) {
    Event e(Event::Frame);
    e.size = rx_.begin()->second.size;
    e.bytes = std::move(rx_.begin()->second.buf);
    box->backlog.fetch_add(e.size, std::memory_order_relaxed);
    box->post(std::move(e));
    rx_.erase(rx_.begin());
    ++next_deliver_;
  }
}

void Session::pump(uint64_t now, bool timers) {
  if (state == State::Connecting) {
    if (!timers || now - syn_sent_ns_ < rto_ns(std::min<uint32_t>(syn_tries_ - 1, 3))) return;
    if (now >= connect_deadline_) {
      Event e(Event::ConnectFailed);
      e.detail =
          cat("cannot connect to ", peer_name, ": no answer from DPDK endpoint ", endpoint_, " behind port ",
              eng.port_name(), " within ", eng.config().connect_ms, " ms (", syn_tries_, " tries)");
      const std::string why = e.detail;
      box->post(std::move(e));
      return end(GENIE_ERR_CONNECTION, why);
    }
    ++syn_tries_;
    syn_sent_ns_ = now;
    send_control(PacketType::Syn, 0);
    return;
  }
  if (state != State::Open && state != State::Closing) return;
  while (state == State::Open && !queue_.empty()) {
    const uint32_t limit = std::min(eng.config().window, peer_window_);
    if (snd_nxt_ - snd_una_ >= limit) break;
    std::shared_ptr<TxMsg> m = queue_.front();
    unacked_.push_back(TxPkt{m, m->packed++});
    send_fragment(unacked_.back(), snd_nxt_++, false);
    if (m->packed == m->frags) queue_.pop_front();
  }
  if (timers) {
    if (peer_window_ == 0 && !queue_.empty() && unacked_.empty() && now - probe_ns_ > rto_ns(0)) {
      probe_ns_ = now;
      send_control(PacketType::Ack, kFlagProbe);
    }
    // At most 16 re-sends a tick: after a stall every packet looks late, and
    // the receiver's Nacks name the ones really missing.
    int resent = 0;
    for (size_t i = 0; i < unacked_.size() && resent < 16; ++i) {
      TxPkt& p = unacked_[i];
      if (p.acked || p.msg->finished || now - p.sent_ns < rto_ns(p.tries)) continue;
      if (p.tries >= eng.config().retries) {
        return fail(GENIE_ERR_CONNECTION,
                    cat("connection to ", peer_name, " timed out: packet ", snd_una_ + i, " of tensor ",
                        p.msg->tid, " was not acknowledged after ", p.tries, " retransmissions"),
                    true);
      }
      ++p.tries;
      ++resent;
      send_fragment(p, snd_una_ + static_cast<uint32_t>(i), true);
    }
  }
  // A hole still open: name it again (the Nack or its repair may be lost).
  if (!ooo_.empty() && now - nack_ns_ > 4 * uint64_t{eng.config().nack_us} * 1000) send_nack(now);
  if (ack_due_ || (advertised_zero_ && advertised_window() > 0)) {
    ack_due_ = false;
    uint64_t sack = 0;
    for (uint32_t s : ooo_) {
      const uint32_t i = s - rcv_nxt_ - 1;
      if (i < 64) sack |= uint64_t{1} << i;
    }
    send_control(PacketType::Ack, 0, sack);
  }
  if (state == State::Closing) {
    const bool pending = std::any_of(unacked_.begin(), unacked_.end(),
                                     [](const TxPkt& p) { return !p.acked && !p.msg->finished; });
    if (!pending && !fin_sent_) {
      fin_sent_ = true;
      fin_tries_ = 1;
      fin_ns_ = now;
      send_control(PacketType::Fin, 0);
    } else if (fin_sent_ && timers && now - fin_ns_ > rto_ns(fin_tries_)) {
      if (fin_tries_ >= 3) return end(close_st_, close_detail_);
      ++fin_tries_;
      fin_ns_ = now;
      send_control(PacketType::Fin, 0);
    }
  }
}

void Session::drop_all() {
  for (auto& m : queue_) finish_msg(*m, GENIE_ERR_CONNECTION);
  for (TxPkt& p : unacked_) finish_msg(*p.msg, GENIE_ERR_CONNECTION);
  queue_.clear();
  unacked_.clear();
  rx_.clear();
  ooo_.clear();
}

void Session::close(genie_status_t st, const std::string& detail) {
  if (state == State::Closing || state == State::Done) return;
  close_st_ = st;
  close_detail_ = detail;
  if (state == State::Connecting) return end(st, detail);
  if (st != GENIE_OK) {  // an error, or the owner's loop going away: no lingering
    send_control(PacketType::Rst, 0);
    return end(st, detail);
  }
  // What has not left entirely fails; what has is acknowledged first, then Fin.
  state = State::Closing;
  for (auto& m : queue_) finish_msg(*m, GENIE_ERR_CONNECTION);
  queue_.clear();
}

void Session::reset(const std::string& detail) {
  if (state == State::Done) return;
  send_control(PacketType::Rst, 0);
  end(GENIE_ERR_CONNECTION, detail);
}

void Session::fail(genie_status_t st, const std::string& detail, bool tell_peer) {
  if (tell_peer && state != State::Connecting) send_control(PacketType::Rst, 0);
  if (state == State::Closing) return end(close_st_, close_detail_);
  end(st, detail);
}

void Session::end(genie_status_t st, const std::string& detail) {
  if (state != State::Done) {
    state = State::Done;
    auto self = shared_from_this();
    drop_all();
    eng.forget(id);
    end_st_ = st;
    end_detail_ = detail;
    closed_pending_ = true;
  }
  if (!closed_pending_ || unposted_ > 0) return;
  closed_pending_ = false;
  Event e(Event::Closed);
  e.status = end_st_;
  e.detail = end_detail_;
  box->post(std::move(e));
}

}  // namespace genie::dataplane::dpdk
