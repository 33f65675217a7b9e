#include "workloads/chakra.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <queue>
#include <regex>
#include <set>
#include <sstream>
#include <unordered_map>

#include <google/protobuf/util/json_util.h>
#include <google/protobuf/stubs/logging.h>

#include "chakra/et_def.pb.h"  // generated from workloads/chakra/et_def.proto
#include "sim/base/error.hpp"
#include "sim/base/input_file.hpp"
#include "sim/base/json_reader.hpp"
#include "sim/base/units.hpp"

namespace fabricsim::workloads {

namespace {

namespace pb = ChakraProtoMsg;

// One node, whatever encoding it came from.
struct CNode {
  std::uint64_t id = 0;
  std::string name;
  int type = 0;  // pb::NodeType
  std::vector<std::uint64_t> data_deps, ctrl_deps;
  double duration_us = 0;
  std::optional<bool> is_cpu_op;
  std::optional<std::int64_t> comm_type, comm_src, comm_dst, comm_tag;
  std::optional<double> comm_size, num_ops, tensor_size;
  std::optional<std::string> pg_name;
  std::optional<std::vector<bool>> involved_dim;
  std::string pg_init;  // "## process_group:init ##" metadata node: its inputs (PyTorch's pg_config_info JSON)
};

struct RankFile {
  std::string file;
  std::string data;  // the file's bytes while it is read (cleared once its nodes are)
  std::int32_t rank = 0;
  std::vector<CNode> nodes;
  std::int32_t ngpus = 0;  // from metadata, 0 = not stated
};

// Attribute names the importer reads; every other attribute is listed once as unused.
const std::set<std::string> kUsedAttrs = {"is_cpu_op", "comm_type", "comm_size", "comm_src", "comm_dst", "comm_tag",
                                          "pg_name", "involved_dim", "num_ops", "tensor_size"};

std::optional<double> attr_number(const pb::AttributeProto& a) {
  switch (a.value_case()) {
    case pb::AttributeProto::kDoubleVal: return a.double_val();
    case pb::AttributeProto::kFloatVal: return a.float_val();
    case pb::AttributeProto::kInt32Val: return a.int32_val();
    case pb::AttributeProto::kInt64Val: return static_cast<double>(a.int64_val());
    case pb::AttributeProto::kUint32Val: return a.uint32_val();
    case pb::AttributeProto::kUint64Val: return static_cast<double>(a.uint64_val());
    case pb::AttributeProto::kSint32Val: return a.sint32_val();
    case pb::AttributeProto::kSint64Val: return static_cast<double>(a.sint64_val());
    case pb::AttributeProto::kFixed32Val: return a.fixed32_val();
    case pb::AttributeProto::kFixed64Val: return static_cast<double>(a.fixed64_val());
    case pb::AttributeProto::kSfixed32Val: return a.sfixed32_val();
    case pb::AttributeProto::kSfixed64Val: return static_cast<double>(a.sfixed64_val());
    case pb::AttributeProto::kBoolVal: return a.bool_val() ? 1.0 : 0.0;
    default: return std::nullopt;
  }
}

std::string node_where(const std::string& file, std::uint64_t id) { return file + ": node " + std::to_string(id); }

// protobuf logs parse problems (invalid UTF-8 in a string field, ...) to stderr on its own; the importer reports
// a bad message itself in one line, so protobuf's log is discarded (SetLogHandler(nullptr), protobuf 3.21
// stubs/logging.h). Found by the libFuzzer Chakra target (docs/reliability.md).
void quiet_protobuf() {
  static const bool once = (google::protobuf::SetLogHandler(nullptr), true);
  (void)once;
}

// An integer-valued attribute (protobuf attributes may arrive as doubles), checked before any narrowing.
std::int64_t integral(double v, const std::string& where, const std::string& what) {
  if (!(std::fabs(v) <= 9007199254740992.0) || v != std::floor(v))  // 2^53: every such double is an exact integer
    throw InputError(where, "attribute '" + what + "': expected an integer of at most 2^53");
  return static_cast<std::int64_t>(v);
}

// Range checks every encoding goes through once a node is read (docs/reliability.md): times and sizes finite
// and within the simulator's ranges, peer ranks within the ranks an imported trace may have. `where(key)` names
// the place of the field with that Chakra JSON key ("runtime", "comm_size", ...): its JSON path in Chakra JSON,
// the node in the protobuf encodings.
void check_node(const CNode& c, const std::function<std::string(const char*)>& where) {
  if (!(c.duration_us >= 0 && c.duration_us <= kMaxTime * 1e6))
    throw InputError(where("runtime"), "duration (microseconds) must be in [0, 1e15] (1e9 s)");
  for (auto [v, what] : {std::pair{c.comm_size, "comm_size"}, {c.tensor_size, "tensor_size"}})
    if (v && !(*v >= 0 && *v <= double(kMaxSize))) throw InputError(where(what), std::string(what) + " must be in [0, 2^60] bytes");
  if (c.num_ops && !(*c.num_ops >= 0 && *c.num_ops <= 1e30)) throw InputError(where("num_ops"), "num_ops must be in [0, 1e30]");
  for (auto [v, what] : {std::pair{c.comm_src, "comm_src"}, {c.comm_dst, "comm_dst"}})
    if (v && *v >= kMaxImportedWorld)
      throw InputError(where(what), std::string(what) + " " + std::to_string(*v) + " is beyond the " +
                                        std::to_string(kMaxImportedWorld) + " ranks an imported trace may have");
}

// A rank count (ngpus, npus, a comm group's rank) checked against kMaxImportedWorld before narrowing.
std::int32_t rank_count(std::int64_t v, const std::string& where, const std::string& what) {
  if (v < 0 || v > kMaxImportedWorld)
    throw InputError(where, what + " " + std::to_string(v) + " is outside [0, " + std::to_string(kMaxImportedWorld) + "]");
  return static_cast<std::int32_t>(v);
}

// A wait cycle across ranks: rank 0 waits in a collective for rank 1, which waits in another collective (or a
// recv) for rank 0. Each rank's own graph is acyclic and every communicator is called equally often, yet the
// replay would stop in a deadlock naming op indices; found here, the error names the Chakra nodes and files.
// Collectives are matched as the executor matches them (the k-th call on a communicator with the k-th call of
// every member, here in each rank's dependency order), sends and recvs by (src, dst, tag) in order. Kahn's
// algorithm over "op may start" / "op done" events plus one event per collective instance; ops that could
// start but never finish are the ones waiting on each other.
void check_cross_rank_waits(const Trace& tr, const std::function<std::string(std::int32_t, std::uint32_t)>& where) {
  std::vector<std::size_t> base(tr.ranks.size() + 1, 0);
  for (std::size_t r = 0; r < tr.ranks.size(); ++r) base[r + 1] = base[r] + tr.ranks[r].ops.size();
  const std::size_t n_ops = base.back();
  std::map<std::pair<std::int32_t, std::uint32_t>, std::vector<std::size_t>> inst;  // (comm, k) -> ops
  std::map<std::tuple<std::int32_t, std::int32_t, std::int64_t>, std::pair<std::vector<std::size_t>, std::vector<std::size_t>>> p2p;
  std::vector<std::vector<std::size_t>> succ(2 * n_ops);
  auto edge = [&](std::size_t a, std::size_t b) { succ[a].push_back(b); };
  for (std::size_t r = 0; r < tr.ranks.size(); ++r) {
    const RankTrace& rt = tr.ranks[r];
    std::map<std::int32_t, std::uint32_t> calls;
    for (std::size_t i = 0; i < rt.ops.size(); ++i) {
      const std::size_t g = base[r] + i;
      const Op& op = rt.ops[i];
      edge(2 * g, 2 * g + 1);
      for (auto d : op.deps) edge(2 * (base[r] + d) + 1, 2 * g);
      if (op.kind == OpKind::Collective) inst[{op.comm, calls[op.comm]++}].push_back(g);
      if (op.kind == OpKind::Send) p2p[{rt.rank, op.peer, op.tag}].first.push_back(g);
      if (op.kind == OpKind::Recv) p2p[{op.peer, rt.rank, op.tag}].second.push_back(g);
    }
  }
  // One event per collective instance: every member's start -> instance -> every member's end.
  for (const auto& [key, gs] : inst) {
    const std::size_t v = succ.size();
    succ.emplace_back();
    for (auto g : gs) {
      edge(2 * g, v);
      edge(v, 2 * g + 1);
    }
  }
  for (const auto& [key, p] : p2p)  // a transfer needs both sides posted
    for (std::size_t k = 0; k < std::min(p.first.size(), p.second.size()); ++k) {
      edge(2 * p.first[k], 2 * p.second[k] + 1);
      edge(2 * p.second[k], 2 * p.first[k] + 1);
    }
  std::vector<std::uint32_t> indeg(succ.size(), 0);
  for (const auto& s : succ)
    for (auto b : s) ++indeg[b];
  std::vector<std::size_t> q;
  std::vector<char> done(succ.size(), 0);
  for (std::size_t v = 0; v < succ.size(); ++v)
    if (!indeg[v]) q.push_back(v);
  while (!q.empty()) {
    const auto u = q.back();
    q.pop_back();
    done[u] = 1;
    for (auto v : succ[u])
      if (--indeg[v] == 0) q.push_back(v);
  }
  std::string blocked;
  int shown = 0;
  std::string first_where;
  for (std::size_t r = 0; r < tr.ranks.size() && shown < 4; ++r)
    for (std::uint32_t i = 0; i < tr.ranks[r].ops.size() && shown < 4; ++i) {
      const std::size_t g = base[r] + i;
      if (!done[2 * g] || done[2 * g + 1]) continue;  // not reached, or finished
      const Op& op = tr.ranks[r].ops[i];
      const std::string w = where(tr.ranks[r].rank, i);
      if (first_where.empty()) first_where = w;
      blocked += (shown++ ? "; " : "") + std::string("rank ") + std::to_string(tr.ranks[r].rank) + " " + w + " '" + op.name +
                 "' (" +
                 (op.kind == OpKind::Collective ? std::string(to_string(op.coll)) + " on '" + tr.comms[static_cast<std::size_t>(op.comm)].name + "'"
                  : op.kind == OpKind::Send     ? "send to rank " + std::to_string(op.peer)
                                                : "recv from rank " + std::to_string(op.peer)) +
                 ")";
    }
  if (!blocked.empty())
    throw InputError(first_where, "ranks wait on each other (a deadlock): " + blocked +
                                      ". Each reached a call whose partners wait behind another call (collectives are matched "
                                      "k-th with k-th per communicator in each rank's dependency order; sends and recvs per "
                                      "(src, dst, comm_tag) in order)");
}

CNode from_proto(const pb::Node& n, const std::string& file, std::set<std::string>& unused) {
  CNode c;
  c.id = n.id();
  c.name = n.name();
  c.type = static_cast<int>(n.type());
  c.data_deps.assign(n.data_deps().begin(), n.data_deps().end());
  c.ctrl_deps.assign(n.ctrl_deps().begin(), n.ctrl_deps().end());
  c.duration_us = static_cast<double>(n.duration_micros());
  if (n.name().find("process_group:init") != std::string::npos) c.pg_init = n.inputs().values();
  for (const auto& a : n.attr()) {
    const std::string& k = a.name();
    auto num = [&]() -> double {
      auto v = attr_number(a);
      if (!v) throw InputError(node_where(file, c.id), "attribute '" + k + "': expected a number");
      return *v;
    };
    if (k == "is_cpu_op") c.is_cpu_op = num() != 0;
    else if (k == "comm_type") c.comm_type = integral(num(), node_where(file, c.id), k);
    else if (k == "comm_size") c.comm_size = num();
    else if (k == "comm_src") c.comm_src = integral(num(), node_where(file, c.id), k);
    else if (k == "comm_dst") c.comm_dst = integral(num(), node_where(file, c.id), k);
    else if (k == "comm_tag") c.comm_tag = integral(num(), node_where(file, c.id), k);
    else if (k == "num_ops") c.num_ops = num();
    else if (k == "tensor_size") c.tensor_size = num();
    else if (k == "pg_name") {
      if (a.value_case() == pb::AttributeProto::kStringVal) c.pg_name = a.string_val();
      else c.pg_name = std::to_string(integral(num(), node_where(file, c.id), k));
    } else if (k == "involved_dim") {
      if (a.value_case() != pb::AttributeProto::kBoolList)
        throw InputError(node_where(file, c.id), "attribute 'involved_dim': expected a bool_list");
      c.involved_dim = std::vector<bool>(a.bool_list().values().begin(), a.bool_list().values().end());
    } else {
      unused.insert(text_excerpt(k));
    }
  }
  check_node(c, [&](const char*) { return node_where(file, c.id); });
  return c;
}

std::string read_all(const std::string& path) { return read_input_file(path); }

std::int32_t ngpus_from_metadata(const pb::GlobalMetadata& md, const std::string& file) {
  for (const auto& a : md.attr())
    if (a.name() == "ngpus" || a.name() == "world_size" || a.name() == "npus")
      if (auto v = attr_number(a))
        return rank_count(integral(*v, file + ": metadata", a.name()), file + ": metadata", a.name());
  return 0;
}

// Chakra's framing (third_party/utils/protoio.hh in mlcommons/chakra): each message is preceded by its
// length as a varint32; the first is the GlobalMetadata. Files from before GlobalMetadata existed start
// with a Node: a first message that parses as a Node and carries nothing a GlobalMetadata has is one.
void read_et(RankFile& rf, std::set<std::string>& unused) {
  quiet_protobuf();
  const std::string& buf = rf.data;
  std::size_t pos = 0, index = 0;
  auto next = [&](std::string_view& msg) {
    if (pos >= buf.size()) return false;
    std::uint64_t len = 0;
    int shift = 0;
    for (;;) {
      if (pos >= buf.size() || shift > 28)
        throw InputError(rf.file, "byte " + std::to_string(pos) + ": truncated or corrupt length prefix of message #" +
                                      std::to_string(index + 1) + " (not a Chakra .et file?)");
      const auto b = static_cast<unsigned char>(buf[pos++]);
      len |= static_cast<std::uint64_t>(b & 0x7f) << shift;
      shift += 7;
      if (b < 0x80) break;
    }
    if (len > buf.size() - pos)
      throw InputError(rf.file, "message #" + std::to_string(index + 1) + " claims " + std::to_string(len) + " bytes but " +
                                    std::to_string(buf.size() - pos) + " remain (truncated file, or not a Chakra .et)" +
                                    (rf.nodes.empty() ? std::string() : " after node " + std::to_string(rf.nodes.back().id)));
    msg = std::string_view(buf).substr(pos, len);
    pos += len;
    ++index;
    return true;
  };
  std::string_view msg;
  if (!next(msg)) throw InputError(rf.file, "empty file (expected a Chakra GlobalMetadata message, then Nodes)");
  // GlobalMetadata has fields 1 (version) and 2 (attr) only; a Node nearly always has 3 (type) or higher.
  auto top_level_field_above_2 = [](std::string_view m) {
    std::size_t i = 0;
    auto varint = [&](std::uint64_t& v) {
      v = 0;
      for (int sh = 0; sh < 64; sh += 7) {
        if (i >= m.size()) return false;
        const auto b = static_cast<unsigned char>(m[i++]);
        v |= static_cast<std::uint64_t>(b & 0x7f) << sh;
        if (b < 0x80) return true;
      }
      return false;
    };
    while (i < m.size()) {
      std::uint64_t tag = 0, v = 0;
      if (!varint(tag)) return false;
      if ((tag >> 3) > 2) return true;
      switch (tag & 7) {
        case 0: if (!varint(v)) return false; break;
        case 1: i += 8; break;
        case 2: if (!varint(v) || v > m.size() - std::min(i, m.size())) return false; i += v; break;
        case 5: i += 4; break;
        default: return false;
      }
    }
    return false;
  };
  pb::GlobalMetadata md;
  pb::Node first;
  const bool is_node = top_level_field_above_2(msg);
  const bool md_ok = !is_node && md.ParseFromArray(msg.data(), static_cast<int>(msg.size()));
  const bool node_ok = is_node && first.ParseFromArray(msg.data(), static_cast<int>(msg.size()));
  if (md_ok) {
    rf.ngpus = ngpus_from_metadata(md, rf.file);
    for (const auto& a : md.attr()) unused.insert("metadata:" + text_excerpt(a.name()));
  } else if (node_ok) {
    rf.nodes.push_back(from_proto(first, rf.file, unused));
  } else {
    throw InputError(rf.file, "not a Chakra protobuf trace: the first length-delimited message is neither a GlobalMetadata nor a Node");
  }
  while (next(msg)) {
    pb::Node n;
    if (!n.ParseFromArray(msg.data(), static_cast<int>(msg.size())))
      throw InputError(rf.file, "message #" + std::to_string(index) + " is not a Chakra Node" +
                                    (rf.nodes.empty() ? std::string() : " (after node " + std::to_string(rf.nodes.back().id) + ")"));
    rf.nodes.push_back(from_proto(n, rf.file, unused));
  }
}

// Splits back-to-back JSON values (what chakra_jsonizer writes) at top-level brace boundaries.
std::vector<std::string> split_json_objects(const std::string& text, const std::string& file) {
  std::vector<std::string> out;
  int depth = 0;
  bool in_str = false, esc = false;
  std::size_t start = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    char ch = text[i];
    if (in_str) {
      if (esc) esc = false;
      else if (ch == '\\') esc = true;
      else if (ch == '"') in_str = false;
      continue;
    }
    if (ch == '"') in_str = true;
    else if (ch == '{' || ch == '[') {
      if (depth++ == 0) start = i;
    } else if (ch == '}' || ch == ']') {
      if (--depth < 0) throw InputError(file, "unbalanced '" + std::string(1, ch) + "' at byte " + std::to_string(i));
      if (depth == 0) out.push_back(text.substr(start, i + 1 - start));
    } else if (depth == 0 && !std::isspace(static_cast<unsigned char>(ch))) {
      throw InputError(file, "expected a JSON object at byte " + std::to_string(i));
    }
  }
  if (depth != 0 || in_str) throw InputError(file, "truncated JSON (unterminated object)");
  return out;
}

// chakra_jsonizer output: protobuf-JSON GlobalMetadata, then Nodes.
void read_pb_json(RankFile& rf, const std::vector<std::string>& objs, std::set<std::string>& unused) {
  quiet_protobuf();
  google::protobuf::util::JsonParseOptions o;
  o.ignore_unknown_fields = false;
  pb::GlobalMetadata md;
  auto st = google::protobuf::util::JsonStringToMessage(objs[0], &md, o);
  if (!st.ok()) throw InputError(rf.file, "object 1: not a Chakra GlobalMetadata (" + std::string(st.message()) + ")");
  rf.ngpus = ngpus_from_metadata(md, rf.file);
  for (const auto& a : md.attr()) unused.insert("metadata:" + text_excerpt(a.name()));
  for (std::size_t k = 1; k < objs.size(); ++k) {
    pb::Node n;
    st = google::protobuf::util::JsonStringToMessage(objs[k], &n, o);
    if (!st.ok())
      throw InputError(rf.file, "object " + std::to_string(k + 1) + ": not a Chakra Node (" + std::string(st.message()) + ")");
    rf.nodes.push_back(from_proto(n, rf.file, unused));
  }
}

std::vector<std::uint64_t> id_list(ObjectReader& r, const std::string& key) {
  std::vector<std::uint64_t> out;
  if (const Json* d = r.array_optional(key))
    for (std::size_t k = 0; k < d->size(); ++k) {
      if (!(*d)[k].is_number_integer() || (*d)[k].get<std::int64_t>() < 0) json_fail(r.path_of(key).index(k), "expected a node id");
      out.push_back((*d)[k].get<std::uint64_t>());
    }
  return out;
}

// Chakra JSON (ASTRA-sim's JSON feeder layout).
void read_chakra_json(RankFile& rf, const Json& doc, std::set<std::string>& unused) {
  ObjectReader top(doc, JsonPath{rf.file, ""});
  const Json& g = top.array("workload_graph");
  if (top.has("ngpus")) rf.ngpus = rank_count(top.integer("ngpus"), top.path_of("ngpus").str(), "ngpus");
  for (const auto& [k, v] : doc.items())
    if (k != "workload_graph" && k != "ngpus") unused.insert("top-level:" + text_excerpt(k));
  for (std::size_t i = 0; i < g.size(); ++i) {
    JsonPath at = top.path_of("workload_graph").index(i);
    ObjectReader nr(g[i], at);
    CNode c;
    std::int64_t id = nr.integer("Id");
    if (id < 0) json_fail(nr.path_of("Id"), "expected a node id >= 0");
    c.id = static_cast<std::uint64_t>(id);
    c.name = nr.string_or("Name", "");
    const std::int64_t type = nr.integer("NodeType");
    if (type < 0 || type > 255) json_fail(nr.path_of("NodeType"), "expected a Chakra NodeType (1 to 7)");
    c.type = static_cast<int>(type);
    c.data_deps = id_list(nr, "data_deps");
    for (const char* k : {"ctrl_deps", "ctrlDeps"}) {
      auto v = id_list(nr, k);
      c.ctrl_deps.insert(c.ctrl_deps.end(), v.begin(), v.end());
    }
    c.duration_us = nr.number_or("runtime", 0);
    if (c.duration_us < 0) json_fail(nr.path_of("runtime"), "expected a duration >= 0 (microseconds)");
    if (nr.has("is_cpu_op")) c.is_cpu_op = nr.boolean_or("is_cpu_op", false);
    if (nr.has("comm_type")) c.comm_type = nr.integer("comm_type");
    if (nr.has("comm_size")) c.comm_size = nr.number("comm_size");
    if (nr.has("comm_src")) c.comm_src = nr.integer("comm_src");
    if (nr.has("comm_dst")) c.comm_dst = nr.integer("comm_dst");
    if (nr.has("comm_tag")) c.comm_tag = nr.integer("comm_tag");
    if (nr.has("num_ops")) c.num_ops = nr.number("num_ops");
    if (nr.has("tensor_size")) c.tensor_size = nr.number("tensor_size");
    if (nr.has("pg_name")) {
      const Json& p = nr.raw("pg_name");
      c.pg_name = p.is_string() ? p.get<std::string>() : p.dump();
    }
    for (const char* k : {"involved_dim", "involved_dims"})
      if (const Json* d = nr.array_optional(k)) {
        std::vector<bool> v;
        for (std::size_t j = 0; j < d->size(); ++j) {
          if (!(*d)[j].is_boolean()) json_fail(nr.path_of(k).index(j), "expected true or false");
          v.push_back((*d)[j].get<bool>());
        }
        c.involved_dim = v;
      }
    static const std::set<std::string> kRead = {"Id", "Name", "NodeType", "data_deps", "ctrl_deps", "ctrlDeps", "runtime",
                                                "is_cpu_op", "comm_type", "comm_size", "comm_src", "comm_dst", "comm_tag",
                                                "num_ops", "tensor_size", "pg_name", "involved_dim", "involved_dims"};
    for (const auto& [k, v] : g[i].items())
      if (!kRead.count(k)) unused.insert(text_excerpt(k));  // open-ended format: accepted, listed once
    check_node(c, [&](const char* key) { return at.child(key).str(); });
    rf.nodes.push_back(std::move(c));
  }
}

// rf.data holds the file's bytes; the encoding is told apart by content.
void read_rank_file(RankFile& rf, std::set<std::string>& unused) {
  const std::string head = rf.data.substr(0, 64);
  if (head.size() >= 2 && static_cast<unsigned char>(head[0]) == 0x1f && static_cast<unsigned char>(head[1]) == 0x8b)
    throw InputError(rf.file, "gzip-compressed: decompress it first (gunzip)");
  const auto first = head.find_first_not_of(" \t\r\n");
  if (first == std::string::npos || head[first] != '{') {
    read_et(rf, unused);
    return;
  }
  std::vector<std::string> objs = split_json_objects(rf.data, rf.file);
  if (objs.empty()) throw InputError(rf.file, "empty file");
  if (objs.size() == 1) {
    Json doc = parse_json_text(objs[0], rf.file);
    if (doc.is_object() && doc.contains("workload_graph")) {
      read_chakra_json(rf, doc, unused);
      return;
    }
    if (doc.is_object() && (doc.contains("nodes") || doc.contains("schema")) && !doc.contains("version") && !doc.contains("attr"))
      throw InputError(rf.file, "a PyTorch execution trace (host ET), not a Chakra trace: convert it with chakra_trace_link "
                                "and chakra_converter first");
  }
  read_pb_json(rf, objs, unused);
}

std::optional<std::int32_t> rank_in_name(const std::string& file) {
  static const std::regex re(R"(.*\.([0-9]+)\.(et|json)$)");
  std::smatch m;
  const std::string base = std::filesystem::path(file).filename().string();
  if (!std::regex_match(base, m, re)) return std::nullopt;
  if (m[1].length() > 9 || std::stol(m[1]) >= kMaxImportedWorld)
    throw InputError(file, "the rank in the file name is beyond the " + std::to_string(kMaxImportedWorld) +
                               " ranks an imported trace may have");
  return static_cast<std::int32_t>(std::stol(m[1]));
}

struct CommKey {
  std::string group;  // "world", "pg:<name>", "dims:<mask>"
  std::vector<std::int32_t> ranks;
  bool operator<(const CommKey& o) const { return std::tie(group, ranks) < std::tie(o.group, o.ranks); }
};

const char* coll_help =
    "0 ALL_REDUCE, 1 REDUCE, 2 ALL_GATHER, 3 GATHER, 4 SCATTER, 5 BROADCAST, 6 ALL_TO_ALL, 7 REDUCE_SCATTER, "
    "8 REDUCE_SCATTER_BLOCK, 9 BARRIER";

}  // namespace

