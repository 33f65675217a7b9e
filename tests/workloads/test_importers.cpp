// Importers of other tools' workloads (workloads/chakra.cpp, workloads/astra.cpp) against hand-made traces
// whose answer is known and against every real file in tests/data/foreign-workloads (README there).
#include <doctest/doctest.h>

#include "workloads_test_util.hpp"
#include "chakra_et_encode.hpp"

#include <filesystem>
#include <fstream>
#include <set>
#include <tuple>
#include <string>

#include "workloads/importers.hpp"

using namespace fabricsim;
using namespace fabricsim::workloads;
namespace fs = std::filesystem;

namespace {

const std::string kFw = std::string(FABRICSIM_SOURCE_DIR) + "/tests/data/foreign-workloads/";

fs::path scratch(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("fabricsim_import_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void write(const fs::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary);
  f << text;
}

ChakraOptions quiet() {
  ChakraOptions o;
  o.quiet = true;
  return o;
}

// True when op `to` of `rt` is reachable from op `from` through deps and stream order.
bool ordered(const RankTrace& rt, std::uint32_t from, std::uint32_t to) {
  std::vector<std::vector<std::uint32_t>> succ(rt.ops.size());
  std::vector<std::int64_t> last(rt.streams.size(), -1);
  for (std::uint32_t i = 0; i < rt.ops.size(); ++i) {
    for (auto d : rt.ops[i].deps) succ[d].push_back(i);
    auto& l = last[rt.ops[i].stream];
    if (l >= 0) succ[static_cast<std::uint32_t>(l)].push_back(i);
    l = i;
  }
  std::vector<std::uint32_t> stack{from};
  std::set<std::uint32_t> seen;
  while (!stack.empty()) {
    auto u = stack.back();
    stack.pop_back();
    if (u == to) return true;
    if (!seen.insert(u).second) continue;
    for (auto s : succ[u]) stack.push_back(s);
  }
  return false;
}

std::uint32_t op_named(const RankTrace& rt, const std::string& name) {
  for (std::uint32_t i = 0; i < rt.ops.size(); ++i)
    if (rt.ops[i].name == name) return i;
  FAIL("no op " << name);
  return 0;
}

}  // namespace

TEST_CASE("chakra JSON: runtime is microseconds, deps are the only ordering, keys real traces carry are accepted") {
  fs::path d = scratch("json");
  // Two ranks: a 100 us GEMM, then a 1 MiB all-reduce, then a 50 us GEMM; an independent 80 us op on rank 0
  // (no deps: it must not be ordered after or before the others).
  const std::string r0 = R"({"workload_graph":[
    {"Id":1,"Name":"gemm","NodeType":4,"runtime":100,"data_deps":[],"is_cpu_op":false,"ctrlDeps":[]},
    {"Id":2,"Name":"ar","NodeType":7,"comm_type":0,"comm_size":1048576,"data_deps":[1],"involved_dim":[true]},
    {"Id":3,"Name":"tail","NodeType":4,"runtime":50,"data_deps":[2],"tid":7},
    {"Id":4,"Name":"side","NodeType":4,"runtime":80,"data_deps":[]}],
    "ngpus":2,"workload_name":"x"})";
  const std::string r1 = R"({"workload_graph":[
    {"Id":1,"Name":"gemm","NodeType":4,"runtime":100,"data_deps":[]},
    {"Id":2,"Name":"ar","NodeType":7,"comm_type":0,"comm_size":1048576,"data_deps":[1]},
    {"Id":3,"Name":"tail","NodeType":4,"runtime":50,"data_deps":[2]}]})";
  write(d / "t.0.json", r0);
  write(d / "t.1.json", r1);
  Trace t = import_chakra((d / "t").string(), quiet());
  CHECK(t.world_size == 2);
  REQUIRE(t.ranks.size() == 2);
  const RankTrace& a = t.ranks[0];
  CHECK(a.ops[op_named(a, "gemm")].duration_s == doctest::Approx(100e-6));
  CHECK(a.ops[op_named(a, "tail")].duration_s == doctest::Approx(50e-6));
  const Op& ar = a.ops[op_named(a, "ar")];
  CHECK(ar.kind == OpKind::Collective);
  CHECK(ar.bytes == 1048576);
  CHECK(t.comms[static_cast<std::size_t>(ar.comm)].ranks == std::vector<std::int32_t>{0, 1});
  // No invented order: "side" is independent of the chain, in both directions.
  const auto side = op_named(a, "side"), gemm = op_named(a, "gemm"), tail = op_named(a, "tail");
  CHECK(ordered(a, gemm, tail));
  CHECK_FALSE(ordered(a, side, tail));
  CHECK_FALSE(ordered(a, gemm, side));
  // Unused keys are listed, not rejected.
  bool listed = false;
  for (const auto& n : t.notes) listed |= n.find("tid") != std::string::npos && n.find("not used") != std::string::npos;
  CHECK(listed);
}

