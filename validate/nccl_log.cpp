#include "validate/nccl_log.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "models/collectives.hpp"
#include "sim/base/error.hpp"
#include "sim/base/input_file.hpp"
#include "sim/base/json_reader.hpp"
#include "sim/base/units.hpp"

namespace fabricsim::validate {
namespace {

std::vector<std::string> split_ws(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  std::string t;
  while (in >> t) out.push_back(t);
  return out;
}

std::string trim(const std::string& s) {
  std::size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool ends_with(const std::string& s, const std::string& suf) {
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}

// An nccl-tests binary name ("all_reduce_perf", "./build/sendrecv_perf").
// nccl-tests binaries: all_reduce_perf, or all_reduce_perf_mpi as its MPI build names them (the XE9680 log of
// tests/data/nccl-tests-multinode).
bool is_test_binary(const std::string& tok) {
  return (tok.size() > 5 && ends_with(tok, "_perf")) || (tok.size() > 9 && ends_with(tok, "_perf_mpi"));
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string where(const std::string& source, std::size_t line) {
  return source + ":" + std::to_string(line);
}

double num(const std::string& tok, const std::string& source, std::size_t line, const char* what) {
  try {
    return parse_double(tok, what);
  } catch (const InputError&) {
    throw InputError(where(source, line), std::string("expected a number for ") + what + ", got '" + text_excerpt(tok) + "'");
  }
}

long long integer(const std::string& tok, const std::string& source, std::size_t line, const char* what) {
  try {
    return parse_int(tok, what);
  } catch (const InputError&) {
    throw InputError(where(source, line), std::string("expected an integer for ") + what + ", got '" + text_excerpt(tok) + "'");
  }
}

// Table column layout, from the "#  size  count  type  [redop] [root]  time algbw busbw error|#wrong ..." line.
// Old nccl-tests broadcast tables (e.g. the ABCI 2021 logs) have a root column but no redop column.
struct Layout {
  bool has_redop = true;
  bool has_root = false;
  bool legacy_error = false;  // "error" column (max numeric error) instead of "#wrong"
};

bool is_table_header(const std::vector<std::string>& t) {
  // "#", "size", "count", "type", "redop", ...
  return t.size() >= 6 && t[0] == "#" && t[1] == "size" && t[2] == "count" && t[3] == "type";
}

void parse_header_line(const std::vector<std::string>& t, RunHeader& h, const std::string& source,
                       std::size_t line) {
  // Tokens after "#": "nThread 1 nGpus 1 minBytes 4 maxBytes 33554432 step: 2(factor) warmup iters: 5 ..."
  static const std::set<std::string> bare_keys = {"nThread", "nGpus", "minBytes", "maxBytes"};
  std::vector<std::string> key;
  std::map<std::string, std::string> kv;
  for (std::size_t i = 1; i < t.size(); ++i) {
    const std::string& tok = t[i];
    bool value_slot = !key.empty() && (key.back().back() == ':' || bare_keys.count(key.back()));
    if (value_slot) {
      std::string k;
      for (std::size_t j = 0; j < key.size(); ++j) {
        if (j) k += ' ';
        k += key[j];
      }
      if (!k.empty() && k.back() == ':') k.pop_back();
      kv[k] = tok;
      key.clear();
    } else {
      key.push_back(tok);
    }
  }
  if (!key.empty()) throw InputError(where(source, line), "header key '" + text_excerpt(key.front()) + "' has no value");
  auto take_int = [&](const char* k, int& out, bool required) {
    auto it = kv.find(k);
    if (it == kv.end()) {
      if (required) throw InputError(where(source, line), std::string("header lacks '") + k + "'");
      return;
    }
    out = static_cast<int>(integer(it->second, source, line, k));
    kv.erase(it);
  };
  auto take_u64 = [&](const char* k, std::uint64_t& out) {
    auto it = kv.find(k);
    if (it == kv.end()) throw InputError(where(source, line), std::string("header lacks '") + k + "'");
    long long v = integer(it->second, source, line, k);
    if (v < 0) throw InputError(where(source, line), std::string(k) + " must be >= 0");
    out = static_cast<std::uint64_t>(v);
    kv.erase(it);
  };
  take_int("nThread", h.nthread, true);
  take_int("nGpus", h.ngpus, true);
  take_u64("minBytes", h.min_bytes);
  take_u64("maxBytes", h.max_bytes);
  if (auto it = kv.find("step"); it != kv.end()) {
    h.step = it->second;
    kv.erase(it);
  }
  take_int("warmup iters", h.warmup_iters, false);
  take_int("iters", h.iters, false);
  take_int("agg iters", h.agg_iters, false);
  take_int("validation", h.validation, false);
  take_int("graph", h.graph, false);
  h.extra = std::move(kv);
}

RankInfo parse_rank_line(const std::vector<std::string>& t, const std::string& source, std::size_t line) {
  // "#" "Rank" N ["Group" G] "Pid" P "on" HOST "device" D "[BUS]" NAME...
  RankInfo r;
  r.line = line;
  std::size_t i = 1;
  auto expect = [&](const char* word) {
    if (i >= t.size() || t[i] != word)
      throw InputError(where(source, line), std::string("rank line: expected '") + word + "'");
    ++i;
  };
  auto next = [&](const char* what) -> const std::string& {
    if (i >= t.size()) throw InputError(where(source, line), std::string("rank line: missing ") + what);
    return t[i++];
  };
  expect("Rank");
  r.rank = static_cast<int>(integer(next("rank"), source, line, "rank"));
  if (i < t.size() && t[i] == "Group") {
    ++i;
    r.group = static_cast<int>(integer(next("group"), source, line, "group"));
  }
  expect("Pid");
  r.pid = integer(next("pid"), source, line, "pid");
  expect("on");
  r.host = next("host");
  expect("device");
  r.device = static_cast<int>(integer(next("device"), source, line, "device"));
  if (i < t.size() && t[i].size() >= 2 && t[i].front() == '[' && t[i].back() == ']') {
    r.bus_id = t[i].substr(1, t[i].size() - 2);
    ++i;
  }
  for (; i < t.size(); ++i) {
    if (!r.gpu_name.empty()) r.gpu_name += ' ';
    r.gpu_name += t[i];
  }
  if (r.gpu_name.empty()) throw InputError(where(source, line), "rank line: missing GPU name");
  return r;
}

Row parse_row(const std::vector<std::string>& t, const Layout& lay, const std::string& source, std::size_t line) {
  const std::size_t expected = 11 + (lay.has_redop ? 1 : 0) + (lay.has_root ? 1 : 0);
  if (t.size() != expected)
    throw InputError(where(source, line), "table row has " + std::to_string(t.size()) + " fields, expected " +
                                              std::to_string(expected));
  Row r;
  std::size_t i = 0;
  long long size = integer(t[i++], source, line, "size");
  long long count = integer(t[i++], source, line, "count");
  if (size < 0 || count < 0) throw InputError(where(source, line), "size and count must be >= 0");
  r.size_bytes = static_cast<std::uint64_t>(size);
  r.count = static_cast<std::uint64_t>(count);
  r.type = t[i++];
  r.redop = lay.has_redop ? t[i++] : "none";
  if (lay.has_root) r.root = static_cast<int>(integer(t[i++], source, line, "root"));
  for (Side* s : {&r.oop, &r.ip}) {
    if (t[i] == "N/A") {  // placement not run (fabricsim-nccl-bench prints N/A for all four fields)
      i += 4;
      continue;
    }
    s->present = true;
    s->time_us = num(t[i++], source, line, "time (us)");
    s->algbw_GBps = num(t[i++], source, line, "algbw (GB/s)");
    s->busbw_GBps = num(t[i++], source, line, "busbw (GB/s)");
    const std::string& last = t[i++];
    if (lay.legacy_error) {
      s->error = num(last, source, line, "error");
    } else if (last != "N/A") {
      s->wrong = integer(last, source, line, "#wrong");
    }
    if (s->time_us < 0 || s->algbw_GBps < 0 || s->busbw_GBps < 0)
      throw InputError(where(source, line), "negative time or bandwidth");
  }
  return r;
}

// TUNING lines of one run, keyed by the bytes NCCL logs, each choice counted.
struct LoggedChoices {
  std::string op;
  std::map<std::uint64_t, std::vector<NcclChoice>> by_bytes;
};

// Records the run's ranks into hosts / gpu / nranks. `file` is the text the ranks were read from (their lines
// name the place of a problem with them).
void finish_run(Measurement& m, const ParseHints& hints, const std::string& file) {
  auto at = [&](const RankInfo& r) { return r.line ? where(file, r.line) : m.source; };
  std::set<int> seen;
  for (const auto& r : m.ranks) {
    if (!seen.insert(r.rank).second)
      throw InputError(at(r), "rank " + std::to_string(r.rank) + " listed twice");
    if (std::find(m.hosts.begin(), m.hosts.end(), r.host) == m.hosts.end()) m.hosts.push_back(r.host);
    if (m.gpu_model.empty()) m.gpu_model = r.gpu_name;
  }
  if (!m.ranks.empty()) {
    m.nranks = static_cast<int>(m.ranks.size());
    m.num_nodes = static_cast<int>(m.hosts.size());
    // (placed at the first rank line: the list the counts come from starts there)
    if (hints.nranks && hints.nranks != m.nranks)
      throw InputError(at(m.ranks.front()), "the log lists " + std::to_string(m.nranks) + " ranks but the hint says " +
                                                std::to_string(hints.nranks));
    if (hints.nodes && hints.nodes != m.num_nodes)
      throw InputError(at(m.ranks.front()), "the log lists " + std::to_string(m.num_nodes) + " hosts but the hint says " +
                                                std::to_string(hints.nodes));
  } else {
    m.nranks = hints.nranks;
    m.num_nodes = hints.nodes;
  }
  if (m.gpu_model.empty()) m.gpu_model = hints.gpu_model;
  if (m.header && m.header->ngpus > 0) m.gpus_per_thread = m.header->ngpus;
  if (m.header && m.header->iters > 0) m.loop_iters = m.header->iters;
  if (hints.gpus_per_thread > 0 && m.gpus_per_thread > 0 && hints.gpus_per_thread != m.gpus_per_thread)
    throw InputError(m.source, "the log drives " + std::to_string(m.gpus_per_thread) +
                                   " GPUs per thread (nGpus) but the hint says -g " + std::to_string(hints.gpus_per_thread));
  if (m.gpus_per_thread == 0) m.gpus_per_thread = hints.gpus_per_thread;
  if (m.algorithm.empty()) m.algorithm = hints.algorithm;
  if (m.nccl_version.empty()) m.nccl_version = hints.nccl_version;
  std::string hint_op = normalize_op(hints.op);
  if (!hints.op.empty() && hint_op.empty()) throw InputError(m.source, "unknown collective '" + text_excerpt(hints.op) + "'");
  if (!m.op.empty() && !hint_op.empty() && m.op != hint_op)
    throw InputError(m.source, "the log is a " + m.op + " run but the hint says " + hint_op);
  if (m.op.empty()) m.op = hint_op;
}

// Keeps, per size, the choice most calls made (the first logged one on a tie); NCCL logs all_gather and
// reduce_scatter per rank, nccl-tests sizes them in total.
void attach_choices(Measurement& m, const LoggedChoices& lc) {
  if (lc.by_bytes.empty()) return;
  if (!lc.op.empty() && !m.op.empty() && lc.op != m.op)
    throw InputError(m.source, "the log's NCCL TUNING lines are for " + lc.op + " but the run is " + m.op);
  const std::uint64_t scale = (m.op == "all_gather" || m.op == "reduce_scatter") && m.nranks > 0
                                  ? static_cast<std::uint64_t>(m.nranks) : 1;
  for (const auto& [bytes, list] : lc.by_bytes) {
    const NcclChoice* best = nullptr;
    for (const auto& c : list)
      if (!best || c.calls > best->calls) best = &c;
    m.nccl_choices[bytes * scale] = *best;
  }
}

}  // namespace

bool parse_nccl_tuning_line(const std::string& line, std::string& op, std::uint64_t& logged_bytes, NcclChoice& c) {
  // "<prefix> NCCL INFO AllReduce: 1048576 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..23}"
  auto t = split_ws(line);
  std::size_t i = 0;
  while (i + 1 < t.size() && !(t[i] == "NCCL" && t[i + 1] == "INFO")) ++i;
  i += 2;  // the collective's name
  if (i + 9 > t.size()) return false;
  const std::string& f = t[i];
  if (f.size() < 2 || f.back() != ':' || t[i + 2] != "Bytes" || t[i + 3] != "->" || t[i + 4] != "Algo" ||
      t[i + 6] != "proto" || !all_digits(t[i + 1]) || t[i + 1].size() > 19)
    return false;
  const std::string ch = t[i + 8];  // channel{Lo..Hi}={0..23}
  const std::string pre = "channel{Lo..Hi}={";
  if (ch.rfind(pre, 0) != 0 || ch.back() != '}') return false;
  const std::string range = ch.substr(pre.size(), ch.size() - pre.size() - 1);
  const auto dots = range.find("..");
  if (dots == std::string::npos) return false;
  const std::string lo = range.substr(0, dots), hi = range.substr(dots + 2);
  if (!all_digits(lo) || !all_digits(hi) || lo.size() > 4 || hi.size() > 4 || std::stoi(hi) < std::stoi(lo))
    return false;
  op = normalize_op(f.substr(0, f.size() - 1));
  logged_bytes = std::stoull(t[i + 1]);
  c.algorithm = lower(t[i + 5]);
  c.protocol = lower(t[i + 7]);
  c.channels = std::stoi(hi) - std::stoi(lo) + 1;
  c.calls = 1;
  return true;
}

std::string normalize_op(const std::string& name_in) {
  std::string name = name_in;
  auto slash = name.find_last_of('/');
  if (slash != std::string::npos) name = name.substr(slash + 1);
  name = lower(name);
  if (is_test_binary(name)) name.resize(name.size() - (ends_with(name, "_mpi") ? 9 : 5));
  std::string key;
  for (char c : name)
    if (c != '_' && c != '-' && c != ' ') key += c;
  static const std::map<std::string, std::string> names = {
      {"allreduce", "all_reduce"},   {"allgather", "all_gather"}, {"reducescatter", "reduce_scatter"},
      {"broadcast", "broadcast"},    {"reduce", "reduce"},        {"alltoall", "all_to_all"},
      {"sendrecv", "sendrecv"},      {"p2p", "sendrecv"},         {"scatter", "scatter"}};
  auto it = names.find(key);
  return it == names.end() ? "" : it->second;
}

int nccl_tests_gpus_flag(const std::string& text, const std::string& where) {
  std::vector<std::string> t;
  for (auto tok : split_ws(text)) {
    while (!tok.empty() && (tok.back() == ',' || tok.back() == ';' || tok.back() == ')' || tok.back() == '.'))
      tok.pop_back();
    t.push_back(tok);
  }
  bool command = false;
  for (std::size_t i = 0; i < t.size(); ++i) {
    const auto& tok = t[i];
    if (is_test_binary(tok)) command = true;
    if (!command || (tok != "-g" && tok != "--ngpus")) continue;
    const std::string v = i + 1 < t.size() ? t[i + 1] : "";
    if (!all_digits(v) || v.size() > 4 || std::stoi(v) < 1)
      throw InputError(where, "nccl-tests flag " + tok + " needs a positive integer (GPUs per thread), got '" + text_excerpt(v) + "'");
    return std::stoi(v);
  }
  return 0;
}

double busbw_factor(const std::string& op, int n) {
  // The one table (models::busbw_factor, nccl-tests doc/PERFORMANCE.md); names fabricsim does not simulate
  // (e.g. "sendrecv" spelled otherwise) count as 1, as nccl-tests does for its other tests.
  models::Op o;
  if (n <= 0 || !models::parse_op(op, o)) return 1.0;
  return models::busbw_factor(o, n);
}

std::string strip_launcher_prefixes(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::size_t b = pos;
    // mpirun --tag-output: "[<job>,<rank>]<stdout>:" or "<stderr>:" (Open MPI orte/iof tagging).
    if (text[b] == '[') {
      const std::size_t close = text.find(']', b);
      if (close != std::string::npos && close < end) {
        bool ok = close > b + 1;
        for (std::size_t i = b + 1; i < close && ok; ++i) ok = std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == ',';
        for (const char* tag : {"<stdout>:", "<stderr>:", "<stddiag>:"})
          if (ok && text.compare(close + 1, std::strlen(tag), tag) == 0) {
            b = close + 1 + std::strlen(tag);
            break;
          }
      }
    } else {
      // srun --label: "<task>: " (Slurm prefixes the task number and a colon, right-aligned with spaces).
      std::size_t i = b;
      while (i < end && text[i] == ' ') ++i;
      std::size_t d = i;
      while (d < end && std::isdigit(static_cast<unsigned char>(text[d]))) ++d;
      if (d > i && d - i <= 6 && d + 1 < end + 1 && d < end && text[d] == ':' && (d + 1 == end || text[d + 1] == ' '))
        b = d + 1 < end ? d + 2 : d + 1;
    }
    out.append(text, b, end - b);
    if (end < text.size()) out.push_back('\n');
    pos = end + 1;
  }
  return out;
}

std::vector<Measurement> parse_nccl_tests_text(const std::string& text_in, const std::string& source,
                                               const ParseHints& hints) {
  const std::string text = strip_launcher_prefixes(text_in);
  std::vector<Measurement> runs;
  std::istringstream in(text);
  std::string raw;
  std::size_t lineno = 0;
  bool any_table = false;
  std::size_t first_table_line = 0;  // the first table header's line, for a log whose tables have no rows
  // Preamble facts seen before a run's header apply to the next run.
  std::string pending_op, pending_tests_version, pending_nccl;
  int command_gpus = 0;  // -g of a command line in the text
  bool pending_slowest = false;  // a kBenchTimeLine since the last "Collective test starting"
  Measurement* cur = nullptr;
  std::map<std::size_t, LoggedChoices> choices;  // NCCL TUNING lines per run (index into runs)
  bool in_devices = false, in_table = false;
  Layout lay;
  auto open_run = [&]() {
    runs.emplace_back();
    cur = &runs.back();
    cur->source = source;
    cur->op = pending_op;
    cur->nccl_tests_version = pending_tests_version;
    cur->nccl_version = pending_nccl;
    cur->slowest_rank_time = pending_slowest;
    in_devices = in_table = false;
  };
  while (std::getline(in, raw)) {
    ++lineno;
    if (!raw.empty() && raw.back() == '\r') raw.pop_back();
    auto t = split_ws(raw);
    if (t.empty()) continue;
    bool comment = t[0] == "#" || t[0].front() == '#';
    if (t[0].size() > 1 && t[0].front() == '#') {  // "#wrong" style glued tokens never start a line
      t.insert(t.begin() + 1, t[0].substr(1));
      t[0] = "#";
    }
    if (comment) {
      if (t.size() >= 3 && t[1] == "nccl-tests" && t[2] == "version") {
        pending_tests_version = t.size() > 3 ? t[3] : "";
        for (std::size_t i = 4; i < t.size(); ++i)
          if (t[i].rfind("nccl-library=", 0) == 0) pending_nccl = t[i].substr(13);
        continue;
      }
      if (t.size() >= 5 && t[1] == "Collective" && t[2] == "test" && t[3] == "starting:") {
        pending_op = normalize_op(t[4]);
        pending_slowest = false;
        continue;
      }
      if (t.size() >= 2 && t[1] == "fabricsim-nccl-bench:") {  // kBenchTimeLine
        pending_slowest = true;
        continue;
      }
      if (t.size() >= 2 && t[1] == "nThread") {
        open_run();
        cur->header.emplace();
        parse_header_line(t, *cur->header, source, lineno);
        continue;
      }
      if (t.size() >= 3 && t[1] == "Using" && t[2] == "devices") {
        if (!cur) open_run();
        in_devices = true;
        continue;
      }
      if (t.size() >= 2 && t[1] == "Rank" && in_devices && cur) {
        cur->ranks.push_back(parse_rank_line(t, source, lineno));
        continue;
      }
      if (is_table_header(t)) {
        if (!cur || !cur->rows.empty()) open_run();
        lay = {};
        lay.has_root = std::find(t.begin(), t.end(), "root") != t.end();
        lay.has_redop = std::find(t.begin(), t.end(), "redop") != t.end();
        bool wrong = std::find(t.begin(), t.end(), "#wrong") != t.end() ||
                     std::find(t.begin(), t.end(), "wrong") != t.end();
        bool err = std::find(t.begin(), t.end(), "error") != t.end();
        if (!wrong && !err) throw InputError(where(source, lineno), "table header has neither 'error' nor '#wrong'");
        lay.legacy_error = err && !wrong;
        cur->format = lay.legacy_error ? "nccl-tests-legacy" : "nccl-tests";
        in_devices = false;
        in_table = true;
        any_table = true;
        if (!first_table_line) first_table_line = lineno;
        continue;
      }
      if (cur && t.size() >= 4 && t[1] == "Out" && t[2] == "of" && t[3] == "bounds") {
        for (std::size_t i = 4; i < t.size(); ++i)
          if (all_digits(t[i])) {
            cur->out_of_bounds = integer(t[i], source, lineno, "out of bounds values");
            break;
          }
        in_table = false;
        continue;
      }
      if (cur && t.size() >= 5 && t[1] == "Avg" && t[2] == "bus" && t[3] == "bandwidth") {
        // "# Avg bus bandwidth    : 7.41855"
        std::size_t i = 4;
        if (i < t.size() && t[i] == ":") ++i;
        if (i >= t.size()) throw InputError(where(source, lineno), "Avg bus bandwidth without a value");
        cur->avg_busbw_GBps = num(t[i], source, lineno, "Avg bus bandwidth");
        in_table = false;
        continue;
      }
      // Units line "#  (B)  (elements) ..." or a column-group line "out-of-place in-place": keep table state.
      if (in_table && t.size() >= 2 && (t[1] == "(B)" || t[1] == "out-of-place")) continue;
      if (t.size() >= 3 && t[1] == "Collective" && t[2] == "test") continue;  // "concluded"
      if (t.size() == 1) {  // bare "#"
        in_devices = false;
        continue;
      }
      continue;  // other comments
    }
    // Non-comment lines.
    if (in_table && all_digits(t[0])) {
      cur->rows.push_back(parse_row(t, lay, source, lineno));
      continue;
    }
    if (t.size() >= 3 && t[0] == "NCCL" && t[1] == "version") {
      if (cur) cur->nccl_version = t[2];
      else pending_nccl = t[2];
      continue;
    }
    // NCCL_DEBUG output ("host:pid:tid [0] NCCL INFO ..."), printed between table rows while a size runs: it
    // does not end the table. Its TUNING lines record NCCL's algorithm, protocol and channels per call.
    if (raw.find("NCCL INFO") != std::string::npos || raw.find("NCCL WARN") != std::string::npos) {
      std::string op;
      std::uint64_t bytes = 0;
      NcclChoice c;
      if (cur && parse_nccl_tuning_line(raw, op, bytes, c)) {
        LoggedChoices& lc = choices[runs.size() - 1];
        if (lc.op.empty()) lc.op = op;
        else if (!op.empty() && op != lc.op)
          throw InputError(where(source, lineno), "NCCL TUNING line for " + op + " inside a " + lc.op + " run");
        auto& list = lc.by_bytes[bytes];
        auto same = std::find_if(list.begin(), list.end(), [&](const NcclChoice& o) {
          return o.algorithm == c.algorithm && o.protocol == c.protocol && o.channels == c.channels;
        });
        if (same == list.end()) list.push_back(c);
        else ++same->calls;
      }
      continue;
    }
    if (in_table) in_table = false;  // any other text ends the table
    // A command line naming the test binary ("./build/sendrecv_perf -b 128M ... -g 8") names the op and,
    // with -g, the GPUs per thread.
    for (const auto& tok : t) {
      if (is_test_binary(tok)) {
        std::string op = normalize_op(tok);
        if (!op.empty()) pending_op = op;
      }
    }
    if (int g = nccl_tests_gpus_flag(raw, where(source, lineno))) command_gpus = g;
  }
  if (!any_table) throw InputError(source, "no nccl-tests result table found");
  std::vector<Measurement> out;
  std::vector<const LoggedChoices*> out_choices;
  for (std::size_t r = 0; r < runs.size(); ++r) {
    Measurement& m = runs[r];
    if (m.rows.empty()) continue;  // a header without a table (e.g. an aborted run)
    if (m.op.empty()) m.op = pending_op;  // command lines printed after the table
    out.push_back(std::move(m));
    auto it = choices.find(r);
    out_choices.push_back(it == choices.end() ? nullptr : &it->second);
  }
  if (out.empty())  // every table ended before its first row: nothing was measured
    throw InputError(where(source, first_table_line),
                     "the result table has no rows (the run stopped before measuring; expected one row per message size "
                     "after the header)");
  ParseHints run_hints = hints;
  if (command_gpus > 0 && hints.gpus_per_thread > 0 && command_gpus != hints.gpus_per_thread)
    throw InputError(source, "the log's command line says -g " + std::to_string(command_gpus) + " but the hint says -g " +
                                 std::to_string(hints.gpus_per_thread));
  if (command_gpus > 0) run_hints.gpus_per_thread = command_gpus;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (out.size() > 1) out[i].source = source + "#run" + std::to_string(i + 1);
    finish_run(out[i], run_hints, source);
    if (out_choices[i]) attach_choices(out[i], *out_choices[i]);
  }
  return out;
}

std::vector<Measurement> parse_busbw_markdown(const std::string& text, const std::string& source,
                                              const ParseHints& hints) {
  // | Message Size (Bytes) | ND A100 V4 (GB/s) |
  // | -------------------- | ----------------- |
  // | 1K                   | 0.04              |
  std::istringstream in(text);
  std::string raw;
  std::size_t lineno = 0;
  Measurement m;
  m.source = source;
  m.format = "busbw-markdown";
  enum { Seek, Sep, Rows, Done } state = Seek;
  auto cells_of = [](const std::string& line) {
    std::vector<std::string> cells;
    std::string s = trim(line);
    if (s.empty() || s.front() != '|') return cells;
    std::size_t pos = 1;
    while (pos < s.size()) {
      auto bar = s.find('|', pos);
      if (bar == std::string::npos) break;
      cells.push_back(trim(s.substr(pos, bar - pos)));
      pos = bar + 1;
    }
    return cells;
  };
  while (std::getline(in, raw) && state != Done) {
    ++lineno;
    auto cells = cells_of(raw);
    if (state == Seek) {
      if (cells.size() == 2 && lower(cells[0]).find("message size") != std::string::npos &&
          cells[1].find("(GB/s)") != std::string::npos)
        state = Sep;
      continue;
    }
    if (state == Sep) {
      if (cells.size() != 2 || cells[0].find("---") == std::string::npos)
        throw InputError(where(source, lineno), "expected the markdown separator row after the busbw table header");
      state = Rows;
      continue;
    }
    if (cells.size() != 2) {
      state = Done;
      continue;
    }
    // Size labels are the decimal renderings of the power-of-two sizes of an `-f 2` sweep ("65K" = 65536,
    // "132K" = 131072, "1G" = 2^30): map to the nearest power of two and insist it is within 10 %.
    const std::string& label = cells[0];
    std::size_t k = 0;
    while (k < label.size() && (std::isdigit(static_cast<unsigned char>(label[k])) || label[k] == '.')) ++k;
    if (k == 0) throw InputError(where(source, lineno), "expected a size label like 64K, got '" + text_excerpt(label) + "'");
    double v = num(label.substr(0, k), source, lineno, "size label");
    std::string suffix = label.substr(k);
    double mult = suffix.empty() ? 1 : suffix == "K" ? 1e3 : suffix == "M" ? 1e6 : suffix == "G" ? 1e9 : -1;
    if (mult < 0) throw InputError(where(source, lineno), "unknown size suffix '" + text_excerpt(suffix) + "' (expected K, M or G)");
    double bytes = v * mult;
    if (!(bytes >= 1 && bytes <= 0x1p62))  // before log2 and the conversion to int
      throw InputError(where(source, lineno), "size label '" + text_excerpt(label) + "' is not a size between 1 B and 4E");
    double p = std::round(std::log2(bytes));
    double pow2 = std::ldexp(1.0, static_cast<int>(p));
    if (std::fabs(pow2 - bytes) > 0.1 * pow2)
      throw InputError(where(source, lineno), "size label '" + text_excerpt(label) + "' is not near a power of two");
    Row r;
    r.size_bytes = static_cast<std::uint64_t>(pow2);
    r.type = "float";
    r.redop = "sum";
    r.ip.present = true;
    r.ip.busbw_GBps = num(cells[1], source, lineno, "busbw (GB/s)");
    if (r.ip.busbw_GBps < 0) throw InputError(where(source, lineno), "negative busbw");
    m.rows.push_back(r);
  }
  if (m.rows.empty()) throw InputError(source, "no '| Message Size (Bytes) | ... (GB/s) |' table found");
  finish_run(m, hints, source);
  // A busbw-only table gives algbw = busbw / factor once the op and rank count are known.
  if (!m.op.empty() && m.nranks > 0)
    for (auto& r : m.rows) r.ip.algbw_GBps = r.ip.busbw_GBps / busbw_factor(m.op, m.nranks);
  return {m};
}

namespace {

// Row fields of the shared collective-results schema (docs/collectives.md): the out-of-place result sits at
// the row's top level as `fabricsim coll --json` writes it; a measured in-place result goes in "in_place".
void side_to_json(const Side& s, Json& j) {
  j["time_us"] = s.time_us;
  j["algbw_GBps"] = s.algbw_GBps;
  j["busbw_GBps"] = s.busbw_GBps;
  if (s.wrong) j["wrong"] = *s.wrong;
  if (s.error) j["max_error"] = *s.error;
}

// Reads the side fields present in `r` (all or none of time_us/algbw_GBps/busbw_GBps; busbw alone for
// busbw-only sources).
Side side_from_reader(ObjectReader& r) {
  Side s;
  if (!r.has("time_us") && !r.has("algbw_GBps") && !r.has("busbw_GBps")) return s;
  s.present = true;
  s.time_us = r.number_or("time_us", 0);
  s.algbw_GBps = r.number_or("algbw_GBps", 0);
  s.busbw_GBps = r.number("busbw_GBps");
  if (r.has("wrong")) s.wrong = r.integer("wrong");
  if (r.has("max_error")) s.error = r.number("max_error");
  if (s.time_us < 0 || s.algbw_GBps < 0 || s.busbw_GBps < 0) json_fail(r.path(), "non-negative time and bandwidths");
  return s;
}

std::vector<std::string> string_list(const Json* a, const JsonPath& at) {
  std::vector<std::string> out;
  if (!a) return out;
  for (std::size_t i = 0; i < a->size(); ++i) {
    if (!(*a)[i].is_string()) json_fail(at.index(i), "a string");
    out.push_back((*a)[i].get<std::string>());
  }
  return out;
}

std::string read_text_file(const std::string& path) { return read_input_file(path); }

}  // namespace

const char* kCollectiveResultsSchema = "fabricsim.collective_results/1";

Json measurement_to_json(const Measurement& m) {
  Json sys = Json::object();
  sys["gpus"] = m.nranks;
  sys["hosts"] = m.num_nodes;
  sys["gpu_model"] = m.gpu_model;
  sys["host_names"] = m.hosts;
  sys["nics"] = m.nics;
  sys["nccl_version"] = m.nccl_version;
  if (m.gpus_per_thread > 0) sys["gpus_per_thread"] = m.gpus_per_thread;
  if (m.loop_iters > 0) sys["iters"] = m.loop_iters;
  Json env = Json::object();
  for (const auto& [k, v] : m.env) env[k] = v;
  sys["env"] = env;
  sys["origin"] = m.source;
  // Whose time the rows are survives a text -> JSON conversion: the bench's name marks the slowest rank's.
  sys["format"] = m.slowest_rank_time ? std::string("fabricsim-nccl-bench") : m.format;
  // The scale-out fabric's description (validate/fabric_mapping.hpp), when known.
  if (!m.interconnect.empty()) sys["interconnect"] = m.interconnect;
  if (!m.nic.empty()) sys["nic"] = m.nic;
  Json rows = Json::array();
  double bus_sum = 0;
  std::size_t bus_n = 0;
  std::string type = "float", redop = "sum";
  int root = -1;
  for (const auto& r : m.rows) {
    Json jr = Json::object();
    jr["size_bytes"] = r.size_bytes;
    jr["count"] = r.count;
    if (r.oop.present) side_to_json(r.oop, jr);
    if (r.ip.present) {
      Json ip = Json::object();
      side_to_json(r.ip, ip);
      jr["in_place"] = ip;
    }
    const Side& first = r.oop.present ? r.oop : r.ip;
    bus_sum += first.busbw_GBps;
    ++bus_n;
    type = r.type;
    redop = r.redop;
    if (r.root) root = *r.root;
    rows.push_back(jr);
  }
  Json j = Json::object();
  j["schema"] = kCollectiveResultsSchema;
  j["source"] = "measurement";
  j["system"] = sys;
  j["collective"] = m.op;
  j["datatype"] = type;
  j["redop"] = redop;
  j["root"] = root;
  j["nranks"] = m.nranks;
  j["requested_algorithm"] = m.algorithm.empty() ? "auto" : m.algorithm;
  j["requested_protocol"] = m.protocol.empty() ? "auto" : m.protocol;
  j["rows"] = rows;
  j["avg_busbw_GBps"] = bus_n ? bus_sum / static_cast<double>(bus_n) : 0.0;
  return j;
}

Measurement measurement_from_json(const Json& doc, const std::string& source) {
  JsonPath root{source, ""};
  if (!doc.is_object()) json_fail(root, std::string("a ") + kCollectiveResultsSchema + " object");
  ObjectReader r(doc, root);
  if (r.string("schema") != kCollectiveResultsSchema)
    json_fail(root.child("schema"), std::string("\"") + kCollectiveResultsSchema + "\"");
  std::string kind = r.string("source");
  if (kind != "measurement" && kind != "simulation") json_fail(root.child("source"), "\"measurement\" or \"simulation\"");
  Measurement m;
  m.source = source;
  m.format = kind == "measurement" ? "fabricsim-json" : "fabricsim-json-simulation";
  {
    ObjectReader sr(r.object("system"), root.child("system"));
    m.gpu_model = sr.string_or("gpu_model", "");
    m.num_nodes = static_cast<int>(sr.integer_or("hosts", 0));
    sr.integer_or("gpus", 0);
    m.hosts = string_list(sr.array_optional("host_names"), sr.path_of("host_names"));
    m.nics = string_list(sr.array_optional("nics"), sr.path_of("nics"));
    m.nccl_version = sr.string_or("nccl_version", "");
    m.gpus_per_thread = static_cast<int>(sr.integer_or("gpus_per_thread", 0));
    if (m.gpus_per_thread < 0) json_fail(sr.path_of("gpus_per_thread"), "an integer >= 0 (GPUs one host thread drives; 0 = unknown)");
    m.loop_iters = static_cast<int>(sr.integer_or("iters", 0));
    if (m.loop_iters < 0) json_fail(sr.path_of("iters"), "an integer >= 0 (back-to-back calls timed per size; 0 = unknown)");
    if (const Json* e = sr.object_optional("env"))
      for (auto it = e->begin(); it != e->end(); ++it) {
        if (!it.value().is_string()) json_fail(sr.path_of("env").child(it.key()), "a string");
        m.env[it.key()] = it.value().get<std::string>();
      }
    std::string origin = sr.string_or("origin", "");
    if (!origin.empty()) m.source = origin;
    // fabricsim-nccl-bench reports the slowest rank's time (Measurement::slowest_rank_time); a converted
    // nccl-tests log says "nccl-tests" here, a simulation whatever it was written as.
    m.slowest_rank_time = sr.string_or("format", "") == "fabricsim-nccl-bench";
    m.interconnect = sr.string_or("interconnect", "");
    m.nic = sr.string_or("nic", "");
    // Written by `fabricsim coll --json` (simulations): which topology it ran on.
    sr.string_or("topology", "");
    sr.object_optional("params");
    // Written by `fabricsim coll --fault`: what the faults changed (informational, one string each).
    string_list(sr.array_optional("faults"), sr.path_of("faults"));
    sr.finish();
  }
  m.op = normalize_op(r.string("collective"));
  if (m.op.empty()) json_fail(root.child("collective"), "a collective name (all_reduce, all_gather, ...)");
  std::string type = r.string_or("datatype", "float");
  std::string redop = r.string_or("redop", "sum");
  int rootrank = static_cast<int>(r.integer_or("root", -1));
  m.nranks = static_cast<int>(r.integer("nranks"));
  if (m.nranks < 1) json_fail(root.child("nranks"), "an integer >= 1");
  std::string algo = r.string_or("requested_algorithm", "auto");
  std::string proto = r.string_or("requested_protocol", "auto");
  m.algorithm = algo == "auto" ? "" : algo;
  m.protocol = proto == "auto" ? "" : proto;
  r.array_optional("communicator");
  r.string_or("engine", "");
  r.string_or("calibration", "");
  r.number_or("avg_busbw_GBps", 0);
  const Json& rows = r.array("rows");
  for (std::size_t i = 0; i < rows.size(); ++i) {
    JsonPath at = root.child("rows").index(i);
    if (!rows[i].is_object()) json_fail(at, "an object");
    ObjectReader rr(rows[i], at);
    Row row;
    row.size_bytes = rr.size("size_bytes");
    long long count = rr.integer_or("count", 0);
    if (count < 0) json_fail(at.child("count"), "an integer >= 0");
    row.count = static_cast<std::uint64_t>(count);
    row.type = type;
    row.redop = redop;
    row.root = rootrank;
    row.oop = side_from_reader(rr);
    if (const Json* ip = rr.object_optional("in_place")) {
      ObjectReader ir(*ip, at.child("in_place"));
      row.ip = side_from_reader(ir);
      ir.finish();
    }
    // Simulation-only row fields (fabricsim coll --json).
    rr.string_or("algorithm", "");
    rr.string_or("protocol", "");
    rr.string_or("fidelity", "");
    rr.number_or("predicted_time_us", 0);
    rr.number_or("transfers", 0);
    if (!row.oop.present && !row.ip.present) json_fail(at, "a result (time_us/algbw_GBps/busbw_GBps or in_place)");
    rr.finish();
    m.rows.push_back(row);
  }
  r.finish();
  return m;
}

std::map<std::string, std::string> nccl_env_settings(const std::string& text) {
  std::map<std::string, std::string> env;
  auto name_char = [](char ch) { return std::isupper(static_cast<unsigned char>(ch)) || std::isdigit(static_cast<unsigned char>(ch)) || ch == '_'; };
  for (std::size_t a = text.find("NCCL_"); a != std::string::npos; a = text.find("NCCL_", a + 1)) {
    if (a > 0 && name_char(text[a - 1])) continue;  // inside a longer name
    std::size_t e = a;
    while (e < text.size() && name_char(text[e])) ++e;
    if (e >= text.size() || text[e] != '=') continue;  // a name without a value ("which NCCL_ALGO row")
    std::size_t b = e + 1, f = b;
    while (f < text.size() && !std::isspace(static_cast<unsigned char>(text[f])) && text[f] != ',' && text[f] != ';' &&
           text[f] != ')' && text[f] != '"' && text[f] != '\'')
      ++f;
    while (f > b && text[f - 1] == '.') --f;  // sentence end
    if (f == b) continue;
    env.emplace(text.substr(a, e - a), text.substr(b, f - b));  // the first mention wins
  }
  return env;
}

std::vector<Measurement> load_measurements(const std::string& path, const ParseHints& hints_in) {
  ParseHints hints = hints_in;
  std::vector<Measurement> ms;
  if (ends_with(path, ".meta.json")) {
    // Sidecar from ../shared/data/nccl-tests: names the raw log and states what the log may not.
    Json doc = load_json_file(path);
    JsonPath root{path, ""};
    if (!doc.is_object()) json_fail(root, "a .meta.json object");
    ObjectReader r(doc, root);
    // "source" is the key of ../shared/data/nccl-tests-multinode's sidecars, "source_url_or_repo_path" that of
    // ../shared/data/nccl-tests'; interconnect and nic describe the scale-out fabric (validate/simulate.cpp).
    for (const char* k : {"source_url_or_repo_path", "source"}) r.string_or(k, "");
    const std::string system = r.string_or("system", "");
    const std::string interconnect = r.string_or("interconnect", "");
    const std::string nic = r.string_or("nic", "");
    const std::string network = interconnect + "; " + nic;
    std::string notes = r.string_or("notes", "");
    std::string gpu = r.string("gpu");
    r.integer("gpus_per_node");
    int nodes = static_cast<int>(r.integer("nodes"));
    std::string nccl = r.string_or("nccl_version", "");
    std::string coll = r.string("collective");
    int nranks = static_cast<int>(r.integer("nranks"));
    std::string raw_file = r.string("raw_file");
    r.finish();
    // "all_reduce_perf (float, sum), -t 1 ..." or "all_reduce_perf, in-place busbw only": the leading name.
    std::size_t e = 0;
    while (e < coll.size() && (std::isalnum(static_cast<unsigned char>(coll[e])) || coll[e] == '_')) ++e;
    if (hints.op.empty()) hints.op = coll.substr(0, e);
    // The algorithm, when the sidecar records it: "NCCL_ALGO=Ring ..." or "Ring per file name".
    // Every NCCL_NAME=value the sidecar quotes (the launch command in "collective", settings listed in "notes";
    // the command's first): the run's NCCL environment (Measurement::env, validate/simulate.cpp).
    const std::map<std::string, std::string> env = nccl_env_settings(coll + "\n" + notes);
    if (hints.algorithm.empty()) {
      auto a = env.find("NCCL_ALGO");
      if (a != env.end()) {
        hints.algorithm = lower(a->second);
      } else if (coll.find("Ring per file name") != std::string::npos) {
        hints.algorithm = "ring";
      }
    }
    if (!hints.nranks) hints.nranks = nranks;
    if (!hints.nodes) hints.nodes = nodes;
    // How the run was launched, when the sidecar quotes the nccl-tests command ("sendrecv_perf (float), -g 8",
    // or "... run as all_reduce_perf -b 8 -e 8G -f 2 -g 8 -n 40" in the notes).
    if (!hints.gpus_per_thread) {
      hints.gpus_per_thread = nccl_tests_gpus_flag(coll, path + ": collective");
      if (!hints.gpus_per_thread) hints.gpus_per_thread = nccl_tests_gpus_flag(notes, path + ": notes");
    }
    if (hints.gpu_model.empty()) hints.gpu_model = gpu;
    if (hints.nccl_version.empty()) hints.nccl_version = nccl;
    if (hints.interconnect.empty()) hints.interconnect = interconnect;
    if (hints.nic.empty()) hints.nic = nic;
    auto slash = path.find_last_of('/');
    std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
    std::string raw_path = dir + raw_file;
    std::string text = read_text_file(raw_path);
    ms = text.find("| Message Size") != std::string::npos && text.find("# nThread") == std::string::npos
             ? parse_busbw_markdown(text, raw_path, hints)
             : parse_nccl_tests_text(text, raw_path, hints);
    for (auto& m : ms) {
      m.stated_system = system;
      m.stated_network = network;
      for (const auto& [k, v] : env) m.env.emplace(k, v);
      auto pr = env.find("NCCL_PROTO");
      if (m.protocol.empty() && pr != env.end()) m.protocol = lower(pr->second);
    }
  } else if (ends_with(path, ".json")) {  // fabricsim.collective_results/1 (bench or coll --json)
    ms.push_back(measurement_from_json(load_json_file(path), path));
  } else {
    std::string text = read_text_file(path);
    bool markdown = text.find("| Message Size") != std::string::npos && text.find("# nThread") == std::string::npos &&
                    text.find("(elements)") == std::string::npos;
    ms = markdown ? parse_busbw_markdown(text, path, hints) : parse_nccl_tests_text(text, path, hints);
  }
  for (auto& m : ms) {
    if (!hints.interconnect.empty()) m.interconnect = hints.interconnect;
    if (!hints.nic.empty()) m.nic = hints.nic;
    if (m.op.empty())
      throw InputError(m.source, "cannot tell which collective this log measured; pass --op or use its .meta.json sidecar");
    if (m.nranks < 1)
      throw InputError(m.source, "the log has no rank lines; pass --nranks or use its .meta.json sidecar");
  }
  return ms;
}

std::optional<double> row_time_s(const Measurement& m, const Row& r) {
  if (r.size_bytes == 0) return std::nullopt;
  std::optional<double> t;
  for (const Side* s : {&r.oop, &r.ip}) {
    if (!s->present || s->time_us <= 0) continue;
    double ts = s->time_us * 1e-6;
    t = t ? std::min(*t, ts) : ts;
  }
  if (t) return t;
  for (const Side* s : {&r.ip, &r.oop}) {
    if (!s->present || s->busbw_GBps <= 0) continue;
    double algbw_Bps = s->busbw_GBps * kGB / busbw_factor(m.op, m.nranks);
    return static_cast<double>(r.size_bytes) / algbw_Bps;
  }
  return std::nullopt;
}

}  // namespace fabricsim::validate
