#include "apps/cli.hpp"
#include "sim/base/error.hpp"

namespace fabricsim::cli {
int cmd_topo(int argc, char** argv) {
  Args args("topo", "[options]", "Not built yet.");
  if (!args.parse(argc, argv)) return 0;
  throw InputError("fabricsim topo", "this subcommand is not implemented yet");
}
}  // namespace fabricsim::cli
