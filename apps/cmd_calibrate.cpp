#include "apps/cli.hpp"
#include "sim/base/error.hpp"

namespace fabricsim::cli {
int cmd_calibrate(int argc, char** argv) {
  Args args("calibrate", "[options]", "Not built yet.");
  if (!args.parse(argc, argv)) return 0;
  throw InputError("fabricsim calibrate", "this subcommand is not implemented yet");
}
}  // namespace fabricsim::cli
