#include "dataplane/dpdk/session.hpp"

#include <rte_prefetch.h>

#include <algorithm>
#include <cstring>

#include "core/error.hpp"
#include "dataplane/frame.hpp"

namespace genie::dataplane::dpdk {
namespace {

constexpr uint64_t kMaxTensor = 1ull << 40;  // a larger tensor_size is a malformed packet
constexpr uint64_t kInlineMax = 256;         // fragments up to this size are copied, not attached
// Received packets handed to the channel at once while bursts keep coming:
// small packets wait for a few bursts (a wake-up costs more than they do),
// large ones go each burst, so that the channel's copying overlaps receipt.
constexpr size_t kPostPackets = 128;
constexpr uint64_t kPostBytes = 256u << 10;
// A sender fetches the bytes of the fragment this many ahead of the one it
// builds (prefetch_payload).
constexpr uint32_t kPrefetchAhead = 4;

rte_ether_addr broadcast() {
  rte_ether_addr a;
  std::memset(a.addr_bytes, 0xff, sizeof a.addr_bytes);
  return a;
}

bool before(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b) < 0; }

// shinfo's free callback: the last mbuf over a message went back to its pool.
void tx_released(void*, void* opaque) {
  auto* m = static_cast<TxMsg*>(opaque);
  m->released = true;
  std::shared_ptr<TxMsg> self = std::move(m->self);  // m lives until the end of this call
  if (m->owner) m->owner->released(*m);
}

}  // namespace

Session::~Session() {
  win_.drain([](rte_mbuf* m) { rte_pktmbuf_free(m); });
  for (rte_mbuf* m : ready_) rte_pktmbuf_free(m);
}

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
  if (box->backlog.load(std::memory_order_relaxed) + ready_bytes_ >= eng.config().backlog_limit ||
      eng.rx_pool_full())
    return 0;
  // Counted from the cumulative ack, as the sender counts what it has in
  // flight: packets held behind a gap are inside it already.
  return eng.config().window;
}

void Session::send_control(PacketType type, uint16_t flags, uint64_t sack, const uint8_t* extra,
                           uint16_t extra_len) {
  PacketHeader h;
  h.type = type;
  h.flags = flags;
  h.dst_session = peer_id;
  h.src_session = id;
  h.seq = snd_nxt_;
  h.ack = win_.base();
  h.window = advertised_window();
  h.sack = sack;
  h.payload_len = extra_len;
  if (type == PacketType::Syn) h.tensor_id = endpoint_;
  advertised_zero_ = h.window == 0;
  eng.transmit(h, state == State::Connecting ? broadcast() : peer_mac, extra, extra_len, nullptr);
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
    msg->self = msg;
    msg->shinfo.free_cb = tx_released;
    msg->shinfo.fcb_opaque = msg.get();
    rte_mbuf_ext_refcnt_set(&msg->shinfo, 1);
    return finish_msg(*msg, GENIE_ERR_CONNECTION);
  }
  msg->tid = next_tid_++;
  msg->size = msg->prefix.size() + msg->payload_len;
  const uint64_t p = eng.fragment_bytes();
  msg->frags = static_cast<uint32_t>((msg->size + p - 1) / p);
  msg->owner = shared_from_this();
  msg->self = msg;
  msg->shinfo.free_cb = tx_released;
  msg->shinfo.fcb_opaque = msg.get();
  rte_mbuf_ext_refcnt_set(&msg->shinfo, 1);  // the session's own reference, until finished
  queue_.push_back(std::move(msg));
}

void Session::maybe_post(TxMsg& m) {
  if (!m.finished || m.posted || !m.released) return;
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
  // The session's reference: the last one unless mbufs over m are still
  // with the driver or a receiver (then their release posts the done).
  std::shared_ptr<TxMsg> hold = m.self;
  if (rte_mbuf_ext_refcnt_update(&m.shinfo, -1) == 0) tx_released(nullptr, &m);
}

void Session::released(TxMsg& m) { maybe_post(m); }

void Session::ack_packet(TxPkt& p) {
  if (p.acked) return;
  p.acked = true;
  progress_ns_ = eng.now();
  if (++p.msg->acked == p.msg->frags) finish_msg(*p.msg, GENIE_OK);
}

