#include "workloads/trace.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <tuple>

#include "sim/base/error.hpp"

namespace fabricsim::workloads {

const char* to_string(OpKind k) {
  switch (k) {
    case OpKind::Compute: return "compute";
    case OpKind::Collective: return "collective";
    case OpKind::Send: return "send";
    case OpKind::Recv: return "recv";
  }
  return "?";
}

const char* to_string(CollOp c) {
  switch (c) {
    case CollOp::AllReduce: return "all_reduce";
    case CollOp::AllGather: return "all_gather";
    case CollOp::ReduceScatter: return "reduce_scatter";
    case CollOp::AllToAll: return "all_to_all";
    case CollOp::Broadcast: return "broadcast";
    case CollOp::Reduce: return "reduce";
    case CollOp::AllToAllv: return "all_to_allv";
  }
  return "?";
}

bool parse_coll_op(const std::string& s, CollOp& out) {
  for (int i = 0; i <= static_cast<int>(CollOp::AllToAllv); ++i)
    if (s == to_string(static_cast<CollOp>(i))) {
      out = static_cast<CollOp>(i);
      return true;
    }
  return false;
}

std::size_t Trace::num_ops() const {
  std::size_t n = 0;
  for (const auto& r : ranks) n += r.ops.size();
  return n;
}

namespace {

const std::set<std::string> kCategories = {"compute", "tp", "pp", "dp", "all_to_all", "ep", "other"};

std::string default_category(OpKind k) { return k == OpKind::Compute ? "compute" : "other"; }

std::int64_t nonneg_int(const Json& v, const JsonPath& at, const char* what) {
  if (!v.is_number_integer() || v.get<std::int64_t>() < 0) json_fail(at, std::string("expected ") + what);
  return v.get<std::int64_t>();
}

double nonneg_number(ObjectReader& r, const std::string& key) {
  double x = r.number(key);
  if (!(x >= 0) || !std::isfinite(x)) json_fail(r.path_of(key), "expected a finite number >= 0");
  return x;
}

// "sm_ctas" of a collective / send / recv: an integer in [0, 1024] (optional).
void read_sm_ctas(ObjectReader& r, Op& op) {
  if (!r.has("sm_ctas")) return;
  const std::int64_t v = nonneg_int(r.raw("sm_ctas"), r.path_of("sm_ctas"), "an integer in [0, 1024] (CTAs)");
  if (v > 1024) json_fail(r.path_of("sm_ctas"), "expected an integer in [0, 1024] (CTAs)");
  op.sm_ctas = static_cast<std::int32_t>(v);
}

}  // namespace

Trace trace_from_json(const Json& doc, const std::string& file) {
  JsonPath root{file, ""};
  ObjectReader r(doc, root);
  Trace t;
  std::string format = r.string("format");
  if (format != "fabricsim-trace") json_fail(r.path_of("format"), "expected \"fabricsim-trace\"");
  if (r.integer("version") != 1) json_fail(r.path_of("version"), "expected version 1");
  t.name = r.string_or("name", "");
  t.gpu = r.string_or("gpu", "");
  if (!t.gpu.empty() && !models::is_known_gpu(t.gpu)) models::gpu_spec(t.gpu, r.path_of("gpu").str());
  std::int64_t ws = r.integer("world_size");
  if (ws < 1 || ws > (1 << 24)) json_fail(r.path_of("world_size"), "expected an integer in [1, 16777216]");
  t.world_size = static_cast<std::int32_t>(ws);
  if (const Json* m = r.object_optional("metadata")) {
    for (auto it = m->begin(); it != m->end(); ++it) {
      if (!it->is_number()) json_fail(r.path_of("metadata").child(it.key()), "expected a number");
      t.metadata[it.key()] = it->get<double>();
    }
  }
  if (const Json* p = r.object_optional("params")) {
    for (auto it = p->begin(); it != p->end(); ++it) {
      if (!it->is_string()) json_fail(r.path_of("params").child(it.key()), "expected a string");
      t.params[it.key()] = it->get<std::string>();
    }
  }
  if (const Json* n = r.array_optional("notes")) {
    for (std::size_t i = 0; i < n->size(); ++i) {
      if (!(*n)[i].is_string()) json_fail(r.path_of("notes").index(i), "expected a string");
      t.notes.push_back((*n)[i].get<std::string>());
    }
  }
  // Communicators.
  std::map<std::string, std::int32_t> comm_index;
  if (const Json* cs = r.array_optional("communicators")) {
    for (std::size_t i = 0; i < cs->size(); ++i) {
      JsonPath at = r.path_of("communicators").index(i);
      ObjectReader cr((*cs)[i], at);
      Communicator c;
      c.name = cr.string("name");
      if (comm_index.count(c.name)) json_fail(cr.path_of("name"), "duplicate communicator name '" + c.name + "'");
      const Json& rk = cr.array("ranks");
      if (rk.empty()) json_fail(cr.path_of("ranks"), "expected at least one rank");
      std::set<std::int32_t> seen;
      for (std::size_t k = 0; k < rk.size(); ++k) {
        std::int64_t v = nonneg_int(rk[k], cr.path_of("ranks").index(k), "a rank >= 0");
        if (v >= t.world_size) json_fail(cr.path_of("ranks").index(k), "rank outside [0, world_size)");
        if (!seen.insert(static_cast<std::int32_t>(v)).second)
          json_fail(cr.path_of("ranks").index(k), "duplicate rank in communicator");
        c.ranks.push_back(static_cast<std::int32_t>(v));
      }
      std::int64_t mirrors = cr.integer_or("mirrors", 0);
      if (mirrors < 0) json_fail(cr.path_of("mirrors"), "expected an integer >= 0");
      c.mirrors = static_cast<std::int32_t>(mirrors);
      std::int64_t stride = cr.integer_or("mirror_stride", 1);
      if (stride < 1) json_fail(cr.path_of("mirror_stride"), "expected an integer >= 1");
      c.mirror_stride = static_cast<std::int32_t>(stride);
      for (auto rk2 : c.ranks)
        if (rk2 + static_cast<std::int64_t>(c.mirrors) * c.mirror_stride >= t.world_size)
          json_fail(cr.path_of("mirrors"), "mirror copies would reach rank >= world_size");
      c.collnet_enable = cr.boolean_or("collnet_enable", true);
      c.category = cr.string_or("category", "other");
      if (!kCategories.count(c.category))
        json_fail(cr.path_of("category"), "expected one of compute, tp, pp, dp, all_to_all, ep, other");
      // all_to_allv_matrix and all_to_allv_uniform_matrix: n x n fractions of the op's bytes.
      auto read_matrix = [&](const char* key, std::vector<std::vector<double>>& out) {
        const Json* mx = cr.array_optional(key);
        if (!mx) return;
        const JsonPath mp = cr.path_of(key);
        if (mx->size() != c.ranks.size())
          json_fail(mp, "expected " + std::to_string(c.ranks.size()) + " rows (one per rank), got " +
                            std::to_string(mx->size()));
        for (std::size_t a = 0; a < mx->size(); ++a) {
          const Json& row = (*mx)[a];
          if (!row.is_array() || row.size() != c.ranks.size())
            json_fail(mp.index(a), "expected an array of " + std::to_string(c.ranks.size()) + " numbers >= 0");
          std::vector<double> v;
          for (std::size_t b = 0; b < row.size(); ++b) {
            if (!row[b].is_number() || row[b].get<double>() < 0)
              json_fail(mp.index(a).index(b), "expected a number >= 0 (fraction of the op's bytes)");
            v.push_back(row[b].get<double>());
          }
          out.push_back(std::move(v));
        }
      };
      read_matrix("all_to_allv_matrix", c.a2a_matrix);
      read_matrix("all_to_allv_uniform_matrix", c.a2a_uniform);
      if (!c.a2a_uniform.empty() && c.a2a_matrix.empty())
        json_fail(cr.path_of("all_to_allv_uniform_matrix"), "an \"all_to_allv_matrix\" beside it (the uniform router's "
                                                            "counterpart of that matrix)");
      cr.finish();
      comm_index[c.name] = static_cast<std::int32_t>(t.comms.size());
      t.comms.push_back(std::move(c));
    }
  }
  // Ranks.
  const Json& ranks = r.array("ranks");
  std::set<std::int32_t> rank_seen;
  for (std::size_t ri = 0; ri < ranks.size(); ++ri) {
    JsonPath at = r.path_of("ranks").index(ri);
    ObjectReader rr(ranks[ri], at);
    RankTrace rt;
    std::int64_t rank = rr.integer("rank");
    if (rank < 0 || rank >= t.world_size) json_fail(rr.path_of("rank"), "expected a rank in [0, world_size)");
    rt.rank = static_cast<std::int32_t>(rank);
    if (!rank_seen.insert(rt.rank).second) json_fail(rr.path_of("rank"), "duplicate rank");
    if (const Json* ss = rr.array_optional("streams")) {
      rt.streams.clear();
      for (std::size_t k = 0; k < ss->size(); ++k) {
        if (!(*ss)[k].is_string()) json_fail(rr.path_of("streams").index(k), "expected a stream name");
        rt.streams.push_back((*ss)[k].get<std::string>());
      }
      if (rt.streams.empty() || rt.streams.size() > 1000)
        json_fail(rr.path_of("streams"), "expected 1 to 1000 stream names");
    }
    const Json& ops = rr.array("ops");
    rt.ops.reserve(ops.size());
    for (std::size_t oi = 0; oi < ops.size(); ++oi) {
      JsonPath oat = rr.path_of("ops").index(oi);
      ObjectReader orr(ops[oi], oat);
      Op op;
      std::string type = orr.string("type");
      if (type == "compute") op.kind = OpKind::Compute;
      else if (type == "collective") op.kind = OpKind::Collective;
      else if (type == "send") op.kind = OpKind::Send;
      else if (type == "recv") op.kind = OpKind::Recv;
      else json_fail(orr.path_of("type"), "expected compute, collective, send or recv");
      op.name = orr.string_or("name", "");
      std::string stream = orr.string_or("stream", rt.streams[0]);
      auto sit = std::find(rt.streams.begin(), rt.streams.end(), stream);
      if (sit == rt.streams.end()) json_fail(orr.path_of("stream"), "stream '" + stream + "' is not in this rank's streams");
      op.stream = static_cast<std::uint16_t>(sit - rt.streams.begin());
      if (const Json* d = orr.array_optional("deps")) {
        for (std::size_t k = 0; k < d->size(); ++k) {
          std::int64_t v = nonneg_int((*d)[k], orr.path_of("deps").index(k), "an op index >= 0");
          if (v >= static_cast<std::int64_t>(ops.size()) || v == static_cast<std::int64_t>(oi))
            json_fail(orr.path_of("deps").index(k), "expected the index of another op of this rank");
          op.deps.push_back(static_cast<std::uint32_t>(v));
        }
      }
      std::string comm_category;
      switch (op.kind) {
        case OpKind::Compute: {
          bool has_dur = orr.has("duration_ns");
          if (has_dur) {
            std::int64_t ns = nonneg_int(orr.raw("duration_ns"), orr.path_of("duration_ns"), "an integer >= 0 (nanoseconds)");
            op.duration_s = static_cast<double>(ns) * 1e-9;
          }
          if (orr.has("kernel_wait_ns"))
            op.kernel_wait_s = static_cast<double>(nonneg_int(orr.raw("kernel_wait_ns"), orr.path_of("kernel_wait_ns"),
                                                              "an integer >= 0 (nanoseconds)")) * 1e-9;
          if (orr.has("flops")) op.flops = nonneg_number(orr, "flops");
          if (orr.has("bytes")) op.mem_bytes = nonneg_number(orr, "bytes");
          std::string cls = orr.string_or("class", "gemm");
          if (!models::parse_op_class(cls, op.op_class))
            json_fail(orr.path_of("class"), "expected gemm, attention, elementwise or embedding");
          if (!has_dur && op.flops == 0 && op.mem_bytes == 0)
            json_fail(oat, "a compute op needs duration_ns, or flops and/or bytes");
          break;
        }
        case OpKind::Collective: {
          std::string c = orr.string("op");
          if (!parse_coll_op(c, op.coll))
            json_fail(orr.path_of("op"), "expected all_reduce, all_gather, reduce_scatter, all_to_all, broadcast or reduce");
          std::string cname = orr.string("comm");
          auto cit = comm_index.find(cname);
          if (cit == comm_index.end()) json_fail(orr.path_of("comm"), "unknown communicator '" + cname + "'");
          op.comm = cit->second;
          const auto& members = t.comms[op.comm].ranks;
          if (std::find(members.begin(), members.end(), rt.rank) == members.end())
            json_fail(orr.path_of("comm"), "rank " + std::to_string(rt.rank) + " is not a member of '" + cname + "'");
          op.bytes = nonneg_number(orr, "bytes");
          op.algorithm = orr.string_or("algorithm", "");
          read_sm_ctas(orr, op);
          comm_category = t.comms[op.comm].category;
          break;
        }
        case OpKind::Send:
        case OpKind::Recv: {
          std::int64_t p = orr.integer("peer");
          if (p < 0 || p >= t.world_size || p == rt.rank)
            json_fail(orr.path_of("peer"), "expected another rank in [0, world_size)");
          op.peer = static_cast<std::int32_t>(p);
          op.tag = orr.integer_or("tag", 0);
          op.bytes = nonneg_number(orr, "bytes");
          read_sm_ctas(orr, op);
          break;
        }
      }
      op.category = orr.string_or("category", comm_category.empty() ? default_category(op.kind) : comm_category);
      if (!kCategories.count(op.category))
        json_fail(orr.path_of("category"), "expected one of compute, tp, pp, dp, all_to_all, ep, other");
      orr.finish();
      rt.ops.push_back(std::move(op));
    }
    rr.finish();
    t.ranks.push_back(std::move(rt));
  }
  r.finish();
  std::sort(t.ranks.begin(), t.ranks.end(), [](const RankTrace& a, const RankTrace& b) { return a.rank < b.rank; });
  check_trace(t, file);
  return t;
}

Trace load_trace_file(const std::string& path) { return trace_from_json(load_json_file(path), path); }

Json trace_to_json(const Trace& t) {
  Json j = Json::object();
  j["format"] = "fabricsim-trace";
  j["version"] = 1;
  j["name"] = t.name;
  j["world_size"] = t.world_size;
  if (!t.gpu.empty()) j["gpu"] = t.gpu;
  j["metadata"] = Json::object();
  for (const auto& [k, v] : t.metadata) j["metadata"][k] = v;
  j["params"] = Json::object();
  for (const auto& [k, v] : t.params) j["params"][k] = v;
  j["notes"] = t.notes;
  Json comms = Json::array();
  for (const auto& c : t.comms) {
    Json cj = {{"name", c.name}, {"ranks", c.ranks}, {"category", c.category}};
    if (c.mirrors) {
      cj["mirrors"] = c.mirrors;
      cj["mirror_stride"] = c.mirror_stride;
    }
    if (!c.a2a_matrix.empty()) cj["all_to_allv_matrix"] = c.a2a_matrix;
    if (!c.a2a_uniform.empty()) cj["all_to_allv_uniform_matrix"] = c.a2a_uniform;
    if (!c.collnet_enable) cj["collnet_enable"] = false;
    comms.push_back(std::move(cj));
  }
  j["communicators"] = std::move(comms);
  Json ranks = Json::array();
  for (const auto& rt : t.ranks) {
    Json ops = Json::array();
    for (const auto& op : rt.ops) {
      Json o = Json::object();
      o["type"] = to_string(op.kind);
      if (!op.name.empty()) o["name"] = op.name;
      o["stream"] = rt.streams[op.stream];
      o["category"] = op.category;
      if (!op.deps.empty()) o["deps"] = op.deps;
      switch (op.kind) {
        case OpKind::Compute:
          if (op.duration_s >= 0) o["duration_ns"] = static_cast<std::int64_t>(std::llround(op.duration_s * 1e9));
          if (op.kernel_wait_s >= 0) o["kernel_wait_ns"] = static_cast<std::int64_t>(std::llround(op.kernel_wait_s * 1e9));
          if (op.flops > 0) o["flops"] = op.flops;
          if (op.mem_bytes > 0) o["bytes"] = op.mem_bytes;
          if (op.duration_s < 0 || op.op_class != models::OpClass::Gemm) o["class"] = models::to_string(op.op_class);
          break;
        case OpKind::Collective:
          o["op"] = to_string(op.coll);
          o["comm"] = t.comms[op.comm].name;
          o["bytes"] = op.bytes;
          if (!op.algorithm.empty()) o["algorithm"] = op.algorithm;
          if (op.sm_ctas >= 0) o["sm_ctas"] = op.sm_ctas;
          break;
        case OpKind::Send:
        case OpKind::Recv:
          o["peer"] = op.peer;
          o["tag"] = op.tag;
          o["bytes"] = op.bytes;
          if (op.sm_ctas >= 0) o["sm_ctas"] = op.sm_ctas;
          break;
      }
      ops.push_back(std::move(o));
    }
    ranks.push_back({{"rank", rt.rank}, {"streams", rt.streams}, {"ops", std::move(ops)}});
  }
  j["ranks"] = std::move(ranks);
  return j;
}

namespace {
// "rank 1 op 7 'name' (send)", plus where the op came from when the importer can say (a file and node id).
std::string op_label(const RankTrace& rt, std::size_t i, const OpLocator& locate) {
  const Op& op = rt.ops[i];
  return "rank " + std::to_string(rt.rank) + " op " + std::to_string(i) +
         (op.name.empty() ? "" : " '" + text_excerpt(op.name) + "'") + " (" + to_string(op.kind) + ")" +
         (locate ? " at " + locate(rt.rank, i) : "");
}

// Bytes as an integer when they are one (what users write), else with full precision.
std::string bytes_text(double b) {
  char buf[40];
  if (b == std::floor(b) && std::fabs(b) < 9.007199254740992e15) std::snprintf(buf, sizeof buf, "%.0f", b);
  else std::snprintf(buf, sizeof buf, "%.17g", b);
  return std::string(buf) + " bytes";
}
}  // namespace

void check_trace(const Trace& t, const std::string& where, const OpLocator& locate) {
  // An error is located at the first op it names when the importer can locate ops, else at `where`.
  auto at = [&](const RankTrace& rt, std::size_t i) { return locate ? locate(rt.rank, i) : where; };
  std::map<std::int32_t, std::size_t> index;
  for (std::size_t i = 0; i < t.ranks.size(); ++i) index[t.ranks[i].rank] = i;
  // Cycles: Kahn's algorithm over deps + stream order, per rank.
  for (const auto& rt : t.ranks) {
    std::size_t n = rt.ops.size();
    std::vector<std::uint32_t> indeg(n, 0);
    std::vector<std::vector<std::uint32_t>> succ(n);
    std::vector<std::int64_t> last(rt.streams.size(), -1);
    for (std::size_t i = 0; i < n; ++i) {
      for (auto d : rt.ops[i].deps) {
        succ[d].push_back(static_cast<std::uint32_t>(i));
        ++indeg[i];
      }
      auto& l = last[rt.ops[i].stream];
      if (l >= 0) {
        succ[l].push_back(static_cast<std::uint32_t>(i));
        ++indeg[i];
      }
      l = static_cast<std::int64_t>(i);
    }
    std::vector<std::uint32_t> q;
    for (std::size_t i = 0; i < n; ++i)
      if (!indeg[i]) q.push_back(static_cast<std::uint32_t>(i));
    std::size_t done = 0;
    while (!q.empty()) {
      auto u = q.back();
      q.pop_back();
      ++done;
      for (auto v : succ[u])
        if (--indeg[v] == 0) q.push_back(v);
    }
    if (done != n) {
      std::string ops;
      int shown = 0;
      std::size_t first = n;
      for (std::size_t i = 0; i < n && shown < 4; ++i)
        if (indeg[i]) {
          if (first == n) first = i;
          ops += (shown ? "; " : "") + op_label(rt, i, locate);
          ++shown;
        }
      throw InputError(at(rt, first), "dependency cycle on rank " + std::to_string(rt.rank) +
                                          " (through deps and stream order) involving " + ops);
    }
  }
  // Send/recv matching by (src, dst, tag): equal counts, and the k-th send (in the sender's program order)
  // and the k-th recv (in the receiver's) move the same number of bytes. Peers must be simulated.
  struct P2p {
    std::vector<std::pair<const RankTrace*, std::size_t>> sends, recvs;
  };
  std::map<std::tuple<std::int32_t, std::int32_t, std::int64_t>, P2p> p2p;
  for (const auto& rt : t.ranks)
    for (std::size_t i = 0; i < rt.ops.size(); ++i) {
      const Op& op = rt.ops[i];
      if (op.kind != OpKind::Send && op.kind != OpKind::Recv) continue;
      if (!index.count(op.peer))
        throw InputError(at(rt, i), op_label(rt, i, locate) + ": peer rank " + std::to_string(op.peer) +
                                        " is not simulated in this trace (point-to-point peers must be listed ranks)");
      const bool send = op.kind == OpKind::Send;
      auto key = send ? std::make_tuple(rt.rank, op.peer, op.tag) : std::make_tuple(op.peer, rt.rank, op.tag);
      (send ? p2p[key].sends : p2p[key].recvs).emplace_back(&rt, i);
    }
  for (const auto& [k, p] : p2p) {
    const std::int64_t diff = static_cast<std::int64_t>(p.sends.size()) - static_cast<std::int64_t>(p.recvs.size());
    if (diff != 0) {
      // The first op without a partner.
      const auto& [rt, i] = diff > 0 ? p.sends[p.recvs.size()] : p.recvs[p.sends.size()];
      throw InputError(at(*rt, i), std::string(diff > 0 ? "unmatched send" : "unmatched recv") + ": " +
                                       std::to_string(std::abs(diff)) + " more " + (diff > 0 ? "sends" : "recvs") + " than " +
                                       (diff > 0 ? "recvs" : "sends") + " from rank " + std::to_string(std::get<0>(k)) +
                                       " to rank " + std::to_string(std::get<1>(k)) + " tag " + std::to_string(std::get<2>(k)) +
                                       " (first without a partner: " + op_label(*rt, i, locate) + ")");
    }
    for (std::size_t n = 0; n < p.sends.size(); ++n) {
      const auto& [srt, si] = p.sends[n];
      const auto& [rrt, ri] = p.recvs[n];
      const double sb = srt->ops[si].bytes, rb = rrt->ops[ri].bytes;
      if (sb != rb)
        throw InputError(at(*rrt, ri), "send/recv size mismatch (message #" + std::to_string(n + 1) + " from rank " +
                                           std::to_string(std::get<0>(k)) + " to rank " + std::to_string(std::get<1>(k)) +
                                           " tag " + std::to_string(std::get<2>(k)) + "): " + op_label(*rrt, ri, locate) +
                                           " receives " + bytes_text(rb) + ", " + op_label(*srt, si, locate) + " sends " +
                                           bytes_text(sb));
    }
  }
  // Collectives: every simulated member calls each communicator the same number of times, and the k-th call
  // (in each rank's program order, the order NCCL requires ranks to issue calls on one communicator) agrees in
  // operation and bytes. Roots are not part of the trace format (broadcast and reduce are timed root-agnostic).
  std::vector<std::map<std::int32_t, std::vector<std::uint32_t>>> calls(t.comms.size());
  for (const auto& rt : t.ranks)
    for (std::size_t i = 0; i < rt.ops.size(); ++i)
      if (rt.ops[i].kind == OpKind::Collective) calls[rt.ops[i].comm][rt.rank].push_back(static_cast<std::uint32_t>(i));
  static const std::vector<std::uint32_t> kNone;
  for (std::size_t c = 0; c < t.comms.size(); ++c) {
    const std::vector<std::uint32_t>* ref = nullptr;
    std::int32_t ref_rank = -1;
    for (auto m : t.comms[c].ranks) {
      if (!index.count(m)) continue;
      auto it = calls[c].find(m);
      const auto& mine = it == calls[c].end() ? kNone : it->second;
      if (!ref) {
        ref = &mine;
        ref_rank = m;
        continue;
      }
      if (mine.size() != ref->size()) {
        // Located at the first call the other rank lacks.
        const bool ref_more = ref->size() > mine.size();
        const RankTrace& more = t.ranks[index[ref_more ? ref_rank : m]];
        const std::size_t first = ref_more ? (*ref)[mine.size()] : mine[ref->size()];
        throw InputError(at(more, first), "collective mismatch on communicator '" + text_excerpt(t.comms[c].name) + "': rank " +
                                              std::to_string(ref_rank) + " calls it " + std::to_string(ref->size()) +
                                              " times, rank " + std::to_string(m) + " " + std::to_string(mine.size()) +
                                              " times (first call without a partner: " + op_label(more, first, locate) + ")");
      }
      const RankTrace& ra = t.ranks[index[ref_rank]];
      const RankTrace& rb = t.ranks[index[m]];
      for (std::size_t k = 0; k < mine.size(); ++k) {
        const Op& a = ra.ops[(*ref)[k]];
        const Op& b = rb.ops[mine[k]];
        if (a.coll == b.coll && a.bytes == b.bytes) continue;
        throw InputError(at(rb, mine[k]), "collective mismatch on communicator '" + text_excerpt(t.comms[c].name) +
                                              "' call #" + std::to_string(k + 1) + ": " + op_label(ra, (*ref)[k], locate) +
                                              " is " + to_string(a.coll) + " of " + bytes_text(a.bytes) + ", " +
                                              op_label(rb, mine[k], locate) + " is " + to_string(b.coll) + " of " +
                                              bytes_text(b.bytes));
      }
    }
  }
}

}  // namespace fabricsim::workloads
