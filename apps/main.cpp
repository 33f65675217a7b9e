// fabricsim: one binary, one subcommand per task. Results go to stdout; progress and diagnostics to
// stderr. Bad input prints one line "fabricsim <cmd>: error: ..." and exits 2.
#include <cstring>
#include <exception>
#include <new>
#include <iostream>
#include <string>

#include "apps/cli.hpp"
#include "sim/base/allocator.hpp"
#include "sim/base/error.hpp"

namespace {

struct Sub {
  const char* name;
  int (*fn)(int, char**);
  const char* help;
};

const Sub kSubs[] = {
    {"topo", fabricsim::cli::cmd_topo, "describe a topology preset or file: summary, DOT and JSON export"},
    {"coll", fabricsim::cli::cmd_coll, "simulate NCCL collectives and print the nccl-tests table"},
    {"run", fabricsim::cli::cmd_run, "run a training scenario (topology + workload) and report the step time"},
    {"gen", fabricsim::cli::cmd_gen, "generate a workload trace (GPT, DLRM, data-parallel)"},
    {"calibrate", fabricsim::cli::cmd_calibrate, "fit the network model to nccl-tests measurements"},
    {"validate", fabricsim::cli::cmd_validate, "compare simulated collectives with measurements"},
    {"sweep", fabricsim::cli::cmd_sweep, "run a grid of scenarios in parallel and write one CSV row each"},
    {"plan", fabricsim::cli::cmd_plan, "search parallelism layouts and cluster sizes for a target"},
    {"import", fabricsim::cli::cmd_import, "write a scenario from another tool's configuration (a Megatron-LM launch script)"},
    {"compare", fabricsim::cli::cmd_compare, "put results (run --json, sweep CSV) side by side with the deltas"},
};

void usage(std::ostream& o) {
  o << "usage: fabricsim <command> [options]   (fabricsim <command> --help for details)\n\ncommands:\n";
  for (const auto& s : kSubs) {
    std::string n = s.name;
    o << "  " << n << std::string(12 - n.size(), ' ') << s.help << "\n";
  }
}

}  // namespace

int main(int argc, char** argv) {
  fabricsim::retain_freed_memory();
  if (argc < 2) {
    usage(std::cerr);
    return 2;
  }
  std::string cmd = argv[1];
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    usage(std::cout);
    return 0;
  }
  if (cmd == "--version") {
    std::cout << "fabricsim 0.1.0\n";
    return 0;
  }
  for (const auto& s : kSubs) {
    if (cmd == s.name) {
      try {
        return s.fn(argc - 2, argv + 2);
      } catch (const fabricsim::InputError& e) {
        // An error raised about the command line as a whole names the command as its place ("fabricsim run:
        // ..."); the prefix already says it, so it is not said twice.
        std::string what = e.what();
        const std::string self = "fabricsim " + cmd + ": ";
        if (what.rfind(self, 0) == 0) what.erase(0, self.size());
        std::cerr << self << "error: " << what << "\n";
        return 2;
      } catch (const std::bad_alloc&) {
        // Last resort: generators and importers check their sizes before allocating (docs/reliability.md);
        // reaching here means one did not. One line, a distinct status, no abort().
        std::cerr << "fabricsim " << cmd
                  << ": error: out of memory (the input asks for more than this machine has; "
                     "reduce the model, world size or trace size)\n";
        return 4;
      } catch (const std::exception& e) {
        std::cerr << "fabricsim " << cmd << ": internal error: " << e.what() << "\n";
        return 3;
      }
    }
  }
  std::cerr << "fabricsim: unknown command '" << cmd << "'\n";
  usage(std::cerr);
  return 2;
}