TEST_CASE("chakra: a dependency cycle and an unmatched collective are errors naming node ids and the file") {
  fs::path d = scratch("cycle");
  write(d / "c.0.json", R"({"workload_graph":[
    {"Id":7,"Name":"a","NodeType":4,"runtime":1,"data_deps":[9]},
    {"Id":8,"Name":"b","NodeType":4,"runtime":1,"data_deps":[7]},
    {"Id":9,"Name":"c","NodeType":4,"runtime":1,"data_deps":[8]}]})");
  std::string e = error_of([&] { import_chakra((d / "c").string(), quiet()); });
  CHECK(e.find("c.0.json") != std::string::npos);
  CHECK(e.find("cycle") != std::string::npos);
  CHECK(e.find("7 -> 8 -> 9 -> 7") != std::string::npos);
  // A ctrl_deps edge that closes a cycle with data_deps is not an error: ordered by data_deps (noted).
  write(d / "k.0.json", R"({"workload_graph":[
    {"Id":1,"Name":"parent","NodeType":4,"runtime":10,"data_deps":[2]},
    {"Id":2,"Name":"child","NodeType":4,"runtime":5,"data_deps":[],"ctrlDeps":[1]}]})");
  Trace k = import_chakra((d / "k").string(), quiet());
  CHECK(ordered(k.ranks[0], op_named(k.ranks[0], "child"), op_named(k.ranks[0], "parent")));
  // Rank 1 never calls the all-reduce rank 0 waits in.
  write(d / "u.0.json", R"({"workload_graph":[{"Id":1,"Name":"ar","NodeType":7,"comm_type":0,"comm_size":64}]})");
  write(d / "u.1.json", R"({"workload_graph":[{"Id":1,"Name":"g","NodeType":4,"runtime":3}]})");
  e = error_of([&] { import_chakra((d / "u").string(), quiet()); });
  CHECK(e.find("u.0.json") != std::string::npos);
  CHECK(e.find("ar") != std::string::npos);
  // Structural errors name the node.
  write(d / "s.0.json", R"({"workload_graph":[{"Id":5,"Name":"x","NodeType":7,"comm_type":42,"comm_size":64}]})");
  e = error_of([&] { import_chakra((d / "s").string(), quiet()); });
  CHECK(e.find("s.0.json: node 5") != std::string::npos);
  CHECK(e.find("comm_type 42") != std::string::npos);
}

TEST_CASE("chakra: process groups and involved_dim give each collective its own communicator") {
  fs::path d = scratch("pg");
  for (int r = 0; r < 4; ++r)
    write(d / ("p." + std::to_string(r) + ".json"),
          std::string(R"({"workload_graph":[{"Id":1,"Name":"tp","NodeType":7,"comm_type":0,"comm_size":4096,"pg_name":")") +
              (r < 2 ? "a" : "b") + R"("},{"Id":2,"Name":"dim","NodeType":7,"comm_type":2,"comm_size":4096,"involved_dim":[false,true],"data_deps":[1]}]})");
  write(d / "groups.json", R"({"a":[0,1],"b":[2,3]})");
  ChakraOptions o = quiet();
  o.comm_group_file = (d / "groups.json").string();
  o.dims = {2, 2};
  Trace t = import_chakra((d / "p").string(), o);
  auto comm_of = [&](int rank, const std::string& name) {
    const auto& rt = t.ranks[static_cast<std::size_t>(rank)];
    return t.comms[static_cast<std::size_t>(rt.ops[op_named(rt, name)].comm)].ranks;
  };
  CHECK(comm_of(0, "tp") == std::vector<std::int32_t>{0, 1});
  CHECK(comm_of(3, "tp") == std::vector<std::int32_t>{2, 3});
  // dims 2x2, dimension 1 involved: ranks sharing dimension-0 coordinate.
  CHECK(comm_of(0, "dim") == std::vector<std::int32_t>{0, 2});
  CHECK(comm_of(1, "dim") == std::vector<std::int32_t>{1, 3});
  // Without the file, groups are the ranks that call them.
  ChakraOptions o2 = quiet();
  o2.dims = {2, 2};
  Trace t2 = import_chakra((d / "p").string(), o2);
  const auto& rt2 = t2.ranks[2];
  CHECK(t2.comms[static_cast<std::size_t>(rt2.ops[op_named(rt2, "tp")].comm)].ranks == std::vector<std::int32_t>{2, 3});
  // involved_dim selecting a subset without the dimensions: all ranks, and said so.
  Trace t3 = import_chakra((d / "p").string(), quiet());
  const auto& rt3 = t3.ranks[0];
  CHECK(t3.comms[static_cast<std::size_t>(rt3.ops[op_named(rt3, "dim")].comm)].ranks.size() == 4);
  bool said = false;
  for (const auto& n : t3.notes) said |= n.find("involved_dim") != std::string::npos;
  CHECK(said);
}

