// A `trine serve` process for tests: started on a free loopback port (--port 0, the port read
// from its stderr), stopped with SIGTERM; every wait is bounded.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <string>
#include <vector>

namespace trine::testing {

class ServerProcess {
 public:
  // Starts `trine serve --port 0 -t 2 <args>` and waits (<= 60 s) until /health says ok.
  explicit ServerProcess(const std::vector<std::string>& args);
  // SIGTERM, then SIGKILL past 30 s.
  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  bool ok() const { return port_ > 0; }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  const std::string& error() const { return error_; }
  // Sends SIGTERM and waits (<= timeout_s) for the exit; returns the exit status (-1: none).
  int Terminate(int timeout_s = 30);
  // SIGKILL and reap (a replica that dies without a word).
  void Kill();
  // Everything the server wrote to stderr so far.
  std::string Stderr();

 private:
  pid_t pid_ = -1;
  int port_ = -1;
  int stderr_fd_ = -1;
  std::string stderr_;
  std::string error_;
  int exit_status_ = -1;
};

}  // namespace trine::testing
