// Subcommands whose implementation lands with later issues (#2 quantize, #3 tokenize/generate/
// perplexity). Each says so plainly instead of pretending to work.
#include "cli_common.h"
#include "commands.h"

namespace trine::cli {


}  // namespace trine::cli
