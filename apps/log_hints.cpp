#include "apps/log_hints.hpp"

#include "sim/base/units.hpp"

namespace fabricsim::cli {

void log_hint_flags(Args& args) {
  args.flag({"--op", "", "OP", "collective of raw logs that do not name it (all_reduce, sendrecv, ...)", ""});
  args.flag({"--nranks", "", "N", "rank count of raw logs without rank lines", ""});
  args.flag({"--nodes", "", "N", "host count of raw logs without rank lines", ""});
}

validate::ParseHints log_hints(const Args& args) {
  validate::ParseHints hints;
  hints.op = args.get("--op");
  if (args.has("--nranks")) hints.nranks = static_cast<int>(parse_int(args.get("--nranks"), "--nranks"));
  if (args.has("--nodes")) hints.nodes = static_cast<int>(parse_int(args.get("--nodes"), "--nodes"));
  return hints;
}

}  // namespace fabricsim::cli