ChakraOptions chakra_options_from_params(const ParamMap& params, const std::string& where) {
  ChakraOptions o;
  ParamReader pr(params, where);
  const std::int64_t npus = pr.integer("npus", 0, 0);
  if (npus > kMaxImportedWorld) pr.fail("npus", "expected at most " + std::to_string(kMaxImportedWorld) + " ranks");
  o.npus = static_cast<std::int32_t>(npus);
  o.comm_group_file = pr.string("comm_group", "");
  std::error_code ec;
  if (!o.comm_group_file.empty() && !std::filesystem::is_regular_file(o.comm_group_file, ec))
    pr.fail("comm_group", "expected the path of a comm group JSON file (no file '" + text_excerpt(o.comm_group_file, 80) + "')");
  const std::string dims = pr.string("dims", "");
  pr.finish();
  if (!dims.empty()) {
    std::stringstream ss(dims);
    std::string tok;
    while (std::getline(ss, tok, ',')) {
      long v = 0;
      try {
        v = parse_int(tok, "dims");
      } catch (const InputError&) {
        throw InputError(where + " dims", "expected comma-separated NPU counts per network dimension, e.g. 8,4");
      }
      if (v < 1 || v > kMaxImportedWorld)
        throw InputError(where + " dims", "expected counts in [1, " + std::to_string(kMaxImportedWorld) + "]");
      o.dims.push_back(static_cast<std::int32_t>(v));
    }
  }
  return o;
}

