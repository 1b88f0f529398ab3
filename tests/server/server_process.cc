#include "server_process.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <regex>
#include <thread>

#include <httplib.h>

namespace trine::testing {

namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

ServerProcess::ServerProcess(const std::vector<std::string>& args) {
  int fds[2];
  if (pipe(fds) != 0) {
    error_ = "pipe failed";
    return;
  }
  std::vector<std::string> argv_s = {TRINE_BINARY, "serve", "--port", "0", "-t", "2"};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  pid_ = fork();
  if (pid_ == 0) {
    dup2(fds[1], STDERR_FILENO);
    close(fds[0]);
    close(fds[1]);
    std::vector<char*> argv;
    for (auto& s : argv_s) argv.push_back(s.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(fds[1]);
  stderr_fd_ = fds[0];
  fcntl(stderr_fd_, F_SETFL, O_NONBLOCK);
  const std::regex listening("listening on http://127\\.0\\.0\\.1:([0-9]+)");
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (Clock::now() < deadline) {
    std::smatch m;
    const std::string err = Stderr();
    if (std::regex_search(err, m, listening)) {
      port_ = std::stoi(m[1].str());
      break;
    }
    if (waitpid(pid_, &exit_status_, WNOHANG) == pid_) {
      error_ = "trine serve exited: " + err;
      pid_ = -1;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (port_ < 0) {
    error_ = "no 'listening on' line within 60 s: " + Stderr();
    return;
  }
  httplib::Client c("127.0.0.1", port_);
  while (Clock::now() < deadline) {
    auto r = c.Get("/health");
    if (r && r->status == 200) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  error_ = "/health did not say ok within 60 s: " + Stderr();
  port_ = -1;
}

std::string ServerProcess::Stderr() {
  char buf[4096];
  for (;;) {
    const ssize_t n = read(stderr_fd_, buf, sizeof(buf));
    if (n <= 0) break;
    stderr_.append(buf, static_cast<size_t>(n));
  }
  return stderr_;
}

int ServerProcess::Terminate(int timeout_s) {
  if (pid_ <= 0) return exit_status_;
  kill(pid_, SIGTERM);
  const auto deadline = Clock::now() + std::chrono::seconds(timeout_s);
  while (Clock::now() < deadline) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      return exit_status_;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
  return -1;
}

void ServerProcess::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

ServerProcess::~ServerProcess() {
  Terminate();
  if (stderr_fd_ >= 0) close(stderr_fd_);
}

}  // namespace trine::testing