TEST_CASE("chakra .et and chakra_jsonizer files: ASTRA-sim microbenchmarks, the custom ring, a PyTorch-converted trace") {
  Trace ar = import_chakra(kFw + "chakra-et/astra-sim-microbench-all_reduce-8npus_1MB/all_reduce", quiet());
  CHECK(ar.world_size == 8);
  REQUIRE(ar.ranks.size() == 8);
  for (const auto& rt : ar.ranks) {
    REQUIRE(rt.ops.size() == 1);
    CHECK(rt.ops[0].kind == OpKind::Collective);
    CHECK(rt.ops[0].coll == CollOp::AllReduce);
    CHECK(rt.ops[0].bytes == 1048576);
  }
  // A folder holding one set of rank files reads as that set.
  CHECK(import_chakra(kFw + "chakra-et/astra-sim-microbench-all_reduce-8npus_1MB", quiet()).ranks.size() == 8);
  // The jsonizer's protobuf-JSON objects read as the same trace as the .et files they came from.
  Trace a2a = import_chakra(kFw + "chakra-et/astra-sim-microbench-all_to_all-4npus_1MB/all_to_all", quiet());
  Trace js = import_chakra(kFw + "chakra-jsonizer/astra-sim-microbench-all_to_all-4npus_1MB/all_to_all", quiet());
  CHECK(trace_to_json(a2a).dump() != "");
  Json ja = trace_to_json(a2a), jj = trace_to_json(js);
  ja.erase("name");
  jj.erase("name");
  CHECK(ja == jj);
  CHECK(js.ranks[2].ops[0].coll == CollOp::AllToAll);
  // MSCCL ring lowered to sends/recvs: 14 of each per rank, peers are the ring neighbours.
  Trace ring = import_chakra(kFw + "chakra-et/astra-sim-custom-ring-allreduce-8npus-1MB/custom_allreduce", quiet());
  REQUIRE(ring.ranks.size() == 8);
  int sends = 0, recvs = 0, comps = 0;
  for (const auto& op : ring.ranks[3].ops) {
    sends += op.kind == OpKind::Send;
    recvs += op.kind == OpKind::Recv;
    comps += op.kind == OpKind::Compute;
    if (op.kind == OpKind::Send) CHECK(op.peer == 4);
    if (op.kind == OpKind::Recv) CHECK(op.peer == 2);
  }
  CHECK(sends == 14);
  CHECK(recvs == 14);
  CHECK(comps == 7);
  // PyTorch-converted rank 0: every node imported; host-side c10d collectives run as timed ops; the 5
  // all-reduces and 2 broadcasts with comm_type are collectives.
  Trace pt = import_chakra(kFw + "chakra-et/chakra-feeder-test/chakra", quiet());
  REQUIRE(pt.ranks.size() == 1);
  CHECK(pt.ranks[0].ops.size() == 3664);
  int colls = 0;
  double longest = 0;
  for (const auto& op : pt.ranks[0].ops) {
    colls += op.kind == OpKind::Collective;
    if (op.kind == OpKind::Compute) longest = std::max(longest, op.duration_s);
  }
  CHECK(colls == 7);
  CHECK(longest > 1e-3);  // microseconds, not nanoseconds: the file's longest op is milliseconds long
  // With the job's GPU count given, collectives span 8 ranks (rank 0 simulated, the others stand in).
  ChakraOptions o = quiet();
  o.npus = 8;
  Trace pt8 = import_chakra(kFw + "chakra-et/chakra-feeder-test/chakra", o);
  CHECK(pt8.world_size == 8);
  // Chakra JSON cut from the same trace: ngpus 8, ctrlDeps to absent nodes dropped.
  Trace small = import_chakra(kFw + "chakra-json/chakra-json-feeder-test-small/small_chakra.0.json", quiet());
  CHECK(small.world_size == 8);
  CHECK(small.ranks[0].ops.size() == 7);
  // A PyTorch host trace and a gzip file are named for what they are.
  CHECK(error_of([] { import_chakra(kFw + "pytorch-et/chakra-unit-test/1.0.2-chakra.0.0.4.json", quiet()); })
            .find("PyTorch execution trace") != std::string::npos);
}

