// Subcommands whose implementation lands with later issues (#2 quantize, #3 tokenize/generate/
// perplexity). Each says so plainly instead of pretending to work.
#include "cli_common.h"
#include "commands.h"

namespace trine::cli {

int RunQuantize(int, char**) { return Fail("quantize is not implemented yet"); }
int RunTokenize(int, char**) { return Fail("tokenize is not implemented yet"); }
int RunGenerate(int, char**) { return Fail("generate is not implemented yet"); }
int RunPerplexity(int, char**) { return Fail("perplexity is not implemented yet"); }

}  // namespace trine::cli