std::vector<std::string> chakra_rank_files(const std::string& path) {
  if (std::filesystem::is_regular_file(path)) return {path};
  if (std::filesystem::is_directory(path)) {  // a folder holding one set of rank files: its PREFIX
    std::set<std::string> prefixes;
    static const std::regex re(R"((.*)\.0\.(et|json)$)");
    for (const auto& e : std::filesystem::directory_iterator(path)) {
      std::smatch m;
      const std::string name = e.path().filename().string();
      if (e.is_regular_file() && std::regex_match(name, m, re)) prefixes.insert(m[1].str());
    }
    if (prefixes.size() == 1) return chakra_rank_files((std::filesystem::path(path) / *prefixes.begin()).string());
    return {};
  }
  for (const char* ext : {".et", ".json"}) {
    std::vector<std::string> files;
    for (int r = 0;; ++r) {
      std::string f = path + "." + std::to_string(r) + ext;
      if (!std::filesystem::is_regular_file(f)) break;
      files.push_back(f);
    }
    if (!files.empty()) return files;
  }
  return {};
}

bool looks_like_chakra(const std::string& path) {
  auto files = chakra_rank_files(path);
  if (files.empty()) return false;
  const std::string& f = files[0];
  if (f.size() > 3 && f.substr(f.size() - 3) == ".et") return true;
  std::ifstream in(f, std::ios::binary);
  std::string head(256, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<std::size_t>(in.gcount()));
  if (head.find("\"fabricsim-trace\"") != std::string::npos) return false;  // our own trace format also has "version"
  return head.find("workload_graph") != std::string::npos || head.find("\"version\"") != std::string::npos;
}