TEST_CASE("ASTRA-sim 1.0 text: policies, groups, units") {
  const std::string dp =
      "DATA\n2\n"
      "conv1 -1 1000 ALLGATHER 64 2000 NONE 0 3000 ALLREDUCE 1048576 10\n"
      "fc2 -1 500 NONE 0 600 NONE 0 700 ALLREDUCE 2097152 10\n";
  Trace t = import_astra_text(dp, "w.txt", {{"npus", "16"}}, "--param");
  CHECK(t.world_size == 16);
  REQUIRE(t.ranks.size() == 1);
  int colls = 0;
  double compute = 0;
  for (const auto& op : t.ranks[0].ops) {
    colls += op.kind == OpKind::Collective;
    if (op.kind == OpKind::Compute) compute += op.duration_s;
  }
  CHECK(colls == 2);  // DATA: the forward all-gather involves no dimension (ASTRA-sim 1.0) and is not run
  CHECK(compute == doctest::Approx((1000 + 500 + 2000 + 600 + 3000 + 700 + 20) * 1e-9));  // cycles at 1 GHz
  CHECK(error_of([&] { import_astra_text("PIPELINE\n1\n", "w.txt", {{"npus", "2"}}, "--param"); }).find("w.txt:1") !=
        std::string::npos);
  CHECK(error_of([&] { import_astra_text(dp, "w.txt", {}, "--param"); }).find("npus") != std::string::npos);
  CHECK(error_of([&] { import_astra_text("DATA\n1\nl -1 1 BOGUS 1 1 NONE 0 1 NONE 0 1\n", "w.txt", {{"npus", "2"}}, "--param"); })
            .find("w.txt:3") != std::string::npos);
  // Transformer with model_parallel_NPU_group: fwd/ig on the TP group, wg on the DP group.
  Trace tr = import_astra_text(
      "HYBRID_TRANSFORMER model_parallel_NPU_group: 4\n1\nq -1 10 ALLREDUCE 100 10 ALLREDUCE 200 10 ALLREDUCE 300 1\n",
      "t.txt", {{"npus", "32"}}, "--param");
  std::map<double, std::size_t> group_of_bytes;
  for (const auto& op : tr.ranks[0].ops)
    if (op.kind == OpKind::Collective) group_of_bytes[op.bytes] = tr.comms[static_cast<std::size_t>(op.comm)].ranks.size();
  CHECK(group_of_bytes[100] == 4);
  CHECK(group_of_bytes[200] == 4);
  CHECK(group_of_bytes[300] == 8);
  // HYBRID_DATA_MODEL: model-parallel collectives inside network dimension 0 (8 GPUs per server by
  // default), data-parallel ones across; HYBRID_MODEL_DATA the reverse (ASTRA-sim decode_involved_dimensions).
  const std::string layer = "\n1\nl -1 10 ALLGATHER 100 10 ALLREDUCE 200 10 ALLREDUCE 300 1\n";
  for (const auto& [pol, mp, dp] : {std::tuple{"HYBRID_DATA_MODEL", 8, 4}, std::tuple{"HYBRID_MODEL_DATA", 4, 8}}) {
    CAPTURE(pol);
    Trace h = import_astra_text(std::string(pol) + layer, "h.txt", {{"npus", "32"}}, "--param");
    std::map<double, std::size_t> g;
    for (const auto& op : h.ranks[0].ops)
      if (op.kind == OpKind::Collective) g[op.bytes] = h.comms[static_cast<std::size_t>(op.comm)].ranks.size();
    CHECK(g[100] == static_cast<std::size_t>(mp));
    CHECK(g[300] == static_cast<std::size_t>(dp));
  }
}

TEST_CASE("SimAI / AICB text: header keys, EP comm types, checkpoints, every shipped file") {
  Trace ep = import_astra_file(kFw + "simai-text/simai-example-workload_ep_test.txt", {}, "--param");
  CHECK(ep.world_size == 32);  // all_gpus: 32
  std::map<std::string, std::size_t> sizes;
  for (const auto& c : ep.comms) sizes[c.name] = c.ranks.size();
  CHECK(sizes["tp"] == 4);
  CHECK(sizes["dp"] == 8);
  CHECK(sizes["ep"] == 4);
  CHECK(sizes["dp_ep"] == 2);
  bool a2a_on_ep = false;
  for (const auto& op : ep.ranks[0].ops)
    if (op.kind == OpKind::Collective && op.coll == CollOp::AllToAll)
      a2a_on_ep |= ep.comms[static_cast<std::size_t>(op.comm)].name == "ep";
  CHECK(a2a_on_ep);
  // npus given explicitly wins over all_gpus (said in the notes); groups must still divide it.
  CHECK(error_of([] { import_astra_file(kFw + "simai-text/simai-example-workload_ep_test.txt", {{"npus", "20"}}, "--param"); })
            .find("multiple") != std::string::npos);
  // Checkpointed layers recompute their forward in backward.
  const std::string ck =
      "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 2 checkpoints: 1 0 checkpoint_initiates: 1 1\n2\n"
      "a -1 100 NONE 0 1 NONE 0 1 NONE 0 0\nb -1 200 NONE 0 1 NONE 0 1 NONE 0 0\n";
  Trace c = import_astra_text(ck, "ck.txt", {{"npus", "4"}}, "--param");
  int recomputed = 0;
  for (const auto& op : c.ranks[0].ops) recomputed += op.name.find("recompute") != std::string::npos;
  CHECK(recomputed == 2);  // layers 0 and 1 rerun from the checkpoint at layer 0
  // Per-layer policies (HYBRID_CUSTOMIZED's 13th column).
  Trace cu = import_astra_file(kFw + "astra-sim-1.0-text/sample_per_layer_parallel_HybridCustomized.txt", {{"npus", "64"}}, "--param");
  CHECK(cu.world_size == 64);
  // Every shipped ASTRA-sim / SimAI file imports (ranks from the manifest where the file does not say).
  const std::map<std::string, std::string> ranks = {
      {"astra-sim-1.0-text/DLRM_HybridParallel.txt", "64"}, {"astra-sim-1.0-text/MLP_HybridParallel_Data_Model.txt", "64"},
      {"astra-sim-1.0-text/Transformer_HybridParallel.txt", "64"}, {"astra-sim-1.0-text/microAllReduce.txt", "64"},
      {"simai-text/aicb-micro_test-all_reduce.txt", "8"},
      {"simai-text/aicb-model_workload-G13B-M1-C01_GPT13B_megatron_tp8_pp1_mbs1_A100.txt", "128"},
      {"simai-text/aicb-model_workload-L7B-D1-C02_Llama7B_deepspeed_zero3_A100.txt", "128"},
      {"simai-text/simai-example-microAllReduce.txt", ""}, {"simai-text/simai-example-workload_gpt7b_64g.txt", ""},
      {"simai-text/simai-example-workload_micro_allreduce.txt", ""}};
  for (const auto& [f, n] : ranks) {
    CAPTURE(f);
    ParamMap p;
    if (!n.empty()) p["npus"] = n;
    Trace w;
    CHECK(error_of([&] { w = import_astra_file(kFw + f, p, "--param"); }) == "");
    CHECK(w.ranks.size() == 1);
    CHECK(w.num_ops() > 0);
  }
}

