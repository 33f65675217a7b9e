#include "apps/cli.hpp"

#include <iostream>
#include <sstream>

#include "sim/base/error.hpp"
#include "sim/base/json_reader.hpp"

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
      if (!f) throw InputError(a, "unknown option for `fabricsim " + command_ + "` (see --help)");
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