namespace {

// Reads rank files 0..n-1 (`load(i)` gives the bytes of files[i]) into one trace named after `path`.
Trace import_rank_files(const std::vector<std::string>& files, const std::function<std::string(std::size_t)>& load,
                        const std::string& path, const ChakraOptions& opt) {
  std::set<std::string> unused;
  std::vector<RankFile> rfs(files.size());
  for (std::size_t i = 0; i < files.size(); ++i) {
    rfs[i].file = files[i];
    rfs[i].rank = static_cast<std::int32_t>(i);
    if (files.size() == 1) rfs[i].rank = rank_in_name(files[i]).value_or(0);
    rfs[i].data = load(i);
    read_rank_file(rfs[i], unused);
    std::string().swap(rfs[i].data);  // one file's bytes held at a time
  }
  // World size: the rank files, the metadata's ngpus, peers named by sends/recvs, the options.
  std::int32_t world = opt.npus;
  for (const auto& rf : rfs) {
    world = std::max(world, rf.rank + 1);
    if (!opt.npus) world = std::max(world, rf.ngpus);
    for (const auto& n : rf.nodes)
      for (const auto& p : {n.comm_src, n.comm_dst})
        if (p && *p >= 0 && !opt.npus) world = std::max<std::int32_t>(world, static_cast<std::int32_t>(*p) + 1);
  }
  // Process groups.
  std::map<std::string, std::vector<std::int32_t>> pgs;
  bool pgs_from_file = false;
  if (!opt.comm_group_file.empty()) {
    pgs_from_file = true;
    Json doc = load_json_file(opt.comm_group_file);
    if (!doc.is_object()) json_fail(JsonPath{opt.comm_group_file, ""}, "expected {\"<pg_name>\": [ranks...], ...}");
    for (const auto& [k, v] : doc.items()) {
      JsonPath at = JsonPath{opt.comm_group_file, ""}.child(k);
      if (!v.is_array() || v.empty()) json_fail(at, "expected a non-empty array of ranks");
      std::vector<std::int32_t> rk;
      for (std::size_t j = 0; j < v.size(); ++j) {
        if (!v[j].is_number_integer() || v[j].get<std::int64_t>() < 0 || v[j].get<std::int64_t>() >= kMaxImportedWorld)
          json_fail(at.index(j), "expected a rank in [0, " + std::to_string(kMaxImportedWorld) + ")");
        rk.push_back(v[j].get<std::int32_t>());
        if (!opt.npus) world = std::max(world, rk.back() + 1);
      }
      pgs[k] = rk;
    }
  }
  // PyTorch records its process groups in a "## process_group:init ##" node: torch's pg_config_info, a JSON
  // list of {"pg_name", "ranks", ...} (torch/profiler ExecutionTraceObserver._record_pg_config), kept by
  // chakra's converter in the node's inputs.
  std::string pgs_from_trace;
  std::set<std::string> trace_pgs;
  if (!pgs_from_file)
    for (const auto& rf : rfs)
      for (const auto& n : rf.nodes) {
        if (n.pg_init.empty()) continue;
        const auto a = n.pg_init.find('{'), b = n.pg_init.rfind('}');
        if (a == std::string::npos || b == std::string::npos || b < a) continue;
        Json list = Json::parse("[" + n.pg_init.substr(a, b + 1 - a) + "]", nullptr, false);
        if (list.is_discarded()) continue;
        for (const auto& e : list) {
          if (!e.is_object() || !e.contains("pg_name") || !e.contains("ranks") || !e["ranks"].is_array()) continue;
          const std::string name = e["pg_name"].is_string() ? e["pg_name"].get<std::string>() : e["pg_name"].dump();
          std::vector<std::int32_t> rk;
          for (const auto& r : e["ranks"])
            if (r.is_number_integer()) rk.push_back(r.get<std::int32_t>());
          if (rk.empty() || pgs.count(name)) continue;
          std::sort(rk.begin(), rk.end());
          for (auto r : rk)
            if (!opt.npus) world = std::max(world, r + 1);
          pgs[name] = rk;
          trace_pgs.insert(name);
          pgs_from_trace = node_where(rf.file, n.id);
        }
      }
  if (!pgs_from_file) {
    for (const auto& rf : rfs)
      for (const auto& n : rf.nodes)
        if (n.pg_name && n.type == pb::COMM_COLL_NODE && !trace_pgs.count(*n.pg_name)) {
          auto& v = pgs[*n.pg_name];
          if (v.empty() || v.back() != rf.rank) v.push_back(rf.rank);
        }
    for (auto& [k, v] : pgs) {
      if (trace_pgs.count(k)) continue;
      std::sort(v.begin(), v.end());
      v.erase(std::unique(v.begin(), v.end()), v.end());
      // One rank file (rank 0 of a larger job): the group's other members are not in the files.
      if (rfs.size() == 1) {
        v.clear();
        for (std::int32_t i = 0; i < world; ++i) v.push_back(i);
      }
    }
  }
  if (!opt.dims.empty()) {
    std::int64_t prod = 1;
    for (auto d : opt.dims) prod *= d;
    if (prod != world)
      throw InputError("dims", "network dimensions multiply to " + std::to_string(prod) + " NPUs but the trace has " +
                                   std::to_string(world) + " ranks");
  }
  for (const auto& rf : rfs)
    if (rf.rank >= world) throw InputError(rf.file, "rank " + std::to_string(rf.rank) + " >= npus " + std::to_string(world));

  Trace tr;
  tr.name = "chakra:" + std::filesystem::path(path).filename().string();
  tr.world_size = world;
  std::map<CommKey, std::int32_t> comm_index;
  auto comm_for = [&](const std::string& group, std::vector<std::int32_t> ranks, const std::string& category) {
    CommKey key{group, ranks};
    auto it = comm_index.find(key);
    if (it != comm_index.end()) return it->second;
    Communicator c;
    c.name = group;
    c.ranks = std::move(ranks);
    c.category = category;
    tr.comms.push_back(c);
    return comm_index[key] = static_cast<std::int32_t>(tr.comms.size() - 1);
  };
  std::vector<std::int32_t> world_ranks;
  for (std::int32_t i = 0; i < world; ++i) world_ranks.push_back(i);

  std::size_t dims_unknown = 0, p2p_standin = 0;
  std::set<std::int32_t> file_ranks;
  for (const auto& rf : rfs) file_ranks.insert(rf.rank);
  std::size_t missing_deps = 0, self_deps = 0, cpu_colls = 0, untyped_colls = 0, ctrl_dropped_ranks = 0, sends = 0;
  std::vector<std::uint64_t> missing_examples;
  std::map<std::int32_t, std::vector<std::uint64_t>> node_of_op;  // rank -> Chakra node id of each op
  std::map<std::int32_t, std::string> file_of_rank;
  std::vector<std::string> ctrl_cycle_notes;
  for (auto& rf : rfs) {
    const std::size_t n = rf.nodes.size();
    std::map<std::uint64_t, std::uint32_t> idx;
    for (std::uint32_t i = 0; i < n; ++i)
      if (!idx.emplace(rf.nodes[i].id, i).second)
        throw InputError(node_where(rf.file, rf.nodes[i].id), "duplicate node id");
    // Resolved dependency lists (data, ctrl), deduplicated; deps on absent ids are dropped and counted.
    std::vector<std::vector<std::uint32_t>> ddeps(n), cdeps(n);
    for (std::uint32_t i = 0; i < n; ++i) {
      auto resolve = [&](const std::vector<std::uint64_t>& ids, std::vector<std::uint32_t>& out) {
        for (auto id : ids) {
          auto it = idx.find(id);
          if (it == idx.end()) {
            ++missing_deps;
            if (missing_examples.size() < 5 &&
                std::find(missing_examples.begin(), missing_examples.end(), id) == missing_examples.end())
              missing_examples.push_back(id);
            continue;
          }
          if (it->second == i) {  // seen in real PyTorch-converted traces: no ordering to keep
            ++self_deps;
            continue;
          }
          out.push_back(it->second);
        }
        std::sort(out.begin(), out.end());
        out.erase(std::unique(out.begin(), out.end()), out.end());
      };
      resolve(rf.nodes[i].data_deps, ddeps[i]);
      resolve(rf.nodes[i].ctrl_deps, cdeps[i]);
    }
    // Topological order (Kahn; among ready nodes the file order first). Returns the unplaced nodes on a cycle.
    auto topo = [&](bool with_ctrl, std::vector<std::uint32_t>& order) {
      std::vector<std::uint32_t> indeg(n, 0);
      std::vector<std::vector<std::uint32_t>> succ(n);
      for (std::uint32_t i = 0; i < n; ++i) {
        std::vector<std::uint32_t> all = ddeps[i];
        if (with_ctrl) all.insert(all.end(), cdeps[i].begin(), cdeps[i].end());
        std::sort(all.begin(), all.end());
        all.erase(std::unique(all.begin(), all.end()), all.end());
        for (auto d : all) {
          succ[d].push_back(i);
          ++indeg[i];
        }
      }
      std::priority_queue<std::uint32_t, std::vector<std::uint32_t>, std::greater<>> ready;
      for (std::uint32_t i = 0; i < n; ++i)
        if (!indeg[i]) ready.push(i);
      order.clear();
      while (!ready.empty()) {
        auto u = ready.top();
        ready.pop();
        order.push_back(u);
        for (auto s : succ[u])
          if (--indeg[s] == 0) ready.push(s);
      }
      return indeg;
    };
    auto cycle_text = [&](const std::vector<std::uint32_t>& indeg, bool with_ctrl) {
      // Walk back along unresolved deps from a node left on the cycle until a node repeats.
      std::uint32_t u = 0;
      while (indeg[u] == 0) ++u;
      std::vector<std::uint32_t> path;
      std::map<std::uint32_t, std::size_t> seen;
      while (!seen.count(u)) {
        seen[u] = path.size();
        path.push_back(u);
        std::vector<std::uint32_t> all = ddeps[u];
        if (with_ctrl) all.insert(all.end(), cdeps[u].begin(), cdeps[u].end());
        for (auto d : all)
          if (indeg[d] > 0) {
            u = d;
            break;
          }
      }
      // path[j] waits for path[j + 1]; the last waits for u = path[seen[u]]. In execution order:
      std::string s = std::to_string(rf.nodes[u].id);
      for (std::size_t k = path.size() - 1; k > seen[u]; --k) s += " -> " + std::to_string(rf.nodes[path[k]].id);
      return s + " -> " + std::to_string(rf.nodes[u].id);
    };
    std::vector<std::uint32_t> order;
    bool use_ctrl = true;
    auto indeg = topo(true, order);
    if (order.size() != n) {
      const std::string via_both = cycle_text(indeg, true);
      indeg = topo(false, order);
      if (order.size() != n)
        throw InputError(rf.file, "dependency cycle through data_deps on rank " + std::to_string(rf.rank) + ": nodes " +
                                      cycle_text(indeg, false) + " (each waits for the one before it)");
      use_ctrl = false;
      ++ctrl_dropped_ranks;
      if (ctrl_cycle_notes.size() < 3) ctrl_cycle_notes.push_back(rf.file + " (nodes " + via_both + ")");
    }
    // Eager sends: a node that depends on a send depends on the send's own dependencies instead (transitively),
    // so a ring of send-then-recv steps does not wait for receivers to post (ASTRA-sim's sends complete without
    // a rendezvous; the executor pairs a send with its recv).
    {
      std::vector<std::vector<std::uint32_t>> eff(n);  // effective deps of each node, for dependents
      std::vector<char> done(n, 0);
      for (std::uint32_t k = 0; k < n; ++k) {
        const std::uint32_t i = order[k];
        auto expand = [&](std::vector<std::uint32_t>& deps) {
          std::vector<std::uint32_t> out;
          for (auto d : deps) {
            if (rf.nodes[d].type == pb::COMM_SEND_NODE) out.insert(out.end(), eff[d].begin(), eff[d].end());
            else out.push_back(d);
          }
          std::sort(out.begin(), out.end());
          out.erase(std::unique(out.begin(), out.end()), out.end());
          deps = std::move(out);
        };
        if (rf.nodes[i].type == pb::COMM_SEND_NODE) {
          ++sends;
          std::vector<std::uint32_t> all = ddeps[i];
          if (use_ctrl) all.insert(all.end(), cdeps[i].begin(), cdeps[i].end());
          expand(all);
          eff[i] = all;
        }
        bool any_send = false;
        for (auto d : ddeps[i]) any_send |= rf.nodes[d].type == pb::COMM_SEND_NODE;
        for (auto d : cdeps[i]) any_send |= rf.nodes[d].type == pb::COMM_SEND_NODE;
        if (any_send) {
          expand(ddeps[i]);
          expand(cdeps[i]);
        }
        done[i] = 1;
      }
    }
    // Ops in topological order; streams are chains of the DAG (an op joins the stream whose last op it
    // already depends on), so stream order adds no dependency the trace does not state.
    RankTrace rt;
    rt.rank = rf.rank;
    rt.streams.clear();
    std::vector<std::uint32_t> pos(n);
    for (std::uint32_t k = 0; k < n; ++k) pos[order[k]] = k;
    std::unordered_map<std::uint32_t, std::uint32_t> tail_stream;  // last op (new order) of a chain -> its stream
    for (std::uint32_t k = 0; k < n; ++k) {
      const std::uint32_t i = order[k];
      const CNode& c = rf.nodes[i];
      const std::string where = node_where(rf.file, c.id);
      Op op;
      op.name = c.name.empty() ? "node" + std::to_string(c.id) : c.name;
      std::vector<std::uint32_t> deps = ddeps[i];
      if (use_ctrl) deps.insert(deps.end(), cdeps[i].begin(), cdeps[i].end());
      for (auto d : deps) op.deps.push_back(pos[d]);
      std::sort(op.deps.begin(), op.deps.end());
      op.deps.erase(std::unique(op.deps.begin(), op.deps.end()), op.deps.end());
      const bool cpu = c.is_cpu_op.value_or(false);
      auto as_timed = [&](const char* cat) {
        op.kind = OpKind::Compute;
        op.category = cat;
        op.duration_s = c.duration_us * 1e-6;  // Chakra: duration_micros, microseconds
      };
      switch (c.type) {
        case pb::INVALID_NODE:
        case pb::METADATA_NODE:
        case pb::MEM_LOAD_NODE:
        case pb::MEM_STORE_NODE: as_timed("other"); break;
        case pb::COMP_NODE:
          as_timed("compute");
          if (c.duration_us == 0 && c.num_ops && *c.num_ops > 0) {
            op.duration_s = -1;  // roofline from the trace's own operation count and bytes
            op.flops = *c.num_ops;
            op.mem_bytes = c.tensor_size.value_or(0);
          }
          break;
        case pb::COMM_COLL_NODE: {
          if (cpu) {  // host-side c10d:: op: ASTRA-sim runs is_cpu_op nodes as compute for their duration
            as_timed("compute");
            ++cpu_colls;
            break;
          }
          if (!c.comm_type || !c.comm_size) {
            as_timed("other");
            ++untyped_colls;
            break;
          }
          op.kind = OpKind::Collective;
          op.bytes = *c.comm_size;
          if (op.bytes < 0) throw InputError(where, "comm_size must be >= 0 bytes");
          op.category = "other";
          switch (*c.comm_type) {
            case pb::ALL_REDUCE: op.coll = CollOp::AllReduce; break;
            case pb::REDUCE: op.coll = CollOp::Reduce; break;
            case pb::ALL_GATHER: op.coll = CollOp::AllGather; break;
            case pb::GATHER: op.coll = CollOp::Reduce; break;      // same traffic towards one root
            case pb::SCATTER: op.coll = CollOp::Broadcast; break;  // same traffic from one root
            case pb::BROADCAST: op.coll = CollOp::Broadcast; break;
            case pb::ALL_TO_ALL: op.coll = CollOp::AllToAll; op.category = "all_to_all"; break;
            case pb::REDUCE_SCATTER:
            case pb::REDUCE_SCATTER_BLOCK: op.coll = CollOp::ReduceScatter; break;
            case pb::BARRIER:  // NCCL-backed barriers are a one-element all-reduce (PyTorch ProcessGroupNCCL)
              op.coll = CollOp::AllReduce;
              op.bytes = std::max(op.bytes, 4.0);
              break;
            default:
              throw InputError(where, "unknown comm_type " + std::to_string(*c.comm_type) + " (expected " + coll_help + ")");
          }
          // The communicator: process group, else involved network dimensions, else the world.
          if (c.pg_name) {
            auto it = pgs.find(*c.pg_name);
            if (it == pgs.end())
              throw InputError(where, "pg_name '" + *c.pg_name + "' is not in the comm group file " + opt.comm_group_file);
            if (!std::binary_search(it->second.begin(), it->second.end(), rf.rank) &&
                std::find(it->second.begin(), it->second.end(), rf.rank) == it->second.end())
              throw InputError(where, "rank " + std::to_string(rf.rank) + " calls a collective on pg_name '" + *c.pg_name +
                                          "' but is not one of its ranks");
            op.comm = comm_for("pg:" + *c.pg_name, it->second, op.category);
          } else if (c.involved_dim && std::find(c.involved_dim->begin(), c.involved_dim->end(), false) != c.involved_dim->end()) {
            const auto& inv = *c.involved_dim;
            if (opt.dims.empty()) {
              // Which ranks the dimensions hold depends on the network: without dims, all ranks (noted).
              ++dims_unknown;
              op.comm = comm_for("world", world_ranks, op.category);
              break;
            }
            if (inv.size() > opt.dims.size())
              throw InputError(where, "involved_dim has " + std::to_string(inv.size()) + " entries but dims has " +
                                          std::to_string(opt.dims.size()));
            // Rank coordinates: dimension 0 varies fastest (ASTRA-sim's logical topology).
            auto coords = [&](std::int32_t r) {
              std::vector<std::int32_t> x;
              for (auto d : opt.dims) {
                x.push_back(r % d);
                r /= d;
              }
              return x;
            };
            const auto me = coords(rf.rank);
            std::vector<std::int32_t> members;
            for (std::int32_t r = 0; r < world; ++r) {
              auto x = coords(r);
              bool same = true;
              for (std::size_t d = 0; d < x.size(); ++d)
                if ((d >= inv.size() || !inv[d]) && x[d] != me[d]) same = false;
              if (same) members.push_back(r);
            }
            std::string mask;
            for (bool b : inv) mask += b ? '1' : '0';
            // Groups of different ranks are distinct communicators; name them by their first rank.
            op.comm = comm_for("dims:" + mask + "@" + std::to_string(members[0]), members, op.category);
          } else {
            op.comm = comm_for("world", world_ranks, op.category);
          }
          break;
        }
        case pb::COMM_SEND_NODE:
        case pb::COMM_RECV_NODE: {
          const bool send = c.type == pb::COMM_SEND_NODE;
          op.kind = send ? OpKind::Send : OpKind::Recv;
          op.category = "other";
          const auto& peer = send ? c.comm_dst : c.comm_src;
          const auto& self = send ? c.comm_src : c.comm_dst;
          if (!peer) throw InputError(where, std::string(send ? "a send needs comm_dst" : "a recv needs comm_src"));
          if (self && *self != rf.rank)
            throw InputError(where, std::string(send ? "a send's comm_src" : "a recv's comm_dst") + " must be this file's rank " +
                                        std::to_string(rf.rank) + ", found " + std::to_string(*self));
          if (*peer < 0 || *peer >= world)
            throw InputError(where, "peer rank " + std::to_string(*peer) + " outside [0, " + std::to_string(world) + ")");
          if (*peer == rf.rank) throw InputError(where, "a send/recv to its own rank");
          if (!file_ranks.count(static_cast<std::int32_t>(*peer))) {  // no file for the peer: its recorded time
            as_timed("other");
            ++p2p_standin;
            break;
          }
          op.peer = static_cast<std::int32_t>(*peer);
          op.tag = c.comm_tag.value_or(0);
          if (!c.comm_size) throw InputError(where, "a send/recv needs comm_size (bytes)");
          op.bytes = *c.comm_size;
          if (op.bytes < 0) throw InputError(where, "comm_size must be >= 0 bytes");
          break;
        }
        default:
          throw InputError(where, "unknown node type " + std::to_string(c.type) +
                                      " (expected 1 METADATA, 2 MEM_LOAD, 3 MEM_STORE, 4 COMP, 5 COMM_SEND, 6 COMM_RECV, 7 COMM_COLL)");
      }
      // Stream: the chain whose tail this op already depends on, else a new chain.
      std::int64_t s = -1;
      for (auto d : op.deps) {  // deps are sorted: the earliest dependency that ends a chain
        auto it = tail_stream.find(d);
        if (it == tail_stream.end()) continue;
        s = it->second;
        tail_stream.erase(it);
        break;
      }
      if (s < 0) {
        if (rt.streams.size() >= 65535) throw InputError(rf.file, "more than 65535 independent op chains on one rank");
        s = static_cast<std::int64_t>(rt.streams.size());
        const char* kind = op.kind == OpKind::Compute ? (cpu ? "cpu" : "gpu") : "comm";
        rt.streams.push_back(std::string(kind) + "." + std::to_string(s));
      }
      op.stream = static_cast<std::uint16_t>(s);
      tail_stream[k] = static_cast<std::uint32_t>(s);
      rt.ops.push_back(std::move(op));
      node_of_op[rf.rank].push_back(c.id);
    }
    if (rt.streams.empty()) rt.streams.push_back("compute");
    file_of_rank[rf.rank] = rf.file;
    tr.ranks.push_back(std::move(rt));
  }
  std::sort(tr.ranks.begin(), tr.ranks.end(), [](const RankTrace& a, const RankTrace& b) { return a.rank < b.rank; });
  // Every simulated member of a communicator must call it equally often; name the first call without a partner.
  {
    std::map<std::int32_t, std::map<std::int32_t, std::vector<std::uint32_t>>> calls;  // comm -> rank -> op indices
    std::set<std::int32_t> simulated;
    for (const auto& rt : tr.ranks) simulated.insert(rt.rank);
    for (const auto& rt : tr.ranks)
      for (std::uint32_t i = 0; i < rt.ops.size(); ++i)
        if (rt.ops[i].kind == OpKind::Collective) calls[rt.ops[i].comm][rt.rank].push_back(i);
    for (const auto& [cm, by_rank] : calls) {
      const auto& members = tr.comms[static_cast<std::size_t>(cm)].ranks;
      std::size_t most = 0;
      std::int32_t most_rank = -1;
      for (auto m : members)
        if (simulated.count(m)) {
          const std::size_t n = by_rank.count(m) ? by_rank.at(m).size() : 0;
          if (n > most) most = n, most_rank = m;
        }
      for (auto m : members) {
        if (!simulated.count(m)) continue;
        const std::size_t n = by_rank.count(m) ? by_rank.at(m).size() : 0;
        if (n == most) continue;
        const auto& rt = *std::find_if(tr.ranks.begin(), tr.ranks.end(), [&](const RankTrace& r) { return r.rank == most_rank; });
        const std::uint32_t op = by_rank.at(most_rank)[n];
        throw InputError(node_where(file_of_rank[most_rank], node_of_op[most_rank][op]),
                         "collective '" + rt.ops[op].name + "' (" + to_string(rt.ops[op].coll) + " #" + std::to_string(n + 1) +
                             " on communicator '" + tr.comms[static_cast<std::size_t>(cm)].name + "') has no partner on rank " +
                             std::to_string(m) + ": " + file_of_rank[m] + " calls it " + std::to_string(n) + " time(s), rank " +
                             std::to_string(most_rank) + " " + std::to_string(most));
      }
    }
  }
  // Notes (also on stderr, once).
  std::vector<std::string> notes;
  notes.push_back("chakra: " + std::to_string(rfs.size()) + " rank file(s) of " + std::to_string(world) +
                  " ranks; durations read as microseconds; ordered by data_deps and ctrl_deps only");
  if (static_cast<std::int32_t>(rfs.size()) < world)
    notes.push_back("chakra: ranks without a file are assumed to run the same program as the simulated ones");
  if (missing_deps) {
    std::string ex;
    for (auto id : missing_examples) ex += (ex.empty() ? "" : ", ") + std::to_string(id);
    notes.push_back("chakra: " + std::to_string(missing_deps) + " dependencies name node ids that are not in the file (e.g. " +
                    ex + ") and were dropped");
  }
  if (dims_unknown)
    notes.push_back("chakra: " + std::to_string(dims_unknown) +
                    " collective(s) name a subset of network dimensions (involved_dim) but the dimensions are not given "
                    "(params dims=8,4, ASTRA-sim's npus_count): they ran over all ranks");
  if (p2p_standin)
    notes.push_back("chakra: " + std::to_string(p2p_standin) +
                    " send/recv node(s) whose peer has no rank file ran for their recorded duration");
  if (self_deps) notes.push_back("chakra: " + std::to_string(self_deps) + " dependencies of a node on itself were dropped");
  if (sends)
    notes.push_back("chakra: sends are eager: a node that depends on a COMM_SEND_NODE waits for what the send waited for, "
                    "not for the transfer (the receiver's COMM_RECV_NODE does)");
  if (ctrl_dropped_ranks) {
    std::string ex;
    for (const auto& s : ctrl_cycle_notes) ex += (ex.empty() ? "" : "; ") + s;
    notes.push_back("chakra: ctrl_deps close a cycle with data_deps in " + std::to_string(ctrl_dropped_ranks) +
                    " file(s) (" + ex + "); those ranks are ordered by data_deps only, as ASTRA-sim's ETFeeder does");
  }
  if (cpu_colls) notes.push_back("chakra: " + std::to_string(cpu_colls) + " COMM_COLL_NODE(s) with is_cpu_op (host-side ops) ran for their duration");
  if (untyped_colls)
    notes.push_back("chakra: " + std::to_string(untyped_colls) +
                    " GPU COMM_COLL_NODE(s) without comm_type/comm_size ran for their recorded duration");
  if (!pgs.empty())
    notes.push_back(std::string("chakra: process groups ") +
                    (pgs_from_file ? "from " + opt.comm_group_file
                     : pgs_from_trace.size() ? "from the trace's process_group:init node (" + pgs_from_trace + ")"
                                             : "inferred from the ranks that call them"));
  if (!unused.empty()) {
    std::string u;
    for (const auto& s : unused) u += (u.empty() ? "" : ", ") + s;
    notes.push_back("chakra: attributes not used by the simulator (accepted): " + u);
  }
  for (const auto& s : notes) {
    tr.notes.push_back(s);
    if (!opt.quiet) std::cerr << s << "\n";
  }
  // Errors name the rank's file and the Chakra node id of the op.
  check_trace(tr, files[0], [&](std::int32_t rank, std::size_t op) {
    return node_where(file_of_rank[rank], node_of_op[rank][op]);
  });
  check_cross_rank_waits(tr, [&](std::int32_t rank, std::uint32_t op) { return node_where(file_of_rank[rank], node_of_op[rank][op]); });
  return tr;
}

}  // namespace