TEST_CASE("chakra .et framing: a file without GlobalMetadata, and a truncated file") {
  fs::path d = scratch("et");
  // Node{id 1, name "g", type COMP_NODE, duration_micros 7}, varint32-length-prefixed, no GlobalMetadata.
  const std::string node = std::string("\x08\x01\x12\x01g\x18\x04\x38\x07", 9);
  write(d / "n.0.et", std::string(1, static_cast<char>(node.size())) + node);
  Trace t = import_chakra((d / "n").string(), quiet());
  REQUIRE(t.ranks[0].ops.size() == 1);
  CHECK(t.ranks[0].ops[0].name == "g");
  CHECK(t.ranks[0].ops[0].duration_s == doctest::Approx(7e-6));
  // A length prefix claiming more bytes than the file holds.
  write(d / "b.0.et", std::string(1, static_cast<char>(node.size() + 5)) + node);
  const std::string e = error_of([&] { import_chakra((d / "b").string(), quiet()); });
  CHECK(e.find("b.0.et") != std::string::npos);
  CHECK(e.find("truncated") != std::string::npos);
}

TEST_CASE("chakra: process groups from the trace's process_group:init node") {
  fs::path d = scratch("pginit");
  // jsonizer-style protobuf JSON: metadata, PyTorch's pg node (inputs as the converter writes them), and a
  // collective on pg "1" from rank 0 of a 4-rank job.
  const std::string meta = R"({"version": "0.0.4"})";
  const std::string pg = R"({"id": "2", "name": "## process_group:init ##", "type": "METADATA_NODE",
    "inputs": {"values": "['[{\"pg_name\": \"0\", \"ranks\": [0, 1, 2, 3]}, {\"pg_name\": \"1\", \"ranks\": [0, 2]}]']"}})";
  const std::string ar = R"({"id": "3", "name": "ar", "type": "COMM_COLL_NODE", "dataDeps": ["2"],
    "attr": [{"name": "comm_type", "int64Val": "0"}, {"name": "comm_size", "int64Val": "4096"},
             {"name": "pg_name", "stringVal": "1"}]})";
  write(d / "g.0.json", meta + pg + ar);
  Trace t = import_chakra((d / "g").string(), quiet());
  CHECK(t.world_size == 4);
  const auto& rt = t.ranks[0];
  CHECK(t.comms[static_cast<std::size_t>(rt.ops[op_named(rt, "ar")].comm)].ranks == std::vector<std::int32_t>{0, 2});
}

TEST_CASE("chakra: one rank file of a larger job (rank from the name), sends to ranks without a file") {
  fs::path d = scratch("one");
  write(d / "job.3.json", R"({"workload_graph":[
    {"Id":1,"Name":"s","NodeType":5,"comm_dst":5,"comm_size":1024,"runtime":12},
    {"Id":2,"Name":"ar","NodeType":7,"comm_type":0,"comm_size":1024,"data_deps":[1]}],"ngpus":8})");
  Trace t = import_chakra((d / "job.3.json").string(), quiet());
  CHECK(t.world_size == 8);
  REQUIRE(t.ranks.size() == 1);
  CHECK(t.ranks[0].rank == 3);
  const auto& s = t.ranks[0].ops[op_named(t.ranks[0], "s")];
  CHECK(s.kind == OpKind::Compute);
  CHECK(s.duration_s == doctest::Approx(12e-6));
  CHECK(t.comms[static_cast<std::size_t>(t.ranks[0].ops[op_named(t.ranks[0], "ar")].comm)].ranks.size() == 8);
}

