// Shared test helpers.
#include "common/test_util.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>

namespace trine::testing {

std::string ModelPath(const std::string& name) { return std::string(TRINE_MODELS_DIR) + "/" + name; }

static std::string TempDir() {
  static std::string dir = [] {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/trine-test-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    char* d = mkdtemp(buf.data());
    std::string out = d ? d : "/tmp";
    if (d) {
      static std::string cleanup = out;
      std::atexit([] { std::system(("rm -rf '" + cleanup + "'").c_str()); });
    }
    return out;
  }();
  return dir;
}

std::string TempPath(const std::string& name) { return TempDir() + "/" + name; }

std::vector<uint8_t> ReadFileBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

void WriteFileBytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

static std::string Slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

int RunTrine(const std::string& args, std::string* out, std::string* err) {
  return RunTrineWithInput(args, "", out, err);
}

int RunTrineWithInput(const std::string& args, const std::string& input, std::string* out, std::string* err) {
  static int counter = 0;
  const int id = counter++;
  const std::string i = TempPath("run" + std::to_string(id) + ".in");
  const std::string o = TempPath("run" + std::to_string(id) + ".out");
  const std::string e = TempPath("run" + std::to_string(id) + ".err");
  WriteFileBytes(i, std::vector<uint8_t>(input.begin(), input.end()));
  const std::string cmd = std::string(TRINE_BINARY) + " " + args + " >'" + o + "' 2>'" + e + "' <'" + i + "'";
  const int rc = std::system(cmd.c_str());
  if (out) *out = Slurp(o);
  if (err) *err = Slurp(e);
  if (rc == -1) return -1;
  if (WIFSIGNALED(rc)) return 128 + WTERMSIG(rc);
  return WEXITSTATUS(rc);
}

std::vector<int32_t> RandomTokenIds(int n_vocab, int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> d(3, n_vocab - 1);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = d(rng);
  return t;
}

}  // namespace trine::testing
