#include "dataplane/child_probe.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "core/log.hpp"

namespace genie {

ChildReport run_child_probe(int64_t timeout_ms, const std::function<void(int fd)>& child) {
  ChildReport r;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    r.error = cat("pipe: ", std::strerror(errno));
    return r;
  }
  const pid_t pid = fork();
  if (pid < 0) {
    r.error = cat("fork: ", std::strerror(errno));
    close(fds[0]);
    close(fds[1]);
    return r;
  }
  if (pid == 0) {
    close(fds[0]);
    child(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!r.finished) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now())
            .count();
    if (left <= 0) break;
    pollfd pf{fds[0], POLLIN, 0};
    if (poll(&pf, 1, static_cast<int>(left)) <= 0) continue;  // EINTR or the deadline: the loop decides
    char buf[4096];
    const ssize_t n = read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      r.finished = true;
    else
      r.bytes.append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  if (!r.finished) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return r;
}

}  // namespace genie
