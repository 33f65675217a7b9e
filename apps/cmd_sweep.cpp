#include "apps/cli.hpp"
#include "sim/base/error.hpp"

namespace fabricsim::cli {
int cmd_sweep(int argc, char** argv) {
  Args args("sweep", "[options]", "Not built yet.");
  if (!args.parse(argc, argv)) return 0;
  throw InputError("fabricsim sweep", "this subcommand is not implemented yet");
}
}  // namespace fabricsim::cli
