#include "apps/cli.hpp"

#include <iostream>
#include <sstream>

#include "models/calibration_presets.hpp"
#include "models/compute.hpp"
#include "models/compute_calibration.hpp"
#include "sim/base/did_you_mean.hpp"
#include "sim/base/error.hpp"
#include "sim/base/json_reader.hpp"
#include "topologies/io.hpp"
#include "workloads/gpt_models.hpp"
#include "workloads/scenario.hpp"

namespace fabricsim::cli {

Args::Args(std::string command, std::string synopsis, std::string description)
    : command_(std::move(command)), synopsis_(std::move(synopsis)), description_(std::move(description)) {
  flag({"--help", "-h", "", "print this help and exit", "", false});
}

Args& Args::flag(Flag f) {
  flags_.push_back(std::move(f));
  return *this;
}

Args& Args::topology_flags() {
  flag({"--topology", "-t", "PRESET|FILE", "topology preset name (see `fabricsim topo --list`) or JSON file", "", false});
  flag({"--param", "-p", "KEY=VALUE", "topology preset parameter; repeatable", "", true});
  return *this;
}

Args& Args::list_flag(unsigned catalogues) {
  catalogues_ = catalogues;
  std::string what;
  auto add = [&](unsigned bit, const char* name) {
    if (!(catalogues & bit)) return;
    if (!what.empty()) what += ", ";
    what += name;
  };
  add(kTopologies, "topology presets");
  add(kCalibrations, "network calibrations");
  add(kCompute, "compute presets and calibrations");
  add(kModels, "models");
  flag({"--list", "", "", "list the " + what + " this command accepts, and exit", "", false});
  return *this;
}

std::string catalogue_text(unsigned which) {
  std::ostringstream o;
  if (which & Args::kTopologies) {
    o << "topology presets (--topology NAME, scenario \"topology\": {\"preset\": NAME}; parameters: fabricsim topo --list):\n";
    for (const auto& p : topo::presets()) o << "  " << p.name << ": " << p.description << "\n";
  }
  if (which & Args::kCalibrations) {
    o << "network calibrations (--calibration): auto (the shipped one matching the GPUs), "
         "default (built-in cited defaults), a JSON file, or shipped:NAME:\n";
    for (const auto& c : models::embedded_calibrations()) o << "  shipped:" << c.name << "\n";
  }
  if (which & Args::kCompute) {
    o << "compute presets (--compute-preset, scenario \"compute\": {\"preset\": NAME}):\n";
    for (const auto& n : models::compute_preset_names()) o << "  " << n << "\n";
    o << "compute calibrations (per-kernel fits, scenario \"compute\": {\"calibration\": NAME}):\n";
    for (const auto& n : models::compute_calibration_names()) o << "  " << n << "\n";
  }
  if (which & Args::kModels) {
    o << "models (gpt generator, --param model=NAME or workload params \"model\"):\n";
    for (const auto& m : workloads::gpt_model_catalogue())
      o << "  " << m.name << ": " << m.num_layers << " layers, hidden " << m.hidden_size << ", " << m.num_attention_heads
        << " heads, seq " << m.seq_length << "\n";
  }
  return o.str();
}

const Flag* Args::find(const std::string& name) const {
  for (const auto& f : flags_)
    if (f.name == name || (!f.alias.empty() && f.alias == name)) return &f;
  return nullptr;
}

bool Args::parse(int argc, char** argv) {
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (a.size() > 1 && a[0] == '-' && !(a.size() > 1 && (std::isdigit(static_cast<unsigned char>(a[1])) || a[1] == '.'))) {
      std::string value;
      bool inline_value = false;
      auto eq = a.find('=');
      if (a.rfind("--", 0) == 0 && eq != std::string::npos) {
        value = a.substr(eq + 1);
        a = a.substr(0, eq);
        inline_value = true;
      }
      const Flag* f = find(a);
      if (!f && a[1] != '-' && a.size() > 2) {
        // A short option with its value attached, as getopt takes it: -j2, -b8G, -pnodes=4.
        const Flag* s = find(a.substr(0, 2));
        if (s && !s->value_name.empty()) {
          f = s;
          value = a.substr(2);
          a = a.substr(0, 2);
          inline_value = true;
        }
      }
      if (!f) {
        std::vector<std::string> names;
        for (const auto& fl : flags_)
          if (fl.name.rfind("--", 0) == 0) names.push_back(fl.name);
        const std::string opt = a.substr(0, a.find('='));
        throw InputError(a, "unknown option for `fabricsim " + command_ + "`" + did_you_mean(opt, names) + " (see --help)");
      }
      if (f->name == "--help") {
        std::cout << help();
        return false;
      }
      if (f->value_name.empty()) {
        if (inline_value) throw InputError(a, "this switch takes no value");
        values_[f->name].push_back("1");
        continue;
      }
      if (!inline_value) {
        if (i + 1 >= argc) throw InputError(a, "missing value " + f->value_name);
        value = argv[++i];
      }
      if (!f->repeated && values_.count(f->name))
        throw InputError(a, "given more than once");
      values_[f->name].push_back(value);
    } else {
      positional_.push_back(a);
    }
  }
  if (catalogues_ && has("--list")) {
    std::cout << catalogue_text(catalogues_);
    return false;
  }
  return true;
}

bool Args::has(const std::string& name) const { return values_.count(name) > 0; }

std::string Args::get(const std::string& name, const std::string& dflt) const {
  auto it = values_.find(name);
  return it == values_.end() ? dflt : it->second.back();
}

const std::vector<std::string>& Args::all(const std::string& name) const {
  static const std::vector<std::string> empty;
  auto it = values_.find(name);
  return it == values_.end() ? empty : it->second;
}

void Args::check_output_flags(std::initializer_list<const char*> flags) const {
  for (const char* f : flags)
    if (has(f)) check_output_path(get(f), f);
}

std::string Args::comm_model() const {
  std::string m = get("--comm-model");
  if (!m.empty() && !workloads::is_comm_model(m))
    throw InputError("--comm-model", std::string("expected ") + workloads::comm_model_help());
  return m;
}

std::map<std::string, std::string> Args::params() const {
  std::map<std::string, std::string> out;
  for (const auto& kv : all("--param")) {
    auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0)
      throw InputError("--param " + kv, "expected KEY=VALUE");
    out[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return out;
}

std::string Args::help() const {
  std::ostringstream o;
  o << "usage: fabricsim " << command_ << " " << synopsis_ << "\n\n" << description_ << "\n\noptions:\n";
  for (const auto& f : flags_) {
    std::string left = "  " + f.name;
    if (!f.alias.empty()) left += ", " + f.alias;
    if (!f.value_name.empty()) left += " " + f.value_name;
    o << left;
    if (left.size() < 30) o << std::string(30 - left.size(), ' ');
    else o << "\n" << std::string(30, ' ');
    o << f.help;
    if (!f.dflt.empty()) o << " (default: " << f.dflt << ")";
    o << "\n";
  }
  return o.str();
}

}  // namespace fabricsim::cli
