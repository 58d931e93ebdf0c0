// Resolving "host:port" for a stream socket, shared by the transports that
// open sockets themselves (tcp, ucx). Defined in transport.cpp, which
// plugins compile into themselves.
#pragma once

#include <netdb.h>

#include <memory>
#include <string>

namespace genie::dataplane {

using AddrInfo = std::unique_ptr<addrinfo, void (*)(addrinfo*)>;

// getaddrinfo of `address` ("host:port", "[v6]:port") for a TCP socket,
// `passive` for listening; an empty host is the wildcard address when
// passive, loopback else. Returns null with *error set (getaddrinfo's
// reason) when it does not resolve; throws Error(INVALID_ARGUMENT) as
// split_address() does for a malformed address.
AddrInfo resolve_address(const std::string& address, bool passive, std::string* error);

}  // namespace genie::dataplane
