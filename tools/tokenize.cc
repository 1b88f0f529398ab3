// `trine tokenize -m FILE (-p TEXT | -f FILE) [--no-bos] [--parse-special] [--ids | --json]`:
// the token ids of a text, like llama.cpp's llama-tokenize. Works on full models and on
// vocabulary-only GGUF files (only the tokenizer.ggml.* metadata is read).
//
// Output, one of:
//   default      one line per token: "%6d -> '<piece>'" (pieces with special tokens rendered)
//   --ids        "[1, 2, 3]"
//   --json       {"ids": [...], "pieces": [...]} (bytes that are not UTF-8 become U+FFFD)
#include <cxxopts.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli_args.h"
#include "cli_common.h"
#include "commands.h"
#include "model_options.h"
#include "gguf/gguf_reader.h"
#include "tokenizer/tokenizer.h"

namespace trine::cli {
namespace {


}  // namespace

int RunTokenize(int argc, char** argv) {
  cxxopts::Options opts("trine tokenize", "Print the token ids of a text (like llama.cpp's llama-tokenize).");
  opts.add_options()("m,model", "GGUF model or vocabulary-only file", cxxopts::value<std::string>())(
      "p,prompt", "text to tokenize", cxxopts::value<std::string>())(
      "f,file", "read the text from FILE (one trailing newline is dropped, as llama.cpp does)",
      cxxopts::value<std::string>())("no-bos", "do not add BOS (or EOS) even when the vocabulary asks for it")(
      "parse-special", "turn control-token texts such as <|eot_id|> into those tokens")(
      "e,escape", "process \\n \\r \\t \\' \\\" \\\\ \\xHH escapes in the text")(
      "ids", "print only the ids, as [1, 2, 3]")("json", "print {\"ids\": [...], \"pieces\": [...]}")(
      "show-count", "print the number of tokens at the end")("h,help", "show this help");
  cxxopts::ParseResult args;
  if (const int rc = ParseCommand("tokenize", opts, argc, argv, &args); rc >= 0) return rc;
  if (!args.count("model")) return UsageError("tokenize", "missing -m FILE");
  if (args.count("prompt") + args.count("file") != 1) {
    return UsageError("tokenize", "give the text with exactly one of -p TEXT and -f FILE");
  }
  if (args.count("ids") && args.count("json")) return UsageError("tokenize", "--ids and --json exclude each other");

  std::string text;
  if (args.count("prompt")) {
    text = args["prompt"].as<std::string>();
  } else {
    const std::string path = args["file"].as<std::string>();
    const Status read = ReadTextFile(path, &text);
    if (!read.ok()) return Fail(read);
    if (!text.empty() && text.back() == '\n') text.pop_back();
  }
  if (args.count("escape")) text = ProcessEscapes(text);

  std::unique_ptr<GgufFile> file;
  Status st = GgufFile::Open(args["model"].as<std::string>(), &file);
  if (!st.ok()) return Fail(st);
  std::unique_ptr<Tokenizer> tok;
  st = Tokenizer::FromGguf(*file, &tok);
  if (!st.ok()) return Fail(st);

  // As llama-tokenize: the special tokens are added when the vocabulary adds BOS.
  const bool add_special = tok->vocab().add_bos() && !args.count("no-bos");
  std::vector<TokenId> ids;
  st = tok->Tokenize(text, add_special, args.count("parse-special") > 0, &ids);
  if (!st.ok()) return Fail(st);

  if (args.count("json")) {
    nlohmann::json j;
    j["ids"] = ids;
    nlohmann::json pieces = nlohmann::json::array();
    for (TokenId id : ids) pieces.push_back(tok->TokenToPiece(id, true));
    j["pieces"] = pieces;
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else if (args.count("ids")) {
    std::string line = "[";
    for (size_t i = 0; i < ids.size(); ++i) line += (i ? ", " : "") + std::to_string(ids[i]);
    std::printf("%s]\n", line.c_str());
  } else {
    for (TokenId id : ids) {
      const std::string piece = tok->TokenToPiece(id, true);
      std::printf("%6d -> '", id);
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::printf("'\n");
    }
  }
  if (args.count("show-count")) std::printf("Total number of tokens: %zu\n", ids.size());
  return kExitOk;
}

}  // namespace trine::cli
