// A UCX channel: one ucp endpoint, frames carried as active messages.
//
// A frame is one active message whose header is the 40-byte frame header
// (dataplane/frame.hpp, CRC over header and message) and whose data is the
// message; a payload follows as a second active message whose data UCX
// moves by rendezvous straight into the receiver's PayloadSink
// (ucp_am_recv_data_nbx), or, when small enough to travel eagerly, is
// copied from UCX's receive buffer. Messages are handled strictly one after
// another in arrival order: while one is being received, later ones wait
// (their rendezvous descriptors kept), so a payload always finds the sink
// its frame asked for.
//
// The connecting side is connected when the listener's welcome arrives; a
// close sends a bye (the peer closes with GENIE_ERR_CONNECTION) and closes
// the endpoint, flushing what was sent; a lost peer shows as the
// endpoint's error callback (peer error handling).
//
// put/get: ucp_put_nbx / ucp_get_nbx with the peer's packed rkey
// (MemoryDescriptor::key, unpacked once per key per channel); a put is done
// once a flush of the endpoint completed, i.e. the bytes are in the peer's
// memory.
#pragma once

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <string>

#include "dataplane/transport.hpp"
#include "dataplane/ucx/worker.hpp"

namespace genie::dataplane::ucx {

// Host memory registered with ucp_mem_map; its descriptor's key is the
// packed rkey.
class Region final : public MemoryRegion {
 public:
  Region(std::shared_ptr<Context> ctx, void* data, MemoryDescriptor d, ucp_mem_h memh);
  ~Region() override;

 private:
  std::shared_ptr<Context> ctx_;
  ucp_mem_h memh_;
};

class Endpoint final : public Channel, public AmSink, public std::enable_shared_from_this<Endpoint> {
 public:
  // `budget` (may be null): where messages still arriving are charged
  // (ChannelOptions::budget): the copies of eager messages waiting in the
  // inbox, and a rendezvous message's buffer until it is handed over.
  Endpoint(std::shared_ptr<LoopWorker> worker, uint32_t max_message, std::shared_ptr<MessageBudget> budget,
           ChannelHandlers handlers, std::string peer);
  ~Endpoint() override;

  // Connecting side: creates the endpoint to `addr`; connected on welcome.
  void start_connect(const struct sockaddr* addr, socklen_t len, Transport::ConnectFn cb);
  // Accepting side: creates the endpoint from a connection request and
  // welcomes the peer.
  void start_accept(ucp_conn_request_h req);

  void send(uint16_t type, uint64_t request_id, uint32_t flags, std::string msg, const void* payload,
            uint64_t payload_len, std::shared_ptr<void> keep, Done done) override;
  void close(genie_status_t status, const std::string& detail) override;
  bool closed() const override { return closing_; }
  std::string peer() const override { return peer_; }
  void set_max_message(uint32_t bytes) override { max_message_ = bytes; }
  void put(const std::shared_ptr<MemoryRegion>& local, uint64_t local_offset, const MemoryDescriptor& remote,
           uint64_t remote_offset, uint64_t length, RmaDone done) override;
  void get(const std::shared_ptr<MemoryRegion>& local, uint64_t local_offset, const MemoryDescriptor& remote,
           uint64_t remote_offset, uint64_t length, RmaDone done) override;

  bool rma_emulated() const override { return rma_emulated_.load(std::memory_order_acquire); }

  ucs_status_t arrive(unsigned id, const void* header, size_t header_len, void* data, size_t length,
                      const ucp_am_recv_param_t* param) override;

 private:
  struct Incoming {
    unsigned id = 0;
    std::string header;
    std::string data;        // eager data, copied
    void* desc = nullptr;    // rendezvous descriptor, or UCX's data (persistent)
    bool persistent = false;  // desc is eager data UCX keeps until released
    size_t length = 0;
    uint64_t charged = 0;  // to the budget, while it waits
  };
  struct Op;  // one send or RMA operation: its UCX requests and its callback

  void begin(ucp_ep_params_t& params);
  void established_by_peer();
  void pump();
  void handle(Incoming& in);
  void deliver_frame(const FrameHeader& h, const std::string& header, std::string&& msg);
  void take_payload(Incoming& in);
  // Receives a rendezvous message (`what`, for errors) into dst, then runs
  // `then` and carries on with the inbox; nothing else is handled meanwhile.
  void receive(Incoming& in, void* dst, const char* what, std::function<void()> then);
  // Sends an active message without header or data (welcome, bye).
  void send_control(unsigned id, const char* what);
  void lost(ucs_status_t st);
  // Reads the wired endpoint's lanes once: whether RMA has a lane of its
  // own (rma_emulated); the connecting side logs them.
  void learn_lanes(bool log);
  void rma(bool put, const std::shared_ptr<MemoryRegion>& local, uint64_t local_offset,
           const MemoryDescriptor& remote, uint64_t remote_offset, uint64_t length, RmaDone done);
  // Issues one UCX operation for `op` (a request pointer, NULL for done at
  // once, or an error).
  void track(Op* op, ucs_status_ptr_t req);
  // Every request of `op` was issued: it finishes once they completed.
  void issued(Op* op);
  void op_finished(Op* op);
  void release(Incoming& in);
  // Takes n bytes from the budget, or throws Error(TOO_LARGE) naming `what`.
  void charge(uint64_t n, const char* what);
  void maybe_finish();
  static void on_error(void* arg, ucp_ep_h ep, ucs_status_t status);

  std::shared_ptr<LoopWorker> worker_;  // until finished
  uint32_t max_message_;  // set_max_message may change it (loop thread)
  std::shared_ptr<MessageBudget> budget_;
  std::string over_budget_;  // why a message was refused by the budget: close with it
  ChannelHandlers handlers_;
  const std::string peer_;
  ucp_ep_h ep_ = nullptr;
  std::shared_ptr<Endpoint> self_;  // until finished
  uint64_t hook_ = 0;
  Transport::ConnectFn connect_cb_;
  bool established_ = false;
  bool closing_ = false;
  bool finished_ = false;
  bool peer_closed_ = false;  // the peer said bye
  bool errored_ = false;      // the endpoint failed (peer lost, or never reached)
  bool close_done_ = false;   // ucp_ep_close_nbx completed
  bool receiving_ = false;    // a rendezvous receive is in flight
  bool lanes_known_ = false;  // learn_lanes ran
  std::atomic<bool> rma_emulated_{false};
  const bool rma_ok_;  // the context carries RMA (Context::rma)
  genie_status_t close_status_ = GENIE_OK;
  std::string close_detail_;
  uint64_t ops_open_ = 0;  // operations whose callbacks have not run yet
  std::deque<Incoming> inbox_;
  // The frame whose payload comes next.
  bool want_payload_ = false;
  uint64_t payload_len_ = 0;
  PayloadSink sink_;
  std::string frame_label_;
  std::map<std::string, ucp_rkey_h> rkeys_;  // unpacked peer keys
};

}  // namespace genie::dataplane::ucx
