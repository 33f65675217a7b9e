#include "apps/cli.hpp"
#include "sim/base/error.hpp"

namespace fabricsim::cli {
int cmd_run(int argc, char** argv) {
  Args args("run", "[options]", "Not built yet.");
  if (!args.parse(argc, argv)) return 0;
  throw InputError("fabricsim run", "this subcommand is not implemented yet");
}
}  // namespace fabricsim::cli