TEST_CASE("chakra .et and chakra_jsonizer encodings: microseconds, dependency-only order, process groups, cycles, unmatched and cross-rank waits") {
  using et_test::EtNode;
  for (const std::string ext : {".et", ".json"}) {
    CAPTURE(ext);
    const fs::path d = scratch("enc" + ext);  // one folder per encoding: a prefix names one set of rank files
    auto write_rank = [&](const std::string& prefix, int r, const std::vector<EtNode>& nodes) {
      const std::string p = (d / (prefix + "." + std::to_string(r) + ext)).string();
      if (ext == ".et") et_test::write_et(p, nodes);
      else et_test::write_jsonizer(p, nodes);
    };
    // 4 ranks: 100 us GEMM -> 1 MiB all-reduce on the rank's TP pair (pg_name) -> 50 us; an 80 us op with no deps.
    for (int r = 0; r < 4; ++r)
      write_rank("t", r,
                 {{1, "gemm", 4, {}, {}, 100, {}, {}},
                  {2, "ar", 7, {1}, {}, 0, {{"comm_type", 0}, {"comm_size", 1048576}}, {{"pg_name", r < 2 ? "tp0" : "tp1"}}},
                  {3, "tail", 4, {2}, {}, 50, {}, {}},
                  {4, "side", 4, {}, {}, 80, {}, {}}});
    Trace t = import_chakra((d / "t").string(), quiet());
    REQUIRE(t.ranks.size() == 4);
    const RankTrace& a = t.ranks[0];
    CHECK(a.ops[op_named(a, "gemm")].duration_s == doctest::Approx(100e-6));  // microseconds, not ns
    CHECK(a.ops[op_named(a, "side")].duration_s == doctest::Approx(80e-6));
    CHECK(ordered(a, op_named(a, "gemm"), op_named(a, "tail")));
    CHECK_FALSE(ordered(a, op_named(a, "side"), op_named(a, "tail")));  // no FIFO order invented from the file
    CHECK_FALSE(ordered(a, op_named(a, "gemm"), op_named(a, "side")));
    const Op& ar0 = a.ops[op_named(a, "ar")];
    CHECK(ar0.bytes == 1048576);
    CHECK(t.comms[static_cast<std::size_t>(ar0.comm)].ranks == std::vector<std::int32_t>{0, 1});  // its own communicator
    const RankTrace& a3 = t.ranks[3];
    CHECK(t.comms[static_cast<std::size_t>(a3.ops[op_named(a3, "ar")].comm)].ranks == std::vector<std::int32_t>{2, 3});
    // A cycle through data_deps: the file and the node ids in execution order.
    write_rank("c", 0, {{7, "a", 4, {9}, {}, 1, {}, {}}, {8, "b", 4, {7}, {}, 1, {}, {}}, {9, "c", 4, {8}, {}, 1, {}, {}}});
    std::string e = error_of([&] { import_chakra((d / "c").string(), quiet()); });
    CHECK(e.find("c.0" + ext) != std::string::npos);
    CHECK(e.find("7 -> 8 -> 9 -> 7") != std::string::npos);
    // Rank 1 never calls the all-reduce rank 0 waits in: the node and the file.
    write_rank("u", 0, {{5, "ar", 7, {}, {}, 0, {{"comm_type", 0}, {"comm_size", 64}}, {}}});
    write_rank("u", 1, {{5, "g", 4, {}, {}, 3, {}, {}}});
    e = error_of([&] { import_chakra((d / "u").string(), quiet()); });
    CHECK(e.find("u.0" + ext + ": node 5") != std::string::npos);
    CHECK(e.find("no partner on rank 1") != std::string::npos);
    // Each rank is acyclic and calls both groups once, but in opposite orders: rank 0 waits in 'a' for rank 1,
    // which waits in 'b' for rank 0. Reported with both nodes, not a hang and not a bare replay deadlock.
    write_rank("o", 0, {{1, "x", 7, {}, {}, 0, {{"comm_type", 0}, {"comm_size", 64}}, {{"pg_name", "a"}}},
                        {2, "y", 7, {1}, {}, 0, {{"comm_type", 0}, {"comm_size", 64}}, {{"pg_name", "b"}}}});
    write_rank("o", 1, {{3, "y", 7, {}, {}, 0, {{"comm_type", 0}, {"comm_size", 64}}, {{"pg_name", "b"}}},
                        {4, "x", 7, {3}, {}, 0, {{"comm_type", 0}, {"comm_size", 64}}, {{"pg_name", "a"}}}});
    e = error_of([&] { import_chakra((d / "o").string(), quiet()); });
    CHECK(e.find("wait on each other") != std::string::npos);
    CHECK(e.find("o.0" + ext + ": node 1") != std::string::npos);
    CHECK(e.find("o.1" + ext + ": node 3") != std::string::npos);
    // The same calls in the same order on both ranks run.
    write_rank("o", 1, {{3, "x", 7, {}, {}, 0, {{"comm_type", 0}, {"comm_size", 64}}, {{"pg_name", "a"}}},
                        {4, "y", 7, {3}, {}, 0, {{"comm_type", 0}, {"comm_size", 64}}, {{"pg_name", "b"}}}});
    CHECK(error_of([&] { import_chakra((d / "o").string(), quiet()); }) == "");
    // A ring of send-then-recv steps is no wait cycle (sends are eager).
    for (int r = 0; r < 3; ++r)
      write_rank("ring", r, {{1, "s", 5, {}, {}, 0, {{"comm_dst", (r + 1) % 3}, {"comm_size", 4096}, {"comm_tag", 1}}, {}},
                             {2, "r", 6, {1}, {}, 0, {{"comm_src", (r + 2) % 3}, {"comm_size", 4096}, {"comm_tag", 1}}, {}}});
    CHECK(error_of([&] { import_chakra((d / "ring").string(), quiet()); }) == "");
  }
}

