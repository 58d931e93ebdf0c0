// One DPDK channel's protocol state, run by the engine's polling thread
// only: fragmentation of tensors into Data packets, a send window, acks
// (cumulative and selective) and nacks acted on, retransmission with
// bounded retries, reassembly in tensor order, close by Fin or Rst.
// docs/dpdk.md describes the protocol.
#pragma once

#include <utility>

#include "dataplane/dpdk/engine.hpp"
#include "dataplane/dpdk/flight_ring.hpp"
#include "dataplane/dpdk/seq_window.hpp"

namespace genie::dataplane::dpdk {

// One tensor (a frame: frame header + message, then the payload) to send.
// Its fragments leave as external-buffer mbufs over `prefix` and the
// caller's payload, all sharing `shinfo`: its count is one per mbuf plus
// one the session holds until the message is finished, and its free
// callback (the last mbuf released) lets the send complete.
struct TxMsg {
  uint64_t tid = 0;
  std::string prefix;                // the encoded frame header and the message
  const uint8_t* payload = nullptr;  // the caller's, attached to mbufs (no copy)
  uint64_t payload_len = 0;
  SemanticTag tag;  // on every packet of it
  std::shared_ptr<void> keep;
  Channel::Done done;
  uint64_t size = 0;
  uint32_t frags = 0;
  uint32_t acked = 0;     // fragments acknowledged
  uint32_t packed = 0;    // fragments given a sequence number
  bool finished = false;  // done posted (or to be posted once every mbuf is released)
  bool released = false;  // shinfo's count reached zero
  genie_status_t result = GENIE_OK;
  std::shared_ptr<Session> owner;  // until released: its Closed waits for every done
  std::shared_ptr<TxMsg> self;     // until released: mbufs point into this object
  bool posted = false;
  rte_mbuf_ext_shared_info shinfo{};
  // Packets in flight that point at this message (MsgRef), and the one
  // reference to it that they hold together.
  uint32_t flight_refs = 0;
  std::shared_ptr<TxMsg> flight_hold;
};

// A packet in flight's hold on its message. Every packet of a message
// holding a shared_ptr of its own cost two locked instructions per packet
// (a tenth of a 64-byte packet's time); the polling thread alone touches
// packets, so they count themselves in the message, and the message's
// first packet in flight takes one shared_ptr for all of them, its last
// one gives it back.
class MsgRef {
 public:
  MsgRef() = default;
  explicit MsgRef(const std::shared_ptr<TxMsg>& m) : m_(m.get()) {
    if (m_->flight_refs++ == 0) m_->flight_hold = m;
  }
  MsgRef(const MsgRef&) = delete;
  MsgRef& operator=(const MsgRef&) = delete;
  MsgRef(MsgRef&& o) noexcept : m_(std::exchange(o.m_, nullptr)) {}
  MsgRef& operator=(MsgRef&& o) noexcept {
    if (this != &o) {
      reset();
      m_ = std::exchange(o.m_, nullptr);
    }
    return *this;
  }
  ~MsgRef() { reset(); }

  TxMsg* operator->() const { return m_; }
  TxMsg& operator*() const { return *m_; }

 private:
  void reset() {
    TxMsg* m = std::exchange(m_, nullptr);
    if (m == nullptr || --m->flight_refs > 0) return;
    std::shared_ptr<TxMsg> last = std::move(m->flight_hold);  // may be the last reference: m goes with it
  }

  TxMsg* m_ = nullptr;
};

struct TxPkt {
  MsgRef msg;
  uint32_t frag = 0;
  uint64_t sent_ns = 0;
  uint32_t tries = 0;
  bool acked = false;
  bool nacked = false;  // re-sent on a Nack already
  bool probed = false;  // re-sent as a tail-loss probe already
};

struct Session : std::enable_shared_from_this<Session> {
  enum class State { Connecting, Open, Closing, Done };

  explicit Session(Engine& e) : eng(e), unacked_(e.config().window), win_(e.config().window) {}
  ~Session();

