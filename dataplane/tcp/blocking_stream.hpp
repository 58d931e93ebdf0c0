// Framed TCP I/O driven by the calling thread (dataplane/frame.hpp), for a
// caller that owns a socket no event loop watches: frames sent and received
// on a non-blocking socket, poll() bounding every wait by a deadline, in
// plaintext or through a TLS session (tls.hpp) driven on the socket. The
// frames, their CRC and limits, the TLS records and the byte counters are
// those of the loop's Connection (connection.hpp); only who waits differs.
//
// Used by the client's direct link (control/client/direct.hpp). Every call
// runs on the thread that owns the stream; nothing here takes a lock.
// Failures throw StreamBroken (why the exchange stopped), which the owner
// turns into its own error; connect_blocking() throws Error(CONNECTION).
#pragma once

#include <sys/uio.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "dataplane/blocking.hpp"
#include "dataplane/frame.hpp"

namespace genie::dataplane::tcp {

class TlsSession;

// The blocking exchange's deadline and failures (dataplane/blocking.hpp).
using dataplane::broke;
using dataplane::Broke;
using dataplane::Deadline;
using dataplane::StreamBroken;
using dataplane::StreamClock;

// One exchange on a stream: its socket, with TLS its session, and the
// bytes received (decrypted, with TLS) but not yet taken by a frame, which
// outlive the exchange (the owner keeps them with the socket). Without
// TLS, reads shorter than kReadAhead take what the socket has, up to
// kReadAhead bytes, so that a reply's header and message come in one recv;
// longer ones (payloads) go straight to their destination.
struct BlockingStream {
  int fd;
  TlsSession* tls;  // null: plaintext
  std::string* plain;
  size_t* taken;  // bytes of *plain already taken
  Deadline deadline;
};
constexpr size_t kReadAhead = 2048;

// Waits until `fd` is ready for `events` or the deadline passes (Timeout).
// With `spin`, a socket ready within microseconds is taken without sleeping
// (core/spin.hpp).
void wait_for(int fd, short events, Deadline& deadline, bool spin);

// Sends every byte of `iov` (modified as it goes); with TLS, as records.
void send_all(BlockingStream& s, iovec* iov, int cnt);
// Receives exactly n bytes into dst, those already in *plain first; `spin`
// for the first wait.
void recv_all(BlockingStream& s, void* dst, size_t n, bool spin);
// Client side of the TLS handshake on s.tls (a new session): returns once
// it is done.
void tls_handshake(BlockingStream& s);

// One frame: header (its CRC over `msg`), message and payload, in one
// write. h.msg_len and h.payload_len are ignored (taken from the arguments).
void send_frame(BlockingStream& s, const FrameHeader& h, const void* msg, size_t msg_len, const void* payload,
                uint64_t payload_len);
// Reads a frame's header and message (of a type `types` accepts, at most
// max_message bytes, the CRC checked: else Protocol). The payload, if any,
// is the caller's to read (recv_all).
FrameHeader read_frame(BlockingStream& s, uint32_t max_message, const FrameTypes& types, std::string* msg,
                       bool spin);

// A blocking connect to "host:port" bounded by the deadline; the socket
// comes back non-blocking, with a data connection's options (buffers of
// `buffer_bytes` set before the SYN, TCP_NODELAY). Throws
// Error(CONNECTION) naming the address and the reason.
int connect_blocking(const std::string& address, int buffer_bytes, StreamClock::time_point deadline);

// True when an idle socket still looks usable: nothing to read (a peer's
// close or stray bytes make it readable) and no error.
bool idle_ok(int fd);

}  // namespace genie::dataplane::tcp