// The first bytes of fragment `frag` of m are fetched into the cache while
// the packets before it are built: the sender reads each fragment once (a
// copy, or the CRC), in order, with a packet's worth of other work between
// two reads, which the hardware prefetcher does not follow. Up to
// kInlineMax bytes: a small fragment whole; a large one is read in one
// run, which the prefetcher does follow once started.
void Session::prefetch_payload(const TxMsg& m, uint32_t frag) const {
  if (frag >= m.frags) return;
  const uint64_t bytes = eng.fragment_bytes();
  const uint64_t off = uint64_t{frag} * bytes, pre = m.prefix.size();
  if (off + bytes <= pre) return;  // the prefix: one small, warm string
  const uint8_t* at = m.payload + (off > pre ? off - pre : 0);
  const uint64_t len = std::min({bytes, kInlineMax, m.size - std::max(off, pre)});
  for (uint64_t i = 0; i < len; i += RTE_CACHE_LINE_SIZE) rte_prefetch0(at + i);
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
  h.ack = win_.base();
  h.window = advertised_window();
  h.payload_len = static_cast<uint16_t>(len);
  h.tensor_id = m.tid;
  h.tensor_size = m.size;
  h.frag_offset = off;
  h.frag_index = p.frag;
  h.frag_count = m.frags;
  h.dtype = m.tag.dtype;
  h.phase = m.tag.phase;
  h.role = m.tag.role;
  h.layer = m.tag.layer;
  p.sent_ns = eng.now();
  // Bytes of the frame header and message, then payload bytes, each
  // attached where they lie (no copy); an mbuf short is as if lost, and the
  // timer sends the packet again.
  const uint64_t pre = m.prefix.size();
  if (len <= kInlineMax) {
    // A small fragment is cheaper copied into the header mbuf than attached
    // (an mbuf fewer to allocate, free and count).
    uint8_t bytes[kInlineMax];
    const uint64_t head = off < pre ? std::min(off + len, pre) - off : 0;
    if (head > 0) std::memcpy(bytes, m.prefix.data() + off, head);
    if (head < len) std::memcpy(bytes + head, m.payload + (off + head - pre), len - head);
    eng.transmit(h, peer_mac, bytes, static_cast<uint16_t>(len), nullptr);
    if (retransmit) count(eng.stats().retransmits);
    return;
  }
  rte_mbuf* segs[2] = {nullptr, nullptr};
  int n = 0;
  if (off < pre) {
    const uint16_t l = static_cast<uint16_t>(std::min(off + len, pre) - off);
    if ((segs[n++] = eng.attach(m.prefix.data() + off, l, &m.shinfo)) == nullptr) return;
  }
  if (off + len > pre) {
    const uint64_t start = std::max(off, pre) - pre;
    const uint16_t l = static_cast<uint16_t>(off + len - std::max(off, pre));
    if ((segs[n++] = eng.attach(m.payload + start, l, &m.shinfo)) == nullptr) {
      if (n == 2) rte_pktmbuf_free(segs[0]);
      return;
    }
  }
  if (n == 2 && rte_pktmbuf_chain(segs[0], segs[1]) != 0) {
    rte_pktmbuf_free(segs[0]);
    rte_pktmbuf_free(segs[1]);
    return;
  }
  eng.transmit(h, peer_mac, nullptr, 0, segs[0]);
  if (retransmit) count(eng.stats().retransmits);
}

bool Session::on_packet(const PacketHeader& h, const rte_ether_addr& src, rte_mbuf* m, uint32_t at) {
  switch (h.type) {
    case PacketType::SynAck:
      if (state == State::Connecting) {
        peer_id = h.src_session;
        peer_mac = src;
        peer_window_ = h.window;
        state = State::Open;
        box->post(Event(Event::Connected));
      }
      return false;
    case PacketType::Data: return on_data(h, m, at);
    case PacketType::Ack:
      if (h.flags & kFlagProbe) ack_due_ = true;
      [[fallthrough]];
    case PacketType::Nack: on_ack(h, m, at); return false;
    case PacketType::Fin:
      if (state == State::Connecting || state == State::Done) return false;
      send_control(PacketType::Ack, kFlagFinAck);
      if (state == State::Closing) {
        end(close_st_, close_detail_);
        return false;
      }
      fail(GENIE_ERR_CONNECTION, cat("connection to ", peer_name, " closed by the peer"), false);
      return false;
    case PacketType::Rst:
      if (state == State::Connecting) {
        refused_now_ = true;  // counted when the try's time is up (pump)
      } else if (state == State::Closing) {
        end(close_st_, close_detail_);
      } else {
        fail(GENIE_ERR_CONNECTION, cat("connection to ", peer_name, " reset by the peer"), false);
      }
      return false;
    default: return false;
  }
}