  // Commands from the channel (polling thread).
  void connect(uint16_t endpoint, uint32_t max_message, std::string target);
  void enqueue(std::shared_ptr<TxMsg> msg);
  void close(genie_status_t st, const std::string& detail);
  void reset(const std::string& detail);  // a listener did not take it
  void accept_syn(const PacketHeader& syn, const rte_ether_addr& src);
  void send_control(PacketType type, uint16_t flags, uint64_t sack = 0, const uint8_t* extra = nullptr,
                    uint16_t extra_len = 0);
  // Every mbuf over `m` was released (shinfo's free callback).
  void released(TxMsg& m);

  // Packets and time (polling thread). on_packet returns true when the
  // session kept `m` (a Data packet waiting in the window or the mailbox).
  bool on_packet(const PacketHeader& h, const rte_ether_addr& src, rte_mbuf* m, uint32_t payload_at);
  void pump(uint64_t now, bool timers);

  Engine& eng;
  uint32_t id = 0;  // given by Engine::adopt
  uint32_t peer_id = 0;
  rte_ether_addr peer_mac{};
  State state = State::Connecting;
  std::shared_ptr<Mailbox> box = std::make_shared<Mailbox>();
  std::string peer_name;
  uint32_t max_message = 0;
  bool accepted_side = false;

 private:
  void on_ack(const PacketHeader& h, const rte_mbuf* m, uint32_t at);
  bool on_data(const PacketHeader& h, rte_mbuf* m, uint32_t at);
  void retransmit_ranges(const SeqRange* r, size_t n, uint64_t now);
  void post_received();
  void prefetch_payload(const TxMsg& m, uint32_t frag) const;
  void send_fragment(TxPkt& p, uint32_t seq, bool retransmit);
  void ack_packet(TxPkt& p);
  void finish_msg(TxMsg& m, genie_status_t st);
  void maybe_post(TxMsg& m);
  void drop_all();
  void fail(genie_status_t st, const std::string& detail, bool tell_peer);
  void end(genie_status_t st, const std::string& detail);
  uint32_t advertised_window() const;
  void send_nack(uint64_t now);
  uint64_t rto_ns(uint32_t tries) const;

  // connect
  uint16_t endpoint_ = 0;
  uint32_t syn_tries_ = 0;
  uint64_t syn_sent_ns_ = 0;
  uint64_t connect_deadline_ = 0;
  // Syn tries answered by a Rst: a port that is not listening there. On a
  // shared segment every other port hears the broadcast Syn and those
  // without the endpoint refuse it, so one refusal is not the answer: the
  // connect fails as refused only when kRefusedTries tries in a row got a
  // Rst and no SynAck.
  static constexpr uint32_t kRefusedTries = 2;
  uint32_t refused_tries_ = 0;
  bool refused_now_ = false;  // the current try got a Rst
  // send
  std::deque<std::shared_ptr<TxMsg>> queue_;  // front may be partly packed
  uint64_t next_tid_ = 1;
  uint32_t snd_una_ = 1, snd_nxt_ = 1;
  FlightRing<TxPkt> unacked_;  // seq snd_una_ + i
  uint32_t peer_window_ = 0;
  uint64_t srtt_ns_ = 0;  // smoothed round trip of first transmissions; 0: no sample yet
  uint64_t probe_ns_ = 0;
  uint64_t progress_ns_ = 0;  // when an Ack last acknowledged a packet
  // receive
  SeqWindow<rte_mbuf> win_;       // packets ahead of a gap; base() is the next one expected
  std::vector<rte_mbuf*> ready_;  // in sequence, for the channel at the end of the burst
  std::vector<Segment> ready_segs_;  // their payload bytes
  uint64_t ready_bytes_ = 0;
  std::vector<SemanticTag> ready_tags_;  // of the tensors starting in ready_, in order
  SemanticTag rx_tag_;                   // of the tensor being received in sequence
  bool ack_due_ = false;
  bool advertised_zero_ = false;
  uint64_t nack_ns_ = 0;
  // close
  genie_status_t close_st_ = GENIE_OK;
  std::string close_detail_;
  bool fin_sent_ = false;
  uint32_t fin_tries_ = 0;
  uint64_t fin_ns_ = 0;
  int unposted_ = 0;             // messages finished whose done waits for their mbufs
  bool closed_pending_ = false;  // end() ran; Closed goes out once unposted_ == 0
  genie_status_t end_st_ = GENIE_OK;
  std::string end_detail_;
};

}  // namespace genie::dataplane::dpdk
