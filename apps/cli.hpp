#pragma once
// Small shared command-line helper for the fabricsim subcommands. Each subcommand declares its flags
// once (name, value name, help, default); --help text comes from those declarations; unknown flags and
// missing values are errors naming the flag.
#include <functional>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sim/base/error.hpp"
#include "sim/base/json_reader.hpp"
#include "workloads/param_origin.hpp"

namespace fabricsim::cli {

struct Flag {
  std::string name;        // "--topology"; short alias in `alias` ("-b")
  std::string alias;
  std::string value_name;  // empty for boolean switches
  std::string help;
  std::string dflt;        // shown in help
  bool repeated = false;   // --param k=v may repeat
};

class Args {
 public:
  Args(std::string command, std::string synopsis, std::string description);
  Args& flag(Flag f);
  // Common flags: --topology/--param, --json, --calibration, --quiet.
  Args& topology_flags();
  // Catalogues `--list` prints (a bit set): topology presets, network calibrations, compute presets and
  // compute calibrations, models of the gpt generator. Declares the --list switch.
  enum Catalogue : unsigned { kTopologies = 1, kCalibrations = 2, kCompute = 4, kModels = 8 };
  Args& list_flag(unsigned catalogues);
  // Parses argv (after the subcommand name). Returns false if --help or --list was printed (exit 0).
  bool parse(int argc, char** argv);

  bool has(const std::string& name) const;
  std::string get(const std::string& name, const std::string& dflt = "") const;
  const std::vector<std::string>& all(const std::string& name) const;
  const std::vector<std::string>& positional() const { return positional_; }
  // --param key=value pairs as a map (later ones override earlier).
  std::map<std::string, std::string> params() const;
  // check_output_path (sim/base/json_reader.hpp) for each of these flags that was given, named by the flag:
  // commands call it before any work, so a bad output path fails at once and nothing is written.
  void check_output_flags(std::initializer_list<const char*> flags) const;
  // --comm-model's value, "" when not given; InputError naming the flag unless it is a comm model
  // (workloads::is_comm_model).
  std::string comm_model() const;
  std::string help() const;
  const std::string& command() const { return command_; }

 private:
  const Flag* find(const std::string& name) const;
  std::string command_, synopsis_, description_;
  std::vector<Flag> flags_;
  std::map<std::string, std::vector<std::string>> values_;
  std::vector<std::string> positional_;
  unsigned catalogues_ = 0;
};

// The catalogues named by `which` (Args::Catalogue bits) as text: names with a one-line description each.
std::string catalogue_text(unsigned which);

// Subcommand entry points (apps/cmd_*.cpp). Return the process exit code.
int cmd_topo(int argc, char** argv);
int cmd_coll(int argc, char** argv);
int cmd_run(int argc, char** argv);
int cmd_gen(int argc, char** argv);
int cmd_calibrate(int argc, char** argv);
int cmd_validate(int argc, char** argv);
int cmd_sweep(int argc, char** argv);
int cmd_plan(int argc, char** argv);
int cmd_compare(int argc, char** argv);
int cmd_import(int argc, char** argv);

// Megatron-LM launch scripts (apps/cmd_import.cpp), shared by `import megatron` and `run --megatron`: declares
// --var; builds the scenario from SCRIPT (or - for stdin) with --topology, --param and --var, checks it
// against the topology and prints what was left out on stderr. An error the generator raises about a parameter
// names the script line and flag that set it (`origins`, optional, receives them for the run's own errors:
// rethrow_at_origin).
void megatron_flags(Args& args);
Json megatron_scenario(const Args& args, const std::string& script, workloads::ParamOrigins* origins = nullptr);
// NeMo training configs, shared by `import nemo` and `run --nemo`: CONFIG (or - for stdin) with --topology,
// --param and --ignore-unknown, checked and reported the same way (errors name the YAML key and line).
Json nemo_scenario(const Args& args, const std::string& config, workloads::ParamOrigins* origins = nullptr);
// torchtitan job configs, shared by `import torchtitan` and `run --torchtitan`: torchtitan_flags declares
// --gpus and --torchtitan-version; take_torchtitan_overrides removes torchtitan's `--section.option [value]`
// words from argv before Args::parse (a switch takes a following true / false only); torchtitan_scenario
// builds CONFIG (or - for stdin) with them, --topology, --param and --ignore-unknown, checked as above (errors
// name the TOML table.key and line, or the --section.option).
void torchtitan_flags(Args& args);
std::vector<std::pair<std::string, std::string>> take_torchtitan_overrides(int& argc, char** argv);
Json torchtitan_scenario(const Args& args, const std::string& config,
                         const std::vector<std::pair<std::string, std::string>>& overrides,
                         workloads::ParamOrigins* origins = nullptr);
// Rethrows `e`: an error about parameter KEY of the imported scenario's params (`params_where KEY: ...`, where the
// scenario names them) restated where KEY was set (`origins`: "train.sh:12: --recompute-modules: ..."), any
// other error (or a parameter with no origin: a default, the catalogue model's) as it is. Call it from the
// handler that caught `e`.
[[noreturn]] void rethrow_at_origin(const InputError& e, const std::string& params_where,
                                    const workloads::ParamOrigins& origins);

}  // namespace fabricsim::cli