void Session::on_ack(const PacketHeader& h, const rte_mbuf* m, uint32_t at) {
  if (state != State::Open && state != State::Closing) return;
  peer_window_ = h.window;
  const int32_t d = static_cast<int32_t>(h.ack - snd_una_);
  if (d > 0 && static_cast<size_t>(d) <= unacked_.size()) {
    const TxPkt& last = unacked_[d - 1];
    if (last.tries == 0 && !last.nacked && !last.probed) {
      const uint64_t sample = eng.now() - last.sent_ns;
      srtt_ns_ = srtt_ns_ == 0 ? sample : (7 * srtt_ns_ + sample) / 8;
    }
    for (int32_t i = 0; i < d; ++i) {
      ack_packet(unacked_.front());
      unacked_.pop_front();
    }
    snd_una_ = h.ack;
  }
  const uint64_t now = eng.now();
  if (h.type == PacketType::Ack) {
    for (uint64_t bits = h.sack; bits != 0; bits &= bits - 1) {
      const uint32_t seq = h.ack + 1 + static_cast<uint32_t>(__builtin_ctzll(bits));
      const uint32_t idx = seq - snd_una_;
      if (!before(seq, snd_una_) && idx < unacked_.size()) ack_packet(unacked_[idx]);
    }
  } else if (h.payload_len > 0) {
    uint8_t buf[kMaxNackRanges * kNackRangeBytes];
    SeqRange ranges[kMaxNackRanges];
    size_t n = 0;
    const auto* bytes = h.payload_len <= sizeof buf
                            ? static_cast<const uint8_t*>(rte_pktmbuf_read(m, at, h.payload_len, buf))
                            : nullptr;
    if (bytes != nullptr && decode_ranges(bytes, h.payload_len, ranges, &n)) retransmit_ranges(ranges, n, now);
  }
  if ((h.flags & kFlagFinAck) && state == State::Closing && fin_sent_) end(close_st_, close_detail_);
}

// The peer saw later packets but not these: each goes again at once, unless
// it was re-sent so recently that the repair may still be on its way.
void Session::retransmit_ranges(const SeqRange* r, size_t n, uint64_t now) {
  const uint64_t fresh = std::max<uint64_t>(uint64_t{eng.config().nack_us} * 1000, 2 * srtt_ns_);
  for (size_t k = 0; k < n; ++k) {
    for (uint32_t i = 0; i < r[k].count; ++i) {
      const uint32_t seq = r[k].first + i;
      const uint32_t idx = seq - snd_una_;
      if (before(seq, snd_una_)) continue;
      if (idx >= unacked_.size()) return;
      TxPkt& p = unacked_[idx];
      if (p.acked || p.msg->finished || ((p.nacked || p.probed) && now - p.sent_ns <= fresh)) continue;
      p.nacked = true;
      send_fragment(p, seq, true);
    }
  }
}