TEST_CASE("ASTRA-sim / SimAI text: per-layer policies, DP_EP groups, and group sizes that cannot be formed name the line") {
  // HYBRID_CUSTOMIZED: each layer's 13th column is its policy. MODEL: forward/input-gradient collectives over
  // all ranks, no weight-gradient one; DATA: only the weight-gradient one, over all ranks.
  const std::string cu =
      "HYBRID_CUSTOMIZED\n2\n"
      "m -1 10 ALLGATHER 100 10 ALLREDUCE 200 10 ALLREDUCE 300 1 MODEL\n"
      "d -1 10 ALLGATHER 400 10 ALLREDUCE 500 10 ALLREDUCE 600 1 DATA\n";
  Trace t = import_astra_text(cu, "cu.txt", {{"npus", "16"}}, "--param");
  std::map<double, std::size_t> g;
  for (const auto& op : t.ranks[0].ops)
    if (op.kind == OpKind::Collective) g[op.bytes] = t.comms[static_cast<std::size_t>(op.comm)].ranks.size();
  CHECK(g == std::map<double, std::size_t>{{100, 16}, {200, 16}, {600, 16}});
  CHECK(error_of([&] { import_astra_text("HYBRID_CUSTOMIZED\n1\nm -1 1 NONE 0 1 NONE 0 1 NONE 0 1 PIPE\n", "cu.txt", {{"npus", "4"}}, "--param"); })
            .find("cu.txt:3") != std::string::npos);
  // SimAI EP types: ALLTOALL_EP on the expert-parallel group, ALLGATHER_DP_EP / REDUCESCATTER_DP_EP on the
  // data-parallel ranks holding the same experts (TP 2, EP 2 on 16: DP 8, dp_ep 4).
  const std::string moe =
      "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 2 ep: 2 pp: 1 vpp: 1 ga: 1 all_gpus: 16 checkpoints: 0 checkpoint_initiates: 0\n1\n"
      "moe -1 10 ALLTOALL_EP 100 10 ALLTOALL_EP 200 10 REDUCESCATTER_DP_EP 300 1\n"
      "";
  Trace m = import_astra_text(std::string(moe), "moe.txt", {}, "--param");
  std::map<double, std::string> on;
  for (const auto& op : m.ranks[0].ops)
    if (op.kind == OpKind::Collective) on[op.bytes] = m.comms[static_cast<std::size_t>(op.comm)].name;
  CHECK(on[100] == "ep");
  CHECK(on[200] == "ep");
  CHECK(on[300] == "dp_ep");
  for (const auto& c : m.comms) {
    if (c.name == "ep") CHECK(c.ranks.size() == 2);
    if (c.name == "dp_ep") CHECK(c.ranks.size() == 4);
  }
  // A TP group that does not divide the ranks cannot be formed: the header line, not a hang or a partial group.
  CHECK(error_of([] { import_astra_text("HYBRID_TRANSFORMER model_parallel_NPU_group: 3\n1\nq -1 1 ALLREDUCE 8 1 NONE 0 1 NONE 0 1\n",
                                        "tp.txt", {{"npus", "8"}}, "--param"); })
            .find("tp.txt:1") != std::string::npos);
  // A gzip file (PARAM ships its PyTorch traces as .json.gz) or a binary file is named as such, not parsed.
  const fs::path d = scratch("bin");
  write(d / "t.json.gz", std::string("\x1f\x8b\x08\x00\x00\x00", 6) + "HYBRID");
  CHECK(error_of([&] { import_astra_file((d / "t.json.gz").string(), {{"npus", "8"}}, "--param"); }).find("gzip") != std::string::npos);
  write(d / "b.txt", std::string("DATA\n1\n\0\x01", 9));
  CHECK(error_of([&] { import_astra_file((d / "b.txt").string(), {{"npus", "8"}}, "--param"); }).find("binary") != std::string::npos);
  // Fewer layer lines than line 2 announces: the file and the last line.
  CHECK(error_of([] { import_astra_text("DATA\n3\nl -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 8 1\n", "n.txt", {{"npus", "2"}}, "--param"); })
            .find("n.txt:") != std::string::npos);
}

