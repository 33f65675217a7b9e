#pragma once
// Flags shared by the subcommands that read measurement logs (calibrate, validate): what to assume for raw
// nccl-tests outputs that do not say it themselves.
#include "apps/cli.hpp"
#include "validate/inputs.hpp"

namespace fabricsim::cli {

// Declares --op, --nranks and --nodes.
void log_hint_flags(Args& args);
// Reads them back (integers checked).
validate::ParseHints log_hints(const Args& args);

}  // namespace fabricsim::cli