bool Session::on_data(const PacketHeader& h, rte_mbuf* m, uint32_t at) {
  if (state != State::Open && state != State::Closing) return false;
  if (before(h.seq, win_.base()) || win_.has(h.seq)) {
    count(eng.stats().duplicates);
    ack_due_ = true;  // its ack may have been lost
    return false;
  }
  if (!win_.in_window(h.seq)) return false;  // beyond the window: sent again later
  if (h.tensor_size < kFrameHeaderSize || h.tensor_size > kMaxTensor || h.frag_offset > h.tensor_size ||
      h.payload_len > h.tensor_size - h.frag_offset || h.payload_len == 0 ||
      h.payload_len > eng.fragment_bytes()) {
    fail(GENIE_ERR_PROTOCOL,
         cat("malformed DPDK data packet from ", peer_name, ": tensor ", h.tensor_id, " of ", h.tensor_size,
             " bytes, fragment at ", h.frag_offset, " of ", h.payload_len, " bytes"),
         true);
    return false;
  }
  // Keep the payload only: the chain starts at it and ends with it.
  if (rte_pktmbuf_adj(m, static_cast<uint16_t>(at)) == nullptr) return false;
  if (m->pkt_len > h.payload_len && rte_pktmbuf_trim(m, static_cast<uint16_t>(m->pkt_len - h.payload_len)) != 0)
    return false;
  // The tag rides in the mbuf until the packet's turn comes: every packet
  // of a tensor must carry the tag its first one did.
  m->hash.fdir.lo = uint32_t{h.dtype} | uint32_t{h.phase} << 8 | uint32_t{h.role} << 16;
  m->hash.fdir.hi = uint32_t{h.layer} | (h.frag_offset == 0 ? 1u << 16 : 0u);
  // In sequence with nothing held (the usual case): straight through.
  rte_mbuf* next = m;
  if (h.seq != win_.base() || win_.held() > 0) {
    win_.put(h.seq, m);
    next = win_.pop_front();
  } else {
    win_.skip();
  }
  for (rte_mbuf* x = next; x != nullptr; x = win_.pop_front()) {
    SemanticTag tag;
    tag.dtype = static_cast<uint8_t>(x->hash.fdir.lo);
    tag.phase = static_cast<uint8_t>(x->hash.fdir.lo >> 8);
    tag.role = static_cast<uint8_t>(x->hash.fdir.lo >> 16);
    tag.layer = static_cast<uint16_t>(x->hash.fdir.hi);
    ready_.push_back(x);
    ready_bytes_ += x->pkt_len;
    for (const rte_mbuf* seg = x; seg != nullptr; seg = seg->next)
      if (seg->data_len > 0) ready_segs_.push_back(Segment{rte_pktmbuf_mtod(seg, const uint8_t*), seg->data_len});
    if (x->hash.fdir.hi >> 16) {
      rx_tag_ = tag;
      ready_tags_.push_back(tag);
    } else if (!(tag == rx_tag_)) {
      fail(GENIE_ERR_PROTOCOL,
           cat("DPDK data packet from ", peer_name, " carries another semantic tag than its tensor's first (phase ",
               int{tag.phase}, " role ", int{tag.role}, " layer ", tag.layer, " instead of phase ",
               int{rx_tag_.phase}, " role ", int{rx_tag_.role}, " layer ", rx_tag_.layer, ")"),
           true);
      return true;  // m is in ready_, which the failure freed
    }
  }
  if (win_.held() > 0) {
    const uint64_t now = eng.now();
    if (now - nack_ns_ > uint64_t{eng.config().nack_us} * 1000) send_nack(now);
  }
  ack_due_ = true;
  return true;
}

// Names the runs missing below the highest sequence number held.
void Session::send_nack(uint64_t now) {
  SeqRange ranges[kMaxNackRanges];
  const size_t n = win_.missing(ranges, kMaxNackRanges);
  if (n == 0) return;
  uint8_t bytes[kMaxNackRanges * kNackRangeBytes];
  const size_t len = encode_ranges(ranges, n, bytes);
  nack_ns_ = now;
  count(eng.stats().nacks_sent);
  send_control(PacketType::Nack, 0, 0, bytes, static_cast<uint16_t>(len));
}

// What arrived in sequence during this burst goes to the channel as one
// event (one lock and one wake-up for up to a burst of packets).
void Session::post_received() {
  if (ready_.empty()) return;
  Event e(Event::Data);
  e.size = ready_bytes_;
  eng.held_mbufs().fetch_add(ready_.size(), std::memory_order_relaxed);
  box->backlog.fetch_add(ready_bytes_, std::memory_order_relaxed);
  e.mbufs.swap(ready_);
  e.segs.swap(ready_segs_);
  e.tags.swap(ready_tags_);
  ready_.reserve(64);
  ready_segs_.reserve(64);
  ready_bytes_ = 0;
  box->post(std::move(e));
}

