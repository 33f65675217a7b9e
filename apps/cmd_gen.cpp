#include "apps/cli.hpp"
#include "sim/base/error.hpp"

namespace fabricsim::cli {
int cmd_gen(int argc, char** argv) {
  Args args("gen", "[options]", "Not built yet.");
  if (!args.parse(argc, argv)) return 0;
  throw InputError("fabricsim gen", "this subcommand is not implemented yet");
}
}  // namespace fabricsim::cli
