// Semantic checks of check_trace (workloads/trace.cpp) and the resource/range bounds of the ASTRA-sim and
// Chakra importers (issue 24): matched collectives agree in operation and bytes, matched send/recv pairs in
// bytes, and rank counts, peers, times and sizes are refused before anything is sized by them.
#include <doctest/doctest.h>

#include "workloads_test_util.hpp"

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <unistd.h>

#include "workloads/importers.hpp"

using namespace fabricsim;
using namespace fabricsim::workloads;
namespace fs = std::filesystem;

namespace {

Json two_ranks(const std::string& op1, double bytes1, double recv_bytes) {
  Json t = Json::parse(R"({"format":"fabricsim-trace","version":1,"world_size":2,
    "communicators":[{"name":"w","ranks":[0,1],"category":"dp"}],
    "ranks":[
      {"rank":0,"ops":[
        {"type":"collective","op":"all_reduce","comm":"w","bytes":1048576},
        {"type":"collective","op":"all_reduce","comm":"w","bytes":1048576},
        {"type":"send","peer":1,"tag":3,"bytes":2097152}]},
      {"rank":1,"ops":[
        {"type":"collective","op":"all_reduce","comm":"w","bytes":1048576},
        {"type":"collective","op":"all_reduce","comm":"w","bytes":1048576},
        {"type":"recv","peer":0,"tag":3,"bytes":2097152}]}]})");
  t["ranks"][1]["ops"][1]["op"] = op1;
  t["ranks"][1]["ops"][1]["bytes"] = bytes1;
  t["ranks"][1]["ops"][2]["bytes"] = recv_bytes;
  return t;
}