void Session::pump(uint64_t now, bool timers) {
  if (state == State::Connecting) {
    if (!timers || now - syn_sent_ns_ < rto_ns(std::min<uint32_t>(syn_tries_ - 1, 3))) return;
    refused_tries_ = refused_now_ ? refused_tries_ + 1 : 0;
    refused_now_ = false;
    std::string why;
    if (refused_tries_ >= kRefusedTries)
      why = cat("cannot connect to ", peer_name, ": refused (no DPDK listener at endpoint ", endpoint_,
                " behind port ", eng.port_name(), ")");
    else if (now >= connect_deadline_)
      why =
          cat("cannot connect to ", peer_name, ": no answer from DPDK endpoint ", endpoint_, " behind port ",
              eng.port_name(), " within ", eng.config().connect_ms, " ms (", syn_tries_, " tries)");
    if (!why.empty()) {
      Event e(Event::ConnectFailed);
      e.detail = why;
      box->post(std::move(e));
      return end(GENIE_ERR_CONNECTION, why);
    }
    ++syn_tries_;
    syn_sent_ns_ = now;
    send_control(PacketType::Syn, 0);
    return;
  }
  if (state != State::Open && state != State::Closing) return;
  const uint32_t limit = std::min(eng.config().window, peer_window_);
  // A packet gets its sequence number only with its mbufs in hand and room
  // to queue it: an empty pool or a full port delays it, loses nothing.
  while (state == State::Open && !queue_.empty() && snd_nxt_ - snd_una_ < limit && !eng.tx_backlogged() &&
         eng.can_send()) {
    TxMsg& m = *queue_.front();
    prefetch_payload(m, m.packed + kPrefetchAhead);
    unacked_.push_back(TxPkt{MsgRef(queue_.front()), m.packed++});
    send_fragment(unacked_.back(), snd_nxt_++, false);
    if (m.packed == m.frags) queue_.pop_front();
  }
  if (timers) {
    if (peer_window_ == 0 && !queue_.empty() && unacked_.empty() && now - probe_ns_ > rto_ns(0)) {
      probe_ns_ = now;
      send_control(PacketType::Ack, kFlagProbe);
    }
    // Tail-loss probe: a packet unacknowledged for a few round trips with
    // nothing after it to reveal the gap (the last ones of a burst) goes
    // again once, long before its RTO; its Ack (or the Nack it causes)
    // repairs the tail within a round trip.
    // Both it and the retransmission timer count from the later of the
    // packet's sending and the last Ack that acknowledged anything: while
    // Acks keep coming the packets behind are moving (a long queue ahead of
    // them, not loss), and a gap is named by the receiver's Nacks.
    const uint64_t pto = std::max<uint64_t>(4 * srtt_ns_, 2 * uint64_t{eng.config().nack_us} * 1000);
    const uint64_t quiet = now - std::min(now, progress_ns_);
    int probes = 0;
    for (size_t i = 0; i < unacked_.size() && probes < 4 && quiet >= pto; ++i) {
      TxPkt& p = unacked_[i];
      if (p.acked || p.msg->finished || p.probed || p.tries > 0 || now - p.sent_ns < pto) continue;
      if (i + 1 < unacked_.size() && !unacked_[i + 1].acked && now - unacked_[i + 1].sent_ns < pto) break;
      p.probed = true;
      ++probes;
      count(eng.stats().probes);
      send_fragment(p, snd_una_ + static_cast<uint32_t>(i), true);
    }
    // At most 16 re-sends a tick: after a stall every packet looks late, and
    // the receiver's Nacks name the ones really missing.
    int resent = 0;
    for (size_t i = 0; i < unacked_.size() && resent < 16; ++i) {
      TxPkt& p = unacked_[i];
      if (p.acked || p.msg->finished || now - p.sent_ns < rto_ns(p.tries) || quiet < rto_ns(p.tries)) continue;
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
  if (win_.held() > 0 && now - nack_ns_ > 4 * uint64_t{eng.config().nack_us} * 1000) send_nack(now);
  // While bursts keep arriving full, what arrived in sequence waits for a
  // few more of them: every event wakes the channel's thread (a system call
  // and a context switch), which costs more than the packets of a burst.
  if (!eng.rx_busy() || ready_.size() >= kPostPackets || ready_bytes_ >= kPostBytes) post_received();
  if (ack_due_ || (advertised_zero_ && advertised_window() > 0)) {
    ack_due_ = false;
    uint64_t sack = 0;
    if (win_.held() > 0)
      for (uint32_t i = 0; i < 64; ++i)
        if (win_.has(win_.base() + 1 + i)) sack |= uint64_t{1} << i;
    send_control(PacketType::Ack, 0, sack);
  }
  if (state == State::Closing) {
    bool pending = false;
    for (size_t i = 0; i < unacked_.size() && !pending; ++i)
      pending = !unacked_[i].acked && !unacked_[i].msg->finished;
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
  for (size_t i = 0; i < unacked_.size(); ++i) finish_msg(*unacked_[i].msg, GENIE_ERR_CONNECTION);
  queue_.clear();
  unacked_.clear();
  win_.drain([](rte_mbuf* m) { rte_pktmbuf_free(m); });
  for (rte_mbuf* m : ready_) rte_pktmbuf_free(m);
  ready_.clear();
  ready_segs_.clear();
  ready_tags_.clear();
  ready_bytes_ = 0;
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