namespace {
// The set of rank files PREFIX.0.EXT, PREFIX.1.EXT, ... that a path PREFIX.K.EXT (.et or .json) belongs to, in
// rank order; empty when the path does not look like one rank's file or no rank 0 file is beside it.
std::vector<std::string> rank_file_set_of(const std::string& path, std::string* prefix) {
  static const std::regex re(R"((.*)\.([0-9]+)\.(et|json)$)");
  std::smatch m;
  if (!std::regex_match(path, m, re)) return {};
  *prefix = m[1].str();
  std::vector<std::string> files;
  for (int r = 0;; ++r) {
    std::string f = m[1].str() + "." + std::to_string(r) + "." + m[3].str();
    if (!std::filesystem::is_regular_file(f)) break;
    files.push_back(std::move(f));
  }
  return files;
}
}  // namespace

Trace import_chakra(const std::string& path, const ChakraOptions& opt) {
  const std::vector<std::string> files = chakra_rank_files(path);
  if (files.empty())
    throw InputError(path, "no Chakra trace (expected the file itself, " + path + ".0.et / " + path +
                               ".0.json, ..., or a folder with one such set of rank files)");
  // One rank's file of a set (ASTRA-sim's all_to_all.0.et beside all_to_all.1.et ...) read alone would be a
  // one-rank job: its collectives over one rank take no time. Ask for the prefix unless npus says the file's
  // program is meant to run on that many ranks.
  if (files.size() == 1 && opt.npus == 0) {
    std::string prefix;
    const std::vector<std::string> set = rank_file_set_of(path, &prefix);
    if (set.size() > 1 && std::find(set.begin(), set.end(), path) != set.end()) {
      const auto name = [](const std::string& f) { return std::filesystem::path(f).filename().string(); };
      throw InputError(path, "one of the " + std::to_string(set.size()) + " rank files " + name(set[0]) + " ... " +
                                 name(set.back()) + " beside it: give their prefix " + prefix + " to run all " +
                                 std::to_string(set.size()) + " ranks (or the parameter npus to run this file's "
                                 "program alone on that many ranks)");
    }
  }
  return import_rank_files(files, [&](std::size_t i) { return read_all(files[i]); }, path, opt);
}

Trace import_chakra_buffers(const std::vector<ChakraRankBuffer>& ranks, const std::string& path, const ChakraOptions& opt) {
  if (ranks.empty()) throw InputError(path, "no Chakra rank files");
  std::vector<std::string> names;
  for (const auto& r : ranks) names.push_back(r.name);
  return import_rank_files(names, [&](std::size_t i) { return ranks[i].data; }, path, opt);
}

}  // namespace fabricsim::workloads
