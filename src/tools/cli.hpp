// Shared pieces of the `genie` command-line tool: its error type, exit
// codes, and owning wrappers for Genie handles. The tool uses only the
// public C API (genie.h), like any other program.
#pragma once

#include <genie.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

namespace genie_cli {

// Exit codes (documented in `genie help`).
constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;  // a Genie call, a file or the data failed
constexpr int kExitUsage = 2;    // the command line is wrong

// Anything that ends the command: caught in main, printed on stderr as
// "genie: <message>", and turned into the exit code.
class CliError : public std::runtime_error {
 public:
  CliError(int exit_code, const std::string& message) : std::runtime_error(message), exit_code_(exit_code) {}
  int exit_code() const { return exit_code_; }

 private:
  int exit_code_;
};

[[noreturn]] inline void usage_error(const std::string& message) { throw CliError(kExitUsage, message); }

[[noreturn]] inline void failure(const std::string& message) { throw CliError(kExitFailure, message); }

// Throws a failure naming `what`, the status and Genie's detail message.
inline void check(genie_status_t st, std::string_view what) {
  if (st == GENIE_OK) return;
  const std::string detail = genie_last_error();
  std::string msg(what);
  msg += ": ";
  msg += genie_status_str(st);
  if (!detail.empty()) msg += ": " + detail;
  failure(msg);
}

// Parses a whole-string integer option value in [min, max]; a usage error
// naming the flag otherwise.
inline long parse_long(const std::string& flag, const char* text, long min, long max) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(text, &end, 10);
  if (errno || end == text || *end || v < min || v > max)
    usage_error(flag + " needs an integer in " + std::to_string(min) + ".." + std::to_string(max) +
                ", got '" + text + "'");
  return v;
}

struct ContextDeleter {
  void operator()(genie_context_t* c) const { genie_shutdown(c); }
};
struct GraphDeleter {
  void operator()(genie_graph_t* g) const { genie_graph_destroy(g); }
};
struct TensorDeleter {
  void operator()(genie_tensor_t* t) const { genie_tensor_destroy(t); }
};
struct FutureDeleter {
  void operator()(genie_future_t* f) const { genie_future_destroy(f); }
};
struct ConfigDeleter {
  void operator()(genie_config_t* c) const { genie_config_destroy(c); }
};

using ContextPtr = std::unique_ptr<genie_context_t, ContextDeleter>;
using GraphPtr = std::unique_ptr<genie_graph_t, GraphDeleter>;
using TensorPtr = std::unique_ptr<genie_tensor_t, TensorDeleter>;
using FuturePtr = std::unique_ptr<genie_future_t, FutureDeleter>;
using ConfigPtr = std::unique_ptr<genie_config_t, ConfigDeleter>;

// Reads a whole file; a failure names the file and the system's reason.
std::string read_file(const std::string& path, std::string_view what);

// `genie run ...` (args after "run"). Returns the exit code.
int run_command(int argc, char** argv);
void print_run_usage(std::FILE* out);

}  // namespace genie_cli
