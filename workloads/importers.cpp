#include "workloads/importers.hpp"

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "sim/base/error.hpp"
#include "sim/base/units.hpp"

namespace fabricsim::workloads {

Trace import_chakra_json(const std::vector<Json>& per_rank, const std::vector<std::string>& files) {
  Trace tr;
  tr.name = "chakra";
  std::int32_t world = static_cast<std::int32_t>(per_rank.size());
  // First pass: world size from referenced peers.
  for (std::size_t r = 0; r < per_rank.size(); ++r) {
    ObjectReader top(per_rank[r], JsonPath{files[r], ""});
    const Json& g = top.array("workload_graph");
    for (const auto& n : g) {
      if (!n.is_object()) continue;
      for (const char* k : {"comm_src", "comm_dst"})
        if (n.contains(k) && n[k].is_number_integer()) world = std::max<std::int32_t>(world, n[k].get<std::int32_t>() + 1);
    }
  }
  tr.world_size = world;
  Communicator all;
  all.name = "world";
  for (std::int32_t i = 0; i < world; ++i) all.ranks.push_back(i);
  tr.comms.push_back(all);
  for (std::size_t r = 0; r < per_rank.size(); ++r) {
    JsonPath root{files[r], ""};
    ObjectReader top(per_rank[r], root);
    const Json& g = top.array("workload_graph");
    top.finish();
    RankTrace rt;
    rt.rank = static_cast<std::int32_t>(r);
    rt.streams = {"compute", "comm"};
    std::map<std::int64_t, std::uint32_t> id_to_index;
    std::vector<std::vector<std::int64_t>> raw_deps;
    std::vector<JsonPath> dep_paths;
    for (std::size_t i = 0; i < g.size(); ++i) {
      JsonPath at = top.path_of("workload_graph").index(i);
      ObjectReader nr(g[i], at);
      Op op;
      std::int64_t id = nr.integer("Id");
      if (id_to_index.count(id)) json_fail(nr.path_of("Id"), "duplicate node id " + std::to_string(id));
      op.name = nr.string_or("Name", "");
      std::int64_t type = nr.integer("NodeType");
      for (const char* k : {"is_cpu_op", "tensor_size", "comm_priority", "involved_dim", "involved_dims", "involved_dim_size"})
        nr.raw_optional(k);
      std::vector<std::int64_t> deps;
      if (const Json* d = nr.array_optional("data_deps"))
        for (std::size_t k = 0; k < d->size(); ++k) {
          if (!(*d)[k].is_number_integer()) json_fail(nr.path_of("data_deps").index(k), "expected a node id");
          deps.push_back((*d)[k].get<std::int64_t>());
        }
      double runtime_ns = nr.number_or("runtime", 0);
      if (runtime_ns < 0) json_fail(nr.path_of("runtime"), "expected a duration >= 0 (nanoseconds)");
      switch (type) {
        case 1: case 2: case 3: case 4:
          op.kind = OpKind::Compute;
          op.stream = 0;
          op.category = "compute";
          op.duration_s = std::llround(runtime_ns) * 1e-9;
          break;
        case 5: case 6: {
          op.kind = type == 5 ? OpKind::Send : OpKind::Recv;
          op.stream = 1;
          op.category = "other";
          std::int64_t src = nr.integer("comm_src"), dst = nr.integer("comm_dst");
          if ((type == 5 && src != rt.rank) || (type == 6 && dst != rt.rank))
            json_fail(at, std::string("a ") + (type == 5 ? "send's comm_src" : "recv's comm_dst") + " must be this file's rank " + std::to_string(rt.rank));
          op.peer = static_cast<std::int32_t>(type == 5 ? dst : src);
          op.tag = nr.integer_or("comm_tag", 0);
          op.bytes = nr.number("comm_size");
          if (op.bytes < 0) json_fail(nr.path_of("comm_size"), "expected bytes >= 0");
          break;
        }
        case 7: {
          op.kind = OpKind::Collective;
          op.stream = 1;
          op.comm = 0;
          op.category = "other";
          std::int64_t ct = nr.integer("comm_type");
          switch (ct) {
            case 0: op.coll = CollOp::AllReduce; break;
            case 1: op.coll = CollOp::Reduce; break;
            case 2: op.coll = CollOp::AllGather; break;
            case 5: op.coll = CollOp::Broadcast; break;
            case 6: op.coll = CollOp::AllToAll; break;
            case 7: op.coll = CollOp::ReduceScatter; break;
            default: json_fail(nr.path_of("comm_type"), "unsupported Chakra comm_type " + std::to_string(ct) +
                                                            " (supported: 0 ALL_REDUCE, 1 REDUCE, 2 ALL_GATHER, 5 BROADCAST, 6 ALL_TO_ALL, 7 REDUCE_SCATTER)");
          }
          op.bytes = nr.number("comm_size");
          if (op.bytes < 0) json_fail(nr.path_of("comm_size"), "expected bytes >= 0");
          nr.raw_optional("comm_src");
          nr.raw_optional("comm_dst");
          nr.raw_optional("comm_tag");
          break;
        }
        default:
          json_fail(nr.path_of("NodeType"), "expected a Chakra NodeType 1-7 (4 COMP, 5 SEND, 6 RECV, 7 COLL)");
      }
      nr.finish();
      id_to_index[id] = static_cast<std::uint32_t>(rt.ops.size());
      raw_deps.push_back(std::move(deps));
      dep_paths.push_back(nr.path_of("data_deps"));
      rt.ops.push_back(std::move(op));
    }
    // Chakra ops are ordered by their deps only; put each on its own stream position by deps:
    // compute ops share the compute stream (a GPU runs one kernel stream), comm ops the comm stream.
    for (std::size_t i = 0; i < rt.ops.size(); ++i)
      for (std::size_t k = 0; k < raw_deps[i].size(); ++k) {
        auto it = id_to_index.find(raw_deps[i][k]);
        if (it == id_to_index.end()) json_fail(dep_paths[i].index(k), "unknown node id " + std::to_string(raw_deps[i][k]));
        rt.ops[i].deps.push_back(it->second);
      }
    tr.ranks.push_back(std::move(rt));
  }
  tr.notes.push_back("chakra: imported " + std::to_string(per_rank.size()) + " rank(s); collectives span all " +
                     std::to_string(world) + " ranks (involved_dims ignored); runtime read as nanoseconds");
  check_trace(tr, files.empty() ? "chakra" : files[0]);
  return tr;
}

Trace import_chakra_file(const std::string& path) {
  std::vector<Json> docs;
  std::vector<std::string> files;
  if (std::filesystem::is_regular_file(path)) {
    docs.push_back(load_json_file(path));
    files.push_back(path);
  } else {
    for (int r = 0;; ++r) {
      std::string f = path + "." + std::to_string(r) + ".json";
      if (!std::filesystem::is_regular_file(f)) break;
      docs.push_back(load_json_file(f));
      files.push_back(f);
    }
    if (docs.empty()) throw InputError(path, "no Chakra JSON file (expected the file itself or " + path + ".0.json, ...)");
  }
  return import_chakra_json(docs, files);
}

namespace {
bool parse_astra_comm(const std::string& s, CollOp& op, bool& none) {
  none = false;
  if (s == "NONE") none = true;
  else if (s == "ALLREDUCE") op = CollOp::AllReduce;
  else if (s == "ALLGATHER") op = CollOp::AllGather;
  else if (s == "REDUCESCATTER") op = CollOp::ReduceScatter;
  else if (s == "ALLTOALL") op = CollOp::AllToAll;
  else return false;
  return true;
}
}  // namespace

Trace import_astra_text(const std::string& text, const std::string& file, const ParamMap& params,
                        const std::string& where) {
  ParamReader pr(params, where);
  std::int64_t npus = pr.integer_required("npus", 1);
  double cycle_ns = pr.number("cycle_ns", 1.0, 0);
  pr.finish();
  std::istringstream in(text);
  std::string line;
  int lineno = 0;
  auto next_line = [&](std::string& out) {
    while (std::getline(in, out)) {
      ++lineno;
      if (out.find_first_not_of(" \t\r") != std::string::npos) return true;
    }
    return false;
  };
  auto fail = [&](const std::string& what) { throw InputError(file + ":" + std::to_string(lineno), what); };
  if (!next_line(line)) fail("empty workload file");
  std::istringstream h(line);
  std::string kind;
  h >> kind;
  const std::set<std::string> kinds = {"DATA", "MODEL", "HYBRID_DLRM", "HYBRID_DLRM_ENHANCED", "HYBRID_DATA_MODEL",
                                       "HYBRID_MODEL_DATA", "HYBRID_TRANSFORMER", "MICRO"};
  if (!kinds.count(kind)) fail("unknown parallelism '" + kind + "' (expected DATA, MODEL, HYBRID_DLRM, ...)");
  if (kind.rfind("HYBRID_DLRM", 0) == 0) {
    long last_bottom = -1;
    if (!(h >> last_bottom)) fail("HYBRID_DLRM needs the last bottom layer index on the first line");
  }
  if (!next_line(line)) fail("missing layer count");
  long nlayers = 0;
  try {
    nlayers = parse_int(std::string(line.substr(0, line.find_last_not_of(" \t\r") + 1)), "layer count");
  } catch (const InputError&) {
    fail("expected the layer count on line 2");
  }
  if (nlayers < 1) fail("expected a layer count >= 1");
  struct Layer {
    std::string name;
    double fwd, ig, wg, upd;
    CollOp fc, ic, wc;
    bool fn, in_, wn;
    double fb, ib, wb;
  };
  std::vector<Layer> layers;
  for (long i = 0; i < nlayers; ++i) {
    if (!next_line(line)) fail("expected " + std::to_string(nlayers) + " layer lines, found " + std::to_string(i));
    std::istringstream ls(line);
    std::vector<std::string> c;
    std::string tok;
    while (ls >> tok) c.push_back(tok);
    if (c.size() < 12) fail("expected 12 columns (name reserved fwd_compute fwd_comm fwd_bytes ig_compute ig_comm ig_bytes wg_compute wg_comm wg_bytes update), found " + std::to_string(c.size()));
    Layer L;
    L.name = c[0];
    try {
      L.fwd = parse_double(c[2], "fwd compute");
      L.fb = parse_double(c[4], "fwd bytes");
      L.ig = parse_double(c[5], "ig compute");
      L.ib = parse_double(c[7], "ig bytes");
      L.wg = parse_double(c[8], "wg compute");
      L.wb = parse_double(c[10], "wg bytes");
      L.upd = parse_double(c[11], "update time");
    } catch (const InputError& e) {
      fail(std::string("bad number: ") + e.what());
    }
    if (!parse_astra_comm(c[3], L.fc, L.fn) || !parse_astra_comm(c[6], L.ic, L.in_) || !parse_astra_comm(c[9], L.wc, L.wn))
      fail("unknown communication type (expected ALLREDUCE, ALLGATHER, REDUCESCATTER, ALLTOALL or NONE)");
    if (L.fwd < 0 || L.ig < 0 || L.wg < 0 || L.upd < 0 || L.fb < 0 || L.ib < 0 || L.wb < 0) fail("negative value");
    layers.push_back(L);
  }
  Trace tr;
  tr.name = "astra:" + kind;
  tr.world_size = static_cast<std::int32_t>(npus);
  Communicator all;
  all.name = "world";
  for (std::int32_t i = 0; i < tr.world_size; ++i) all.ranks.push_back(i);
  all.category = kind == "DATA" ? "dp" : (kind.rfind("HYBRID_DLRM", 0) == 0 ? "all_to_all" : "tp");
  tr.comms.push_back(all);
  RankTrace rt;
  rt.rank = 0;
  rt.streams = {"compute", "comm", "comm.wg"};
  std::int64_t chain = -1;  // last op of the blocking chain (compute + blocking collectives)
  auto compute = [&](const std::string& name, double cycles) {
    Op op;
    op.kind = OpKind::Compute;
    op.name = name;
    op.category = "compute";
    op.duration_s = std::llround(cycles * cycle_ns) * 1e-9;
    if (chain >= 0) op.deps.push_back(static_cast<std::uint32_t>(chain));
    rt.ops.push_back(op);
    chain = static_cast<std::int64_t>(rt.ops.size() - 1);
  };
  auto coll = [&](const std::string& name, CollOp c, double bytes, bool blocking, const char* cat) {
    Op op;
    op.kind = OpKind::Collective;
    op.stream = blocking ? 1 : 2;
    op.name = name;
    op.category = c == CollOp::AllToAll ? "all_to_all" : cat;
    op.coll = c;
    op.comm = 0;
    op.bytes = bytes;
    if (chain >= 0) op.deps.push_back(static_cast<std::uint32_t>(chain));
    rt.ops.push_back(op);
    if (blocking) chain = static_cast<std::int64_t>(rt.ops.size() - 1);
    return static_cast<std::uint32_t>(rt.ops.size() - 1);
  };
  const char* mp_cat = kind == "DATA" ? "dp" : "tp";
  for (const auto& L : layers) {
    compute(L.name + ".fwd", L.fwd);
    if (!L.fn && L.fb > 0) coll(L.name + ".fwd.comm", L.fc, L.fb, true, mp_cat);
  }
  std::vector<std::uint32_t> wg_ops;
  for (auto it = layers.rbegin(); it != layers.rend(); ++it) {
    const auto& L = *it;
    compute(L.name + ".ig", L.ig);
    if (!L.in_ && L.ib > 0) coll(L.name + ".ig.comm", L.ic, L.ib, true, mp_cat);
    compute(L.name + ".wg", L.wg);
    if (!L.wn && L.wb > 0) {
      wg_ops.push_back(coll(L.name + ".wg.comm", L.wc, L.wb, false, "dp"));
    }
  }
  double upd = 0;
  for (const auto& L : layers) upd += L.upd;
  Op u;
  u.kind = OpKind::Compute;
  u.name = "update";
  u.category = "compute";
  u.duration_s = std::llround(upd * cycle_ns) * 1e-9;
  u.deps = wg_ops;
  u.deps.push_back(static_cast<std::uint32_t>(chain));
  rt.ops.push_back(u);
  tr.ranks.push_back(std::move(rt));
  tr.notes.push_back("astra: imported ASTRA-sim 1.0 " + kind + " workload (" + std::to_string(nlayers) +
                     " layers); rank 0 simulated, collectives over all " + std::to_string(npus) + " ranks; 1 cycle = " +
                     std::to_string(cycle_ns) + " ns");
  check_trace(tr, file);
  return tr;
}

Trace import_astra_file(const std::string& path, const ParamMap& params, const std::string& where) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "cannot open file for reading");
  std::stringstream ss;
  ss << in.rdbuf();
  return import_astra_text(ss.str(), path, params, where);
}

}  // namespace fabricsim::workloads
