// `trine serve` under load and behind nginx: a soak of 500 requests from 8 concurrent clients
// (all succeed, memory stays flat), and the shipped deploy/nginx/trine.conf in front of two
// replicas (both serve, and requests still succeed after one is killed).
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <chrono>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "server_process.h"

namespace trine::testing {
namespace {

using json = nlohmann::json;

long RssKb(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

std::string Request(int i) {
  return json{{"messages", {{{"role", "user"}, {"content", "Request " + std::to_string(i % 37) + ": tell me a story"}}}},
              {"max_tokens", 8 + i % 9},
              {"temperature", 0.7},
              {"seed", i},
              {"stream", i % 3 == 0}}
      .dump();
}

// 500 requests from 8 clients (a third of them streamed): every one answers 200, and the server's
// RSS after all of them is within 10 % of its RSS after the first 50 (no growth per request).
TEST(ServeSoak, FiveHundredRequestsFromEightClients) {
  ServerProcess s({"-np", "4", "-c", "256"});
  ASSERT_TRUE(s.ok()) << s.error();
  const int total = 500, clients = 8;
  std::atomic<int> next{0}, ok{0}, failed{0};
  std::atomic<long> rss_after_50{-1};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < clients; ++t) {
    threads.emplace_back([&] {
      httplib::Client c("127.0.0.1", s.port());
      c.set_read_timeout(60, 0);
      for (int i = next++; i < total && std::chrono::steady_clock::now() < deadline; i = next++) {
        auto r = c.Post("/v1/chat/completions", Request(i), "application/json");
        (r && r->status == 200 && r->body.find("\"finish_reason\":\"") != std::string::npos ? ok : failed)++;
        if (ok.load() == 50) {
          long expected = -1;
          rss_after_50.compare_exchange_strong(expected, RssKb(s.pid()));
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), total);
  EXPECT_EQ(failed.load(), 0);
  const long rss_end = RssKb(s.pid());
  ASSERT_GT(rss_after_50.load(), 0);
  RecordProperty("rss_after_50_kb", static_cast<int>(rss_after_50.load()));
  RecordProperty("rss_after_500_kb", static_cast<int>(rss_end));
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
  // ASan's quarantine holds freed memory (up to 256 MB) in the RSS: flatness means nothing there.
  return;
#endif
#endif
  EXPECT_LE(rss_end, rss_after_50.load() * 11 / 10) << "RSS after 50: " << rss_after_50.load() << " kB, after "
                                                    << total << ": " << rss_end << " kB";
}

int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    close(fd);
    return -1;
  }
  close(fd);
  return ntohs(a.sin_port);
}

double RequestsServed(int port) {
  httplib::Client c("127.0.0.1", port);
  auto r = c.Get("/metrics");
  if (!r) return -1;
  std::smatch m;
  const std::regex re("\ntrine_requests_total ([0-9.]+)");
  return std::regex_search(r->body, m, re) ? std::stod(m[1].str()) : -1;
}

// nginx (Debian's, from scripts/install-deps.sh) with the shipped upstream configuration, its
// replica and listen ports pointed at two test replicas on loopback.
TEST(ServeNginx, TwoReplicasShareTheLoadAndOneMayDie) {
  const char* nginx = "/usr/sbin/nginx";
  ASSERT_EQ(access(nginx, X_OK), 0) << "nginx is not installed (scripts/install-deps.sh installs it)";
  auto a = std::make_unique<ServerProcess>(std::vector<std::string>{"-np", "2"});
  ServerProcess b({"-np", "2"});
  ASSERT_TRUE(a->ok() && b.ok()) << a->error() << b.error();
  std::ifstream shipped(std::string(TRINE_SOURCE_DIR) + "/deploy/nginx/trine.conf");
  ASSERT_TRUE(shipped.good());
  std::stringstream conf;
  conf << shipped.rdbuf();
  std::string site = conf.str();
  const int port = FreePort();
  ASSERT_GT(port, 0);
  site = std::regex_replace(site, std::regex("127\\.0\\.0\\.1:8081"), "127.0.0.1:" + std::to_string(a->port()));
  site = std::regex_replace(site, std::regex("127\\.0\\.0\\.1:8082"), "127.0.0.1:" + std::to_string(b.port()));
  site = std::regex_replace(site, std::regex("listen 127\\.0\\.0\\.1:8080"), "listen 127.0.0.1:" + std::to_string(port));
  char dir_template[] = "/tmp/trine-nginx.XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  chmod(dir.c_str(), 0755);  // nginx's workers (nobody, when the test runs as root) read it
  std::ofstream(dir + "/trine.conf") << site;
  std::ofstream(dir + "/nginx.conf") << "daemon off;\nworker_processes 1;\npid " << dir << "/nginx.pid;\nerror_log " << dir
                                     << "/error.log;\nevents { worker_connections 256; }\nhttp {\n  access_log off;\n"
                                     << "  client_body_temp_path " << dir << "/body;\n  proxy_temp_path " << dir
                                     << "/proxy;\n  fastcgi_temp_path " << dir << "/fcgi;\n  uwsgi_temp_path " << dir
                                     << "/uwsgi;\n  scgi_temp_path " << dir << "/scgi;\n  include " << dir
                                     << "/trine.conf;\n}\n";
  const pid_t pid = fork();
  if (pid == 0) {
    execl(nginx, nginx, "-p", dir.c_str(), "-c", (dir + "/nginx.conf").c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(60, 0);
  bool up = false;
  for (int i = 0; i < 500 && !up; ++i) {
    auto r = c.Get("/health");
    up = r && r->status == 200;
    if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(up) << "nginx did not answer on port " << port;
  const std::string body = json{{"prompt", "Once upon a time"}, {"max_tokens", 4}, {"temperature", 0}}.dump();
  // Concurrent requests, so that least_conn has open connections to compare.
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      httplib::Client ct("127.0.0.1", port);
      ct.set_read_timeout(60, 0);
      for (int i = 0; i < 10; ++i) {
        auto r = ct.Post("/v1/completions", body, "application/json");
        if (r && r->status == 200) ++ok;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 40);
  EXPECT_GT(RequestsServed(a->port()), 0) << "replica A served nothing";
  EXPECT_GT(RequestsServed(b.port()), 0) << "replica B served nothing";
  // Replica A dies without a word: nginx moves on to B.
  a->Kill();
  int after = 0;
  for (int i = 0; i < 20; ++i) {
    auto r = c.Post("/v1/completions", body, "application/json");
    if (r && r->status == 200) ++after;
  }
  EXPECT_EQ(after, 20);
  kill(pid, SIGTERM);
  waitpid(pid, nullptr, 0);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

}  // namespace
}  // namespace trine::testing
