#include "apps/cli.hpp"
#include "sim/base/error.hpp"

namespace fabricsim::cli {
int cmd_coll(int argc, char** argv) {
  Args args("coll", "[options]", "Not built yet.");
  if (!args.parse(argc, argv)) return 0;
  throw InputError("fabricsim coll", "this subcommand is not implemented yet");
}
}  // namespace fabricsim::cli
