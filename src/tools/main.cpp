// genie — the command-line tool. Commands: version, run, serve, discover,
// top, replay, help.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <string_view>

#include "cli.hpp"

namespace genie_cli {

std::string read_file(const std::string& path, std::string_view what) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) failure(std::string(what) + " " + path + ": " + std::strerror(errno));
  std::string data;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f.get())) > 0) data.append(buf, n);
  if (std::ferror(f.get())) failure(std::string(what) + " " + path + ": " + std::strerror(errno));
  return data;
}

// `genie serve ...` (src/tools/serve.cpp).
int serve_command(int argc, char** argv);
void print_serve_usage(std::FILE* out);
// `genie replay ...` (src/tools/replay.cpp).
int replay_command(int argc, char** argv);
// `genie discover ...` and `genie top ...` (src/tools/cluster.cpp).
int discover_command(int argc, char** argv);
void print_discover_usage(std::FILE* out);
int top_command(int argc, char** argv);
void print_top_usage(std::FILE* out);

namespace {

void print_usage(std::FILE* out) {
  std::fprintf(out,
               "usage: genie <command> [arguments]\n"
               "\n"
               "commands:\n"
               "  version              print the library and ABI versions\n"
               "  run GRAPH.json ...   run a graph (or MODEL.onnx) and print its outputs'\n"
               "                       checksums\n"
               "                       ('genie help run' for its options)\n"
               "  serve [options]      serve remote clients until SIGINT/SIGTERM\n"
               "                       ('genie help serve' for its options)\n"
               "  discover [HOST:PORT] which network backends work here (and to a server)\n"
               "  top [HOST:PORT]      terminal dashboard of the cluster (--once: one frame)\n"
               "  replay --workload P  replay a Chakra execution trace over the data plane\n"
               "                       ('genie help replay' for its options)\n"
               "  help [COMMAND]       this text, or the help of a command\n"
               "\n"
               "exit status: 0 success, 1 a failure (Genie, a file, the data), 2 a bad\n"
               "command line. Errors are explained on stderr.\n");
}

void print_version() {
  std::printf("genie %s (ABI %u)\n", genie_version_string(), genie_abi_version());
  std::printf("built against genie.h %d.%d.%d (ABI %d)\n", GENIE_VERSION_MAJOR, GENIE_VERSION_MINOR,
              GENIE_VERSION_PATCH, GENIE_ABI_VERSION);
}

int dispatch(int argc, char** argv) {
  if (argc < 2) {
    print_usage(stderr);
    return kExitUsage;
  }
  const std::string_view cmd = argv[1];
  if (cmd == "help" || cmd == "--help" || cmd == "-h") {
    if (argc > 2 && std::string_view(argv[2]) == "run")
      print_run_usage(stdout);
    else if (argc > 2 && std::string_view(argv[2]) == "serve")
      print_serve_usage(stdout);
    else if (argc > 2 && std::string_view(argv[2]) == "discover")
      print_discover_usage(stdout);
    else if (argc > 2 && std::string_view(argv[2]) == "top")
      print_top_usage(stdout);
    else if (argc > 2 && std::string_view(argv[2]) == "replay") {
      char help[] = "--help";
      char* args[] = {help};
      return replay_command(1, args);
    }
    else if (argc > 2)
      usage_error("no help for '" + std::string(argv[2]) +
                  "': commands are version, run, serve, discover, top, replay, help");
    else
      print_usage(stdout);
    return kExitOk;
  }
  if (cmd == "version" || cmd == "--version") {
    if (argc > 2) usage_error("'version' takes no arguments");
    print_version();
    return kExitOk;
  }
  if (cmd == "run") return run_command(argc - 2, argv + 2);
  if (cmd == "serve") return serve_command(argc - 2, argv + 2);
  if (cmd == "discover") return discover_command(argc - 2, argv + 2);
  if (cmd == "top") return top_command(argc - 2, argv + 2);
  if (cmd == "replay") return replay_command(argc - 2, argv + 2);
  usage_error("unknown command '" + std::string(cmd) + "' (try 'genie help')");
}

}  // namespace
}  // namespace genie_cli

int main(int argc, char** argv) {
  using namespace genie_cli;
  try {
    return dispatch(argc, argv);
  } catch (const CliError& e) {
    std::fprintf(stderr, "genie: %s\n", e.what());
    return e.exit_code();
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "genie: GENIE_ERR_OUT_OF_MEMORY: out of memory\n");
    return kExitFailure;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "genie: %s\n", e.what());
    return kExitFailure;
  }
}
