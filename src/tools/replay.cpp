// `genie replay ...`: runs genie-replay (tools/replay), which drives the
// data plane directly and so is a program of its own; it is looked for
// beside this binary first, then on PATH.
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <string>
#include <vector>

#include "cli.hpp"

namespace genie_cli {

int replay_command(int argc, char** argv) {
  std::vector<char*> args;
  std::string self = "genie-replay";
  args.push_back(self.data());
  for (int i = 0; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  char exe[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    std::string path(exe, static_cast<size_t>(n));
    path = path.substr(0, path.rfind('/') + 1) + "genie-replay";
    ::execv(path.c_str(), args.data());
  }
  ::execvp("genie-replay", args.data());
  failure(std::string("replay: cannot run genie-replay (installed beside genie?): ") + std::strerror(errno));
}

}  // namespace genie_cli