TEST_CASE("ASTRA-sim / SimAI text: weight-gradient collectives overlap the rest of backward; SimAI ticks are ns") {
  const std::string txt =
      "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 2 ep: 1 pp: 1 vpp: 1 ga: 1 all_gpus: 8 checkpoints: 0 checkpoint_initiates: 0\n2\n"
      "a -1 1000 ALLREDUCE 64 2000 ALLREDUCE 64 3000 ALLREDUCE 4096 7\n"
      "b -1 1500 ALLREDUCE 64 2500 ALLREDUCE 64 3500 ALLREDUCE 8192 11\n";
  Trace t = import_astra_text(txt, "s.txt", {}, "--param");
  const RankTrace& rt = t.ranks[0];
  CHECK(rt.ops[op_named(rt, "a.fwd")].duration_s == doctest::Approx(1000e-9));  // SimAI Tick = 1 ns
  CHECK(rt.ops[op_named(rt, "b.wg")].duration_s == doctest::Approx(3500e-9));
  CHECK(rt.ops[op_named(rt, "update")].duration_s == doctest::Approx(18e-9));
  // Layer b's weight-gradient all-reduce (data-parallel group) starts after b.wg and is not waited for by
  // layer a's backward, only by the update (ASTRA-sim's non-blocking weight-gradient collectives).
  const auto bwc = op_named(rt, "b.wg.comm");
  CHECK(ordered(rt, op_named(rt, "b.wg"), bwc));
  CHECK_FALSE(ordered(rt, bwc, op_named(rt, "a.ig")));
  CHECK_FALSE(ordered(rt, bwc, op_named(rt, "a.wg")));
  CHECK(ordered(rt, bwc, op_named(rt, "update")));
  // The tensor-parallel input-gradient all-reduce blocks: a's backward waits for b's.
  CHECK(ordered(rt, op_named(rt, "b.ig.comm"), op_named(rt, "a.ig")));
  CHECK(t.comms[static_cast<std::size_t>(rt.ops[bwc].comm)].ranks.size() == 4);  // DP = 8 / TP 2
}

TEST_CASE("--param of an import: one split for launch imports (unknown refused) and trace imports (unknown to the importer)") {
  ParamMap in;
  in["npus"] = "16";        // an ASTRA-sim importer key
  in["nodes"] = "2";        // the superpod's, which dgx-h100 grows into
  in["fabric"] = "roce";    // the superpod's
  in["num_layers"] = "4";   // a gpt generator key
  in["gpu"] = "h100";       // the generator's, though presets take a gpu too
  in.quoted.insert("fabric");

  // run --trace: importer keys are the importer's, topology keys the topology's, the rest stays the importer's.
  const ImportOverrides t = split_import_overrides("dgx-h100", in, {"npus", "gpu"}, UnknownParam::importer);
  CHECK(t.importer.size() == 3);
  CHECK(t.importer.count("npus"));
  CHECK(t.importer.count("gpu"));
  CHECK(t.importer.count("num_layers"));  // left for the importer to refuse in its own words
  CHECK(t.topology == std::map<std::string, std::string>{{"nodes", "2"}, {"fabric", "roce"}});
  CHECK(t.importer.quoted.empty());

  // launch imports: the gpt generator's names; a key of neither is one line listing the topology's parameters.
  ParamMap launch = in;
  launch.erase("npus");
  const ImportOverrides l = split_import_overrides("dgx-h100", launch);
  CHECK(l.importer == ParamMap::Base{{"gpu", "h100"}, {"num_layers", "4"}});
  CHECK(l.topology.count("fabric"));
  CHECK(l.topology.count("nodes"));
  try {
    split_import_overrides("dgx-h100", in);
    FAIL("npus is neither a gpt nor a dgx-h100/superpod parameter");
  } catch (const InputError& e) {
    const std::string what = e.what();
    CHECK(what.find("--param npus") != std::string::npos);
    CHECK(what.find("a parameter of topology dgx-h100 (") != std::string::npos);
    CHECK(what.find("nodes") != std::string::npos);
  }
  // A topology file takes no parameters: its keys are refused (launch) or left to the importer (trace).
  const fs::path d = scratch("split");
  const std::string file = (d / "t.json").string();
  std::ofstream(file) << "{}";
  CHECK_THROWS_WITH_AS(split_import_overrides(file, launch), doctest::Contains("takes none"), InputError);
  CHECK(split_import_overrides(file, in, {"npus"}, UnknownParam::importer).topology.empty());
  fs::remove_all(d);
}
