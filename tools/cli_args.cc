// The subcommands' command-line parser: see cli_args.h.
#include "cli_args.h"

#include <cstdio>
#include <set>
#include <vector>

#include "cli_common.h"

namespace trine::cli {

namespace {

// llama.cpp's multi-letter single-dash spellings and their long forms.
const std::vector<std::pair<std::string, std::string>>& LongForms() {
  static const std::vector<std::pair<std::string, std::string>> forms = {
      {"-ctk", "--cache-type-k"}, {"-ctv", "--cache-type-v"}, {"-np", "--parallel"},
      {"-sys", "--system-prompt"}, {"-cnv", "--conversation"}, {"-no-cnv", "--no-conversation"},
      {"-ub", "--ubatch-size"},   {"-tb", "--threads-batch"},  {"-mli", "--multiline-input"},
      {"-co", "--color"},         {"-ngl", "--n-gpu-layers"},  {"-ngld", "--n-gpu-layers-draft"},
      {"-fa", "--flash-attn"},    {"-hf", "--hf-repo"},        {"-hfr", "--hf-repo"},
      {"-hff", "--hf-file"},      {"-mu", "--model-url"},      {"-if", "--interactive-first"},
      {"-npp", "--npp"},          {"-ntg", "--ntg"},           {"-npl", "--npl"},
      {"-pps", "--pps"},          {"-dr", "--docker-repo"},    {"-nocb", "--no-cont-batching"},
      {"-cb", "--cont-batching"}};
  return forms;
}

// A llama.cpp flag trine handles itself (when the command does not define it).
struct Foreign {
  std::set<std::string> names;  // long forms (and single-letter ones as cxxopts would see them)
  enum class Value { kNone, kRequired, kOptionalWord } value;
  std::set<std::string> native_in;  // commands that define this flag themselves
};

const std::vector<Foreign>& ForeignFlags() {
  static const std::vector<Foreign> flags = {
      {{"--n-gpu-layers", "--gpu-layers", "--n-gpu-layers-draft"}, Foreign::Value::kRequired, {}},
      {{"--flash-attn"}, Foreign::Value::kOptionalWord, {}},
      {{"--hf-repo", "--hf-file", "--model-url", "--docker-repo"}, Foreign::Value::kRequired, {}},
      {{"--conversation", "--interactive", "--interactive-first", "-i"}, Foreign::Value::kNone, {}},
      {{"--no-conversation"}, Foreign::Value::kNone, {}},
      {{"--ubatch-size", "--threads-batch"}, Foreign::Value::kRequired, {}},
      {{"--multiline-input", "--color", "--cont-batching", "--no-cont-batching"}, Foreign::Value::kNone, {}},
      {{"--parallel"}, Foreign::Value::kRequired, {"serve"}},
      {{"--escape", "-e", "--no-escape"}, Foreign::Value::kNone, {"generate", "tokenize"}},
      {{"--jinja", "--no-jinja"}, Foreign::Value::kNone, {}},
  };
  return flags;
}

// "--name=value" -> ("--name", "value", true).
void SplitInline(const std::string& a, std::string* name, std::string* value, bool* has_value) {
  const size_t eq = a.find('=');
  *has_value = a.rfind("--", 0) == 0 && eq != std::string::npos;
  *name = *has_value ? a.substr(0, eq) : a;
  *value = *has_value ? a.substr(eq + 1) : "";
}

struct Outcome {
  int exit_code = -1;  // -1: go on
};

// Handles one foreign flag with its value; prints a note or an error.
Outcome Handle(const std::string& command, const std::string& flag, const std::string& value) {
  Outcome o;
  const auto note = [&](const std::string& what) { std::fprintf(stderr, "note: %s\n", what.c_str()); };
  const auto fail = [&](int code, const std::string& what) {
    std::fprintf(stderr, "error: %s\n", what.c_str());
    if (code == kExitUsage) std::fprintf(stderr, "usage: see 'trine %s --help'\n", command.c_str());
    o.exit_code = code;
  };
  if (flag == "--n-gpu-layers" || flag == "--gpu-layers" || flag == "--n-gpu-layers-draft") {
    if (value == "0") {
      note("-ngl 0: trine runs on the CPU");
    } else {
      fail(kExitError, "-ngl " + value + ": trine runs on the CPU; GPU offload is not available");
    }
  } else if (flag == "--flash-attn") {
    note("-fa" + (value.empty() ? std::string() : " " + value) + ": trine's CPU attention is always fused; nothing to switch");
  } else if (flag == "--hf-repo" || flag == "--hf-file" || flag == "--model-url" || flag == "--docker-repo") {
    fail(kExitError, "trine does not download models; pass a local GGUF with -m");
  } else if (flag == "--conversation" || flag == "--interactive" || flag == "--interactive-first" || flag == "-i") {
    if (command != "chat") fail(kExitUsage, flag + ": 'trine " + command + "' is not interactive; use 'trine chat'");
  } else if (flag == "--no-conversation") {
    if (command == "chat") fail(kExitUsage, "-no-cnv: 'trine chat' is a conversation; use 'trine generate -p TEXT'");
  } else if (flag == "--ubatch-size") {
    note("-ub " + value + ": trine splits prompts by -b only; ignored");
  } else if (flag == "--threads-batch") {
    note("-tb " + value + ": prompts run on the -t threads too; ignored");
  } else if (flag == "--multiline-input") {
    if (command != "chat") note("-mli: only 'trine chat' reads input lines; ignored");
  } else if (flag == "--color") {
    note("--color: trine prints plain text; ignored");
  } else if (flag == "--cont-batching" || flag == "--no-cont-batching") {
    if (command != "serve") note(flag + ": only 'trine serve' batches requests; ignored");
  } else if (flag == "--parallel") {
    if (value != "1") {
      fail(kExitError, "-np " + value + ": 'trine " + command +
                           "' runs one sequence; 'trine serve -np N' and 'trine bench -npl N' run several");
    }
  } else if (flag == "--jinja") {
    note("--jinja: trine always renders the model's Jinja chat template; nothing to switch");
  } else if (flag == "--no-jinja") {
    note("--no-jinja: choose a built-in format with --chat-template chatml|llama3|llama2|bitnet; ignored");
  } else if (flag == "--escape" || flag == "-e" || flag == "--no-escape") {
    // Escapes matter only where there is a prompt on the command line.
  }
  return o;
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string ProcessEscapes(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 >= s.size()) {
      out.push_back(s[i]);
      continue;
    }
    const char c = s[++i];
    switch (c) {
      case 'n': out.push_back('\n'); break;
      case 'r': out.push_back('\r'); break;
      case 't': out.push_back('\t'); break;
      case '\'': case '"': case '\\': out.push_back(c); break;
      case 'x':
        if (i + 2 < s.size() && HexDigit(s[i + 1]) >= 0 && HexDigit(s[i + 2]) >= 0) {
          out.push_back(static_cast<char>(HexDigit(s[i + 1]) * 16 + HexDigit(s[i + 2])));
          i += 2;
          break;
        }
        [[fallthrough]];
      default:
        out.push_back('\\');
        out.push_back(c);
    }
  }
  return out;
}

int ParseCommand(const std::string& command, cxxopts::Options& opts, int argc, char** argv, cxxopts::ParseResult* out,
                 const std::string& positional, const std::function<void()>& print_help) {
  std::vector<std::string> args;
  args.reserve(static_cast<size_t>(argc));
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    for (const auto& [from, to] : LongForms()) {
      if (a == from) {
        a = to;
        break;
      }
      if (a.rfind(from + "=", 0) == 0) {
        a = to + a.substr(from.size());
        break;
      }
    }
    args.push_back(a);
  }
  // Foreign flags: handled here and dropped, unless the command defines them.
  std::vector<std::string> kept;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string name, value;
    bool inline_value = false;
    SplitInline(args[i], &name, &value, &inline_value);
    const Foreign* f = nullptr;
    for (const Foreign& g : ForeignFlags()) {
      if (g.names.count(name) != 0 && g.native_in.count(command) == 0) f = &g;
    }
    if (f == nullptr || i == 0) {
      kept.push_back(args[i]);
      continue;
    }
    if (f->value == Foreign::Value::kRequired && !inline_value) {
      if (i + 1 >= args.size()) {
        std::fprintf(stderr, "error: %s needs a value\nusage: see 'trine %s --help'\n", name.c_str(), command.c_str());
        return kExitUsage;
      }
      value = args[++i];
    } else if (f->value == Foreign::Value::kOptionalWord && !inline_value && i + 1 < args.size()) {
      static const std::set<std::string> words = {"on", "off", "auto", "1", "0", "true", "false"};
      if (words.count(args[i + 1]) != 0) value = args[++i];
    }
    const Outcome o = Handle(command, name, value);
    if (o.exit_code >= 0) return o.exit_code;
  }
  std::vector<char*> av;
  for (auto& s : kept) av.push_back(s.data());
  if (!positional.empty()) opts.parse_positional({positional});
  try {
    *out = opts.parse(static_cast<int>(av.size()), av.data());
  } catch (const cxxopts::exceptions::incorrect_argument_type& e) {
    return Fail(e.what());  // a bad value (-n abc, --temp nan): bad input, not bad usage
  } catch (const cxxopts::exceptions::exception& e) {
    return UsageError(command, e.what());
  }
  if (out->count("help")) {
    if (print_help) {
      print_help();
    } else {
      std::printf("%s\n", opts.help().c_str());
    }
    return kExitOk;
  }
  if (!out->unmatched().empty()) return UsageError(command, "unexpected argument '" + out->unmatched()[0] + "'");
  return -1;
}

}  // namespace trine::cli