fs::path scratch(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("fabricsim_checks_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void write(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

ChakraOptions quiet() {
  ChakraOptions o;
  o.quiet = true;
  return o;
}

}  // namespace

TEST_CASE("check_trace: matched collectives agree in operation and bytes, send/recv pairs in bytes") {
  // The consistent trace is accepted (the checks refuse only the bad cases).
  CHECK(trace_from_json(two_ranks("all_reduce", 1048576, 2097152), "t.json").ranks.size() == 2);
  // The second call on 'w' is all_reduce on rank 0, all_gather on rank 1: both sides named.
  std::string e = error_of([] { trace_from_json(two_ranks("all_gather", 1048576, 2097152), "t.json"); });
  CHECK(e.find("t.json: collective mismatch on communicator 'w' call #2") != std::string::npos);
  CHECK(e.find("rank 0 op 1 (collective) is all_reduce of 1048576 bytes") != std::string::npos);
  CHECK(e.find("rank 1 op 1 (collective) is all_gather of 1048576 bytes") != std::string::npos);
  // Same operation, different bytes.
  e = error_of([] { trace_from_json(two_ranks("all_reduce", 1048577, 2097152), "t.json"); });
  CHECK(e.find("all_reduce of 1048576 bytes") != std::string::npos);
  CHECK(e.find("all_reduce of 1048577 bytes") != std::string::npos);
  // A 1 KiB recv matched with a 2 MiB send: both sides and both sizes.
  e = error_of([] { trace_from_json(two_ranks("all_reduce", 1048576, 1024), "t.json"); });
  CHECK(e.find("send/recv size mismatch (message #1 from rank 0 to rank 1 tag 3)") != std::string::npos);
  CHECK(e.find("rank 1 op 2 (recv) receives 1024 bytes") != std::string::npos);
  CHECK(e.find("rank 0 op 2 (send) sends 2097152 bytes") != std::string::npos);
}

TEST_CASE("ASTRA-sim text: rank counts, cycles and sizes are range-checked before use") {
  const std::string layer = "\n1\nl -1 1000 NONE 0 1000 NONE 0 1000 ALLREDUCE 1048576 10\n";
  // npus 2^31 - 1 would size a 2-billion-rank communicator; 4294967304 = 2^32 + 8 used to truncate to 8.
  for (const char* n : {"2147483647", "4294967304", "1048577"}) {
    CAPTURE(n);
    const std::string e = error_of([&] { import_astra_text("DATA" + layer, "w.txt", {{"npus", n}}, "--param"); });
    CHECK(e.find("--param npus") != std::string::npos);
    CHECK(e.find("at most 1048576 ranks") != std::string::npos);
  }
  // The same count stated in the file is refused at line 1.
  std::string e = error_of([&] { import_astra_text("DATA all_gpus: 4294967304" + layer, "w.txt", {}, "--param"); });
  CHECK(e.find("w.txt:1: all_gpus: 4294967304 is above the 1048576 ranks") != std::string::npos);
  // The largest allowed count is imported, not truncated.
  CHECK(import_astra_text("DATA" + layer, "w.txt", {{"npus", "1048576"}}, "--param").world_size == 1048576);
  // 1e300 cycles: beyond 1e9 s, refused at its line (llround of it used to overflow).
  e = error_of([&] {
    import_astra_text("DATA\n1\nl -1 1e300 NONE 0 1 NONE 0 1 ALLREDUCE 64 1\n", "w.txt", {{"npus", "8"}}, "--param");
  });
  CHECK(e.find("w.txt:3: layer 'l': forward compute time of 1e300 cycles") != std::string::npos);
  CHECK(e.find("beyond 1e9 s") != std::string::npos);
  // 1e9 s exactly is allowed; each update below it but their sum above it is refused.
  CHECK_NOTHROW(import_astra_text("DATA\n1\nl -1 1e18 NONE 0 1 NONE 0 1 ALLREDUCE 64 1\n", "w.txt", {{"npus", "8"}}, "--param"));
  e = error_of([&] {
    import_astra_text("DATA\n2\na -1 1 NONE 0 1 NONE 0 1 NONE 0 9e17\nb -1 1 NONE 0 1 NONE 0 1 NONE 0 9e17\n", "w.txt",
                      {{"npus", "8"}}, "--param");
  });
  CHECK(e.find("w.txt:1: the layers' update times add up to more than 1e9 s") != std::string::npos);
  // Bytes above 2^60.
  e = error_of([&] {
    import_astra_text("DATA\n1\nl -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 1e30 1\n", "w.txt", {{"npus", "8"}}, "--param");
  });
  CHECK(e.find("w.txt:3: layer 'l': weight-gradient bytes is above 2^60 bytes") != std::string::npos);
  // A checkpoint layer beyond int range is refused, not narrowed into a valid index (4294967296 -> 0).
  e = error_of([&] {
    import_astra_text("HYBRID_TRANSFORMER checkpoints: 1 4294967296 checkpoint_initiates: 1 0" + layer, "w.txt",
                      {{"npus", "8"}}, "--param");
  });
  CHECK(e.find("w.txt:1: 'checkpoints:' layer 4294967296 is not a layer index") != std::string::npos);
  // pp: 2 with TP 4 on 16 ranks: data-parallel groups of 16 / (4 x 2) = 2 ranks; pp_comm is said not to be sent.
  Trace pp = import_astra_text(
      "HYBRID_TRANSFORMER model_parallel_NPU_group: 4 pp: 2 pp_comm 4096\n1\nq -1 10 ALLREDUCE 100 10 ALLREDUCE 200 10 ALLREDUCE 300 1\n",
      "pp.txt", {{"npus", "16"}}, "--param");
  std::map<double, std::size_t> group_of_bytes;
  for (const auto& op : pp.ranks[0].ops)
    if (op.kind == OpKind::Collective) group_of_bytes[op.bytes] = pp.comms[static_cast<std::size_t>(op.comm)].ranks.size();
  CHECK(group_of_bytes[100] == 4);
  CHECK(group_of_bytes[300] == 2);
  bool noted = false;
  for (const auto& n : pp.notes) noted |= n.find("pp 2: every stage runs this layer list") != std::string::npos &&
                                          n.find("pp_comm 4096 bytes not sent") != std::string::npos;
  CHECK(noted);
  // A 70,000-character token is quoted as an excerpt.
  e = error_of([&] { import_astra_text(std::string(70000, 'X') + layer, "w.txt", {{"npus", "8"}}, "--param"); });
  CHECK(e.find("w.txt:1: unknown parallelism") != std::string::npos);
  CHECK(e.size() < 600);
}

TEST_CASE("Chakra: peers, rank counts and times are range-checked; errors name the rank's file and node") {
  fs::path d = scratch("chakra");
  // comm_dst 2e9 in a tiny file used to size a 2-billion-rank world.
  write(d / "p.0.json", R"({"workload_graph":[{"Id":4,"Name":"s","NodeType":5,"comm_dst":2000000000,"comm_size":64}]})");
  std::string e = error_of([&] { import_chakra((d / "p").string(), quiet()); });
  CHECK(e.find("p.0.json: /workload_graph/0/comm_dst: comm_dst 2000000000 is beyond the 1048576 ranks") != std::string::npos);
  // ngpus and the runtime (microseconds) likewise.
  write(d / "g.0.json", R"({"ngpus": 4294967304, "workload_graph":[{"Id":1,"Name":"c","NodeType":4,"runtime":1}]})");
  e = error_of([&] { import_chakra((d / "g").string(), quiet()); });
  CHECK(e.find("g.0.json: /ngpus: ngpus 4294967304 is outside [0, 1048576]") != std::string::npos);
  write(d / "r.0.json", R"({"workload_graph":[{"Id":9,"Name":"c","NodeType":4,"runtime":1e300}]})");
  e = error_of([&] { import_chakra((d / "r").string(), quiet()); });
  CHECK(e.find("r.0.json: /workload_graph/0/runtime: duration (microseconds) must be in [0, 1e15]") != std::string::npos);
  // Each range error names its field's JSON path (only the node id before), here the second node's.
  write(d / "z.0.json", R"({"workload_graph":[{"Id":1,"Name":"c","NodeType":4,"runtime":1},
                                               {"Id":2,"Name":"s","NodeType":7,"comm_type":0,"comm_size":1e30}]})");
  e = error_of([&] { import_chakra((d / "z").string(), quiet()); });
  CHECK(e.find("z.0.json: /workload_graph/1/comm_size: comm_size must be in [0, 2^60] bytes") != std::string::npos);
  write(d / "q.0.json", R"({"workload_graph":[{"Id":3,"Name":"c","NodeType":4,"runtime":1,"num_ops":1e31}]})");
  e = error_of([&] { import_chakra((d / "q").string(), quiet()); });
  CHECK(e.find("q.0.json: /workload_graph/0/num_ops: num_ops must be in [0, 1e30]") != std::string::npos);
  // A cycle in rank 1's file is reported against rank 1's file, with the node ids.
  write(d / "c.0.json", R"({"workload_graph":[{"Id":1,"Name":"a","NodeType":4,"runtime":1}]})");
  write(d / "c.1.json", R"({"workload_graph":[
    {"Id":5,"Name":"a","NodeType":4,"runtime":1,"data_deps":[6]},
    {"Id":6,"Name":"b","NodeType":4,"runtime":1,"data_deps":[5]}]})");
  e = error_of([&] { import_chakra((d / "c").string(), quiet()); });
  CHECK(e.find("c.1.json: dependency cycle through data_deps on rank 1: nodes ") != std::string::npos);
  CHECK(e.find("c.0.json") == std::string::npos);
  // A send/recv size mismatch names both files' nodes; located at the receiver's node.
  write(d / "m.0.json", R"({"workload_graph":[{"Id":3,"Name":"s","NodeType":5,"comm_dst":1,"comm_size":2097152}]})");
  write(d / "m.1.json", R"({"workload_graph":[{"Id":8,"Name":"r","NodeType":6,"comm_src":0,"comm_size":1024}]})");
  e = error_of([&] { import_chakra((d / "m").string(), quiet()); });
  CHECK(e.find("m.1.json: node 8: send/recv size mismatch") != std::string::npos);
  CHECK(e.find("m.0.json: node 3") != std::string::npos);
  CHECK(e.find("1024 bytes") != std::string::npos);
  CHECK(e.find("2097152 bytes") != std::string::npos);
  // A collective whose type differs between ranks.
  write(d / "k.0.json", R"({"workload_graph":[{"Id":1,"Name":"x","NodeType":7,"comm_type":0,"comm_size":64}]})");
  write(d / "k.1.json", R"({"workload_graph":[{"Id":2,"Name":"x","NodeType":7,"comm_type":2,"comm_size":64}]})");
  e = error_of([&] { import_chakra((d / "k").string(), quiet()); });
  CHECK(e.find("k.1.json: node 2: collective mismatch on communicator 'world' call #1") != std::string::npos);
  CHECK(e.find("all_reduce of 64 bytes") != std::string::npos);
  CHECK(e.find("all_gather of 64 bytes") != std::string::npos);
  fs::remove_all(d);
}
