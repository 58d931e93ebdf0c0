// Who may open a connection to a server now: a bound on connections in
// total and per source address, and a back-off for sources whose
// authentication failed (docs/security.md, "Defaults and settings").
//
// A source is an address without its port ("127.0.0.1", "::1"). A source
// whose authentication failed more than kFreeAuthFailures times in a row is
// refused for an interval that doubles with each further failure, up to
// kMaxBackoffMs; a successful authentication, or kForgetMs without a
// failure, clears its record. The records are bounded (kMaxRecords; the
// oldest goes first), so a flood of sources cannot grow them.
//
// Failures also draw on one server-wide allowance (kGlobalFailureBurst,
// refilled at kGlobalFailuresPerSecond): while it is spent, connections
// from sources that have not authenticated successfully lately are
// refused, so rotating source addresses does not raise the guessing rate.
//
// Not thread-safe: the server's loop thread owns it.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <unordered_map>

#include "genie.h"

namespace genie {

class Admission {
 public:
  using Clock = std::chrono::steady_clock;

  static constexpr int kFreeAuthFailures = 5;
  static constexpr int64_t kFirstBackoffMs = 200;
  static constexpr int64_t kMaxBackoffMs = 30000;
  static constexpr int64_t kForgetMs = 600000;
  static constexpr size_t kMaxRecords = 4096;
  static constexpr double kGlobalFailureBurst = 64;
  static constexpr double kGlobalFailuresPerSecond = 16;

  // 0: no limit.
  Admission(int max_connections, int max_per_source)
      : max_connections_(max_connections), max_per_source_(max_per_source) {}

  // Empty when a connection from `source` is admitted (and counted until
  // release()); else why it is refused, for the peer and the log, with the
  // status in *status (GENIE_ERR_AUTH while backing off, else
  // GENIE_ERR_CONNECTION).
  std::string admit(const std::string& source, genie_status_t* status, Clock::time_point now = Clock::now());
  // An admitted connection proved it belongs to a session (a data
  // connection): its source no longer answers for it, its session does
  // (the server bounds a session's data connections); it still counts in
  // the total.
  void vouch(const std::string& source);
  // A connection admitted ends: `per_source` unless vouch() ran for it.
  void release(const std::string& source, bool per_source = true);

  // An authentication from `source` failed; returns how long it is refused
  // from now on, in ms (0: not yet).
  int64_t auth_failed(const std::string& source, Clock::time_point now = Clock::now());
  void auth_succeeded(const std::string& source, Clock::time_point now = Clock::now());

  size_t connections() const { return total_; }

 private:
  // Refills the server-wide allowance of failures up to `now`.
  void refill(Clock::time_point now);

  struct Backoff {
    int failures = 0;
    Clock::time_point last_failure;
    Clock::time_point refused_until;
  };
  void forget_stale(Clock::time_point now);

  int max_connections_;
  int max_per_source_;
  size_t total_ = 0;
  std::unordered_map<std::string, int> per_source_;
  std::unordered_map<std::string, Backoff> backoff_;
  double global_allowance_ = kGlobalFailureBurst;
  Clock::time_point refilled_{};
  // Sources whose last authentication succeeded, and when (bounded by
  // kMaxRecords): exempt from the server-wide refusal.
  std::unordered_map<std::string, Clock::time_point> good_;
};

// The address part of a peer name "ip:port" or "[ipv6]:port", an IPv4
// peer of a dual-stack listener ("::ffff:1.2.3.4") as its IPv4 address;
// `peer` itself when it has no port.
std::string source_of(const std::string& peer);

}  // namespace genie
