#include "apps/cli.hpp"
#include "sim/base/error.hpp"

namespace fabricsim::cli {
int cmd_validate(int argc, char** argv) {
  Args args("validate", "[options]", "Not built yet.");
  if (!args.parse(argc, argv)) return 0;
  throw InputError("fabricsim validate", "this subcommand is not implemented yet");
}
}  // namespace fabricsim::cli
