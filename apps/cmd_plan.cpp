#include "apps/cli.hpp"
#include "sim/base/error.hpp"

namespace fabricsim::cli {
int cmd_plan(int argc, char** argv) {
  Args args("plan", "[options]", "Not built yet.");
  if (!args.parse(argc, argv)) return 0;
  throw InputError("fabricsim plan", "this subcommand is not implemented yet");
}
}  // namespace fabricsim::cli
