// Issue 24's bad inputs in the topology, scenario, calibration, sweep and generator layers, run as a user
// would: each must end with one line naming the file and the place (line:column or JSON path) and what was
// expected, exit status 2, and no crash, no "internal error", no bad_alloc and no output file.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "cli_test_util.hpp"
#include "sim/base/error.hpp"
#include "sim/base/input_file.hpp"

namespace fs = std::filesystem;
namespace cli_test = fabricsim::cli_test;

namespace {

std::string nested(std::size_t depth) { return std::string(depth, '[') + "1" + std::string(depth, ']'); }

const char* kTopo = R"({"format": "fabricsim-topology", "version": 1, "name": "t",
 "nodes": [{"id": "g0", "kind": "gpu", "model": "h100"}, {"id": "g1", "kind": "gpu", "model": "h100"},
           {"id": "sw", "kind": "nvswitch"}],
 "links": [{"a": "g0", "b": "sw", "kind": "nvlink", "bandwidth": "450GB/s", "latency": LAT},
           {"a": "g1", "b": "sw", "kind": "nvlink", "bandwidth": BW, "latency": "150ns"}]})";

std::string topo(const std::string& lat, const std::string& bw) {
  std::string s = kTopo;
  s.replace(s.find("LAT"), 3, lat);
  s.replace(s.find("BW"), 2, bw);
  return s;
}

const char* kScenario = R"({
  "topology": {"preset": "superpod", "params": {"nodes": 1, "node": "dgx-h100"}},
  "workload": {"generator": "dataparallel", "params": {"num_parameters": 1e8, "global_batch_size": 64}}EXTRA
})";

std::string scenario(const std::string& extra) {
  std::string s = kScenario;
  s.replace(s.find("EXTRA"), 5, extra);
  return s;
}

struct Case {
  std::string name, file, text, command, expect;  // expect: a substring of the one error line
};

std::set<std::string> listing(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::recursive_directory_iterator(dir)) names.insert(fs::relative(e.path(), dir).string());
  names.insert({"stdout.txt", "stderr.txt"});  // run_in's captures
  return names;
}

void check_case(const fs::path& dir, const Case& c) {
  CAPTURE(c.name);
  std::ofstream(dir / c.file, std::ios::binary | std::ios::trunc) << c.text;
  const std::set<std::string> before = listing(dir);
  // A run asked for its outputs must leave none behind, not even a temporary file.
  const std::string outputs = c.command.rfind("run ", 0) == 0 ? " --json out.json --timeline timeline.json" : "";
  cli_test::Run r = cli_test::run_in(dir, cli_test::fabricsim(c.command + outputs));
  CHECK(listing(dir) == before);
  CHECK_MESSAGE(r.rc == 2, r.err.substr(0, 500));
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK_MESSAGE(r.err.find(c.expect) != std::string::npos, r.err.substr(0, 500));
  CHECK(r.err.find("internal error") == std::string::npos);
  CHECK(r.err.find("json.exception") == std::string::npos);
  CHECK(r.err.size() < 600);  // never the offending value in full
}

}  // namespace

TEST_CASE("issue 24 cases: topology, scenario, calibration and sweep files") {
  const fs::path dir = cli_test::scratch_dir("bad_inputs");
  const std::string ok_topo = topo("\"150ns\"", "\"450GB/s\"");
  std::ofstream(dir / "ok_topo.json") << ok_topo;
  const std::string deep = nested(100000);
  const std::vector<Case> cases = {
      // crashes (stack overflow on 100,000-deep values)
      {"deep topology latency", "t1.json", topo(deep, "\"450GB/s\""), "topo t1.json",
       "t1.json: /links/0/latency/0/0/0"},
      {"deep calibration value", "cal.json", R"({"links": {"nvlink": {"latency": )" + deep + "}}}",
       "run s_cal.json --quiet", "cal.json: /links/nvlink/latency/0/0"},
      {"deep scenario compute", "s1.json", scenario(",\n  \"compute\": {\"gemm\": " + deep + "}"),
       "run s1.json --quiet", "s1.json: /compute/gemm/0/0"},
      {"deep scenario outputs", "s2.json", scenario(",\n  \"outputs\": {\"json\": " + deep + "}"),
       "run s2.json --quiet", "s2.json: /outputs/json/0/0"},
      {"deep Chakra node field", "c.json", R"({"schema": "x", "nodes": [{"id": 0, "name": "n", "attr": )" + deep + "}]}",
       "run s_chakra.json --quiet", "c.json: /nodes/0/attr/0/0"},
      {"deep sweep inline scenario", "w1.json",
       R"({"scenario": {"topology": )" + deep + R"(}, "axes": [{"name": "n", "path": "/a", "values": [1]}]})",
       "sweep w1.json --quiet", "w1.json: /scenario/topology/0/0"},
      {"deep sweep list point", "w2.json",
       R"({"scenario": "s_ok.json", "points": [{"label": "a", "set": {"/topology/params/nodes": )" + deep + "}}]}",
       "sweep w2.json --quiet", "w2.json: /points/0/set/~1topology~1params~1nodes/0/0"},
      {"sweep pointer 100,000 levels deep", "w3.json",
       R"({"scenario": "s_ok.json", "points": [{"label": "a", "set": {")" + [] {
         std::string p;
         for (int i = 0; i < 100000; ++i) p += "/a";
         return p;
       }() + R"(": 1}}]})",
       "sweep w3.json --quiet", "a JSON pointer of at most 32 levels"},
      // internal errors (json.exception out_of_range for numbers beyond double range)
      {"1e400 latency", "t2.json", topo("1e400", "\"450GB/s\""), "topo t2.json",
       "t2.json:4:88: number \"1e400\" is out of range"},
      {"-1e999 in a scenario", "s3.json", scenario(",\n  \"compute\": {\"gemm\": -1e999}"), "run s3.json --quiet",
       "s3.json:4:23: number \"-1e999\" is out of range"},
      // resource bounds before allocation
      {"dataparallel bucket_size 1", "s4.json",
       R"({"topology": {"preset": "superpod", "params": {"nodes": 1, "node": "dgx-h100"}},
          "workload": {"generator": "dataparallel", "params": {"num_parameters": 1e9, "bucket_size": 1}}})",
       "run s4.json --quiet", "s4.json: /workload/params bucket_size: gives 1000000000 gradient buckets"},
      {"sweep array index 4e9", "w4.json",
       R"({"scenario": {"a": [1, 2]}, "points": [{"label": "a", "set": {"/a/4000000000": 1}}]})",
       "sweep w4.json --quiet", "w4.json: point 0 /a/4000000000: cannot set this path in the base scenario (array index 4000000000 is beyond the array's 2 elements)"},
      // silently accepted before
      {"duplicate kind turns a switch into a GPU", "t3.json",
       R"({"format": "fabricsim-topology", "version": 1, "name": "t", "nodes": [{"id": "sw", "kind": "nvswitch", "kind": "gpu"}], "links": []})",
       "topo t3.json", "t3.json: /nodes/0/kind: duplicate key 'kind'"},
      {"link of 1e-300 B/s", "t4.json", topo("\"150ns\"", "1e-300"), "topo t4.json",
       "t4.json: /links/1/bandwidth: expected a bandwidth between 1e-3 B/s and 1e18 B/s"},
      // unclear before: a scenario's bad preset parameter was reported as a command-line --param
      {"bad preset parameter in a scenario", "s5.json",
       R"({"topology": {"preset": "superpod", "params": {"nodes": 0, "node": "dgx-h100"}},
          "workload": {"generator": "dataparallel", "params": {}}})",
       "run s5.json --quiet", "s5.json: /topology/params/nodes: an integer in"},
      // accepted before: a preset parameter's number given as a JSON string
      {"preset nodes \"1\" in a scenario", "s6.json",
       R"({"topology": {"preset": "superpod", "params": {"nodes": "1", "node": "dgx-h100", "nic_bandwidth": "400Gbps"}},
          "workload": {"generator": "dataparallel", "params": {}}})",
       "run s6.json --quiet", "s6.json: /topology/params/nodes: expected a number, found the string \"1\""},
      // faults in long work: an output in a directory that does not exist
      {"sweep output in a missing directory", "w5.json",
       R"({"scenario": "s_ok.json", "points": [{"label": "a", "set": {"/topology/params/nodes": 1}}], "output": "no/such/dir/out.csv"})",
       "sweep w5.json --quiet", "w5.json: /output: a path in an existing directory"},
  };
  std::ofstream(dir / "s_cal.json") << scenario(",\n  \"calibration\": \"cal.json\"");
  std::ofstream(dir / "s_ok.json") << scenario("");
  std::ofstream(dir / "s_chakra.json")
      << R"({"topology": {"preset": "dgx-h100"}, "workload": {"chakra": "c.json"}})";
  for (const auto& c : cases) check_case(dir, c);
  CHECK(!fs::exists(dir / "no"));
  // The valid topology still loads (the checks refuse only the bad cases).
  cli_test::Run ok = cli_test::run_in(dir, cli_test::fabricsim("topo ok_topo.json"));
  CHECK_MESSAGE(ok.rc == 0, ok.err);
  fs::remove_all(dir);
}

TEST_CASE("issue 24 cases: generators, imported workloads, traces and nccl-tests logs") {
  const fs::path dir = cli_test::scratch_dir("bad_inputs_import");
  const std::string layer = "\n1\nl -1 1000 NONE 0 1000 NONE 0 1000 ALLREDUCE 1048576 10\n";
  const std::string trace_head = R"({"format":"fabricsim-trace","version":1,"world_size":2,
    "communicators":[{"name":"w","ranks":[0,1],"category":"dp"}],"ranks":[
      {"rank":0,"ops":[{"type":"collective","op":"all_reduce","comm":"w","bytes":1048576},
                       {"type":"send","peer":1,"tag":0,"bytes":2097152}]},)";
  std::ofstream(dir / "c.0.json") << R"({"workload_graph":[{"Id":1,"Name":"a","NodeType":4,"runtime":1}]})";
  const std::vector<Case> cases = {
      // bad_alloc before: each allocated before it checked
      {"GPT global batch 2e8 on 8 GPUs", "g.json",
       R"({"topology": {"preset": "dgx-h100"},
          "workload": {"generator": "gpt", "params": {"num_layers": 2, "hidden_size": 1024, "num_attention_heads": 16,
            "seq_length": 1024, "padded_vocab_size": 51200, "micro_batch_size": 1, "global_batch_size": 2e8,
            "tensor_model_parallel_size": 1, "pipeline_model_parallel_size": 1}}})",
       "run g.json --quiet", "g.json: /workload/params global_batch_size: gives 25000000 micro-batches"},
      // accepted before: a number given as a JSON string (a user audit), now refused naming the JSON path
      {"GPT tensor_model_parallel_size \"8\"", "g2.json",
       R"({"topology": {"preset": "dgx-h100"},
          "workload": {"generator": "gpt", "params": {"num_layers": 2, "hidden_size": 1024, "num_attention_heads": 16,
            "seq_length": 1024, "padded_vocab_size": 51200, "micro_batch_size": 1, "global_batch_size": 8,
            "tensor_model_parallel_size": "8", "pipeline_model_parallel_size": 1}}})",
       "run g2.json --quiet",
       "g2.json: /workload/params/tensor_model_parallel_size: expected a number, found the string \"8\""},
      // Megatron-Core's pipeline_model_parallel_layout and the interleaved schedule's N.
      {"GPT pipeline_model_parallel_layout with an unknown letter", "g3.json",
       R"({"topology": {"preset": "dgx-h100"},
          "workload": {"generator": "gpt", "params": {"num_layers": 2, "hidden_size": 1024, "num_attention_heads": 16,
            "seq_length": 1024, "padded_vocab_size": 51200, "micro_batch_size": 1, "global_batch_size": 8,
            "tensor_model_parallel_size": 1, "pipeline_model_parallel_size": 2, "world_size": 2,
            "pipeline_model_parallel_layout": "Et|tX|L"}}})",
       "run g3.json --quiet", "g3.json: /workload/params pipeline_model_parallel_layout: invalid layer character 'X'"},
      {"GPT pipeline_model_parallel_layout not a multiple of PP", "g4.json",
       R"({"topology": {"preset": "dgx-h100"},
          "workload": {"generator": "gpt", "params": {"num_layers": 2, "hidden_size": 1024, "num_attention_heads": 16,
            "seq_length": 1024, "padded_vocab_size": 51200, "micro_batch_size": 1, "global_batch_size": 8,
            "tensor_model_parallel_size": 1, "pipeline_model_parallel_size": 2, "world_size": 2,
            "pipeline_model_parallel_layout": [["embedding", "decoder"], ["decoder"], ["loss"]]}}})",
       "run g4.json --quiet",
       "g4.json: /workload/params pipeline_model_parallel_layout: has 3 virtual stages, not a multiple of "
       "pipeline_model_parallel_size (2)"},
      {"GPT microbatch_group_size_per_vp_stage 0", "g5.json",
       R"({"topology": {"preset": "dgx-h100"},
          "workload": {"generator": "gpt", "params": {"num_layers": 4, "hidden_size": 1024, "num_attention_heads": 16,
            "seq_length": 1024, "padded_vocab_size": 51200, "micro_batch_size": 1, "global_batch_size": 8,
            "tensor_model_parallel_size": 1, "pipeline_model_parallel_size": 2, "world_size": 2,
            "virtual_pipeline_model_parallel_size": 2, "microbatch_group_size_per_vp_stage": 0}}})",
       "run g5.json --quiet", "microbatch_group_size_per_vp_stage: expected an integer >= 1"},
      // bad_alloc / "cannot create std::vector larger than max_size()" before: the per-stage tables were sized by
      // the virtual stages before any check (found by a fuzzing campaign, 2026-11-29)
      {"GPT virtual_pipeline_model_parallel_size 2^63 - 1", "g6.json",
       R"({"topology": {"preset": "dgx-h100"},
          "workload": {"generator": "gpt", "params": {"num_layers": 4, "hidden_size": 1024, "num_attention_heads": 16,
            "seq_length": 1024, "padded_vocab_size": 51200, "micro_batch_size": 1, "global_batch_size": 8,
            "tensor_model_parallel_size": 1, "pipeline_model_parallel_size": 1, "world_size": 1,
            "virtual_pipeline_model_parallel_size": 9223372036854775807}}})",
       "run g6.json --quiet",
       "g6.json: /workload/params virtual_pipeline_model_parallel_size: gives 9223372036854775807 virtual stages per "
       "pipeline rank for 4 layers"},
      // unclear before: an unknown preset name in a scenario was reported without the file or its JSON path
      {"unknown topology preset in a scenario", "s7.json",
       R"({"topology": {"preset": "nosuch"}, "workload": {"generator": "dataparallel", "params": {}}})",
       "run s7.json --quiet", "s7.json: /topology/preset: a topology preset name (dgx-a100,"},
      // internal error before (yaml-cpp's "invalid node" for the absent section): found by the same campaign
      {"NeMo config without a model: section", "n1.yaml", "trainer:\n  devices: 8\n  num_nodes: 1\n",
       "import nemo n1.yaml --topology dgx-h100", "n1.yaml: expected a NeMo training config with a model: mapping"},
      // SIGFPE before: micro-batch x data-parallel size wrapped to 0 in 64 bits and divided (fuzzing, 2026-11-29)
      {"GPT micro_batch_size 2^60", "g7.json",
       R"({"topology": {"preset": "dgx-h100"},
          "workload": {"generator": "gpt", "params": {"num_layers": 2, "hidden_size": 1024, "num_attention_heads": 16,
            "seq_length": 1024, "padded_vocab_size": 51200, "micro_batch_size": 1152921504606846976,
            "global_batch_size": 8, "tensor_model_parallel_size": 1, "pipeline_model_parallel_size": 1}}})",
       "run g7.json --quiet", "g7.json: /workload/params micro_batch_size: expected at most 1048576, got 1152921504606846976"},
      // internal error (map::at) before: the vocabulary padded to 128 x TP 0 (same campaign)
      {"Megatron --tensor-model-parallel-size 0", "m1.sh",
       "torchrun pretrain_gpt.py --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 128 "
       "--max-position-embeddings 128 --micro-batch-size 1 --bf16 --tensor-model-parallel-size 0 "
       "--tokenizer-type NullTokenizer --vocab-size 1000\n",
       "import megatron m1.sh --topology dgx-h100", "m1.sh:1: --tensor-model-parallel-size must be at least 1 (got 0)"},
      // out of memory before: each variable twice the previous one (same campaign)
      {"Megatron script variables that double each other", "m2.sh",
       [] {
         std::string t = "Z=--bf16\nA1=\"$Z $Z\"\n";
         for (int i = 2; i <= 30; ++i) {
           const std::string a = std::to_string(i), b = std::to_string(i - 1);
           t.append("A").append(a).append("=\"$A").append(b).append(" $A").append(b).append("\"\n");
         }
         return t.append("torchrun pretrain_gpt.py $A30\n");
       }(),
       "import megatron m2.sh --topology dgx-h100", "m2.sh:19: $A18 expands to more than 1048576 characters"},
      // no option named before: "2: cannot open file for reading" (same campaign)
      {"Chakra comm_group naming no file", "c2.0.json",
       R"({"workload_graph":[{"Id":1,"Name":"a","NodeType":4,"runtime":1}]})",
       "run --trace c2.0.json --topology dgx-h100 --param comm_group=nosuch.json --quiet",
       "--param comm_group: expected the path of a comm group JSON file (no file 'nosuch.json')"},
      // Second fuzzing pass (2026-11-29): SIGFPE, stack overflow, out of memory and internal errors before.
      {"Megatron $(( INT64_MIN / -1 ))", "m3.sh",
       "TP=$(( (-9223372036854775807-1) / -1 ))\ntorchrun pretrain_gpt.py --num-layers 4 --tensor-model-parallel-size $TP\n",
       "import megatron m3.sh --topology dgx-h100", "m3.sh:2: '$(( (-9223372036854775807-1) / -1 ))' is not expanded"},
      {"Megatron $((A)) with A=A", "m4.sh", "A=A\ntorchrun pretrain_gpt.py --num-layers $((A))\n",
       "import megatron m4.sh --topology dgx-h100", "m4.sh:2:"},
      {"GPT 2^17 layers x 2^16 experts", "g8.json",
       R"({"topology": {"preset": "dgx-h100"},
          "workload": {"generator": "gpt", "params": {"model": "qwen3-30b-a3b", "num_layers": 131072, "num_experts": 65536,
            "micro_batch_size": 1, "global_batch_size": 8, "tensor_model_parallel_size": 1, "pipeline_model_parallel_size": 1}}})",
       "run g8.json --quiet", "g8.json: /workload/params num_experts: num_layers x num_experts is 8589934592"},
      // Probing the MoE path's bounds (2026-11-29): 10^9 MTP depths ran past 30 s before any check; an MoE model at
      // the micro-batch x layer bound (4,096 micro-batches x 256 MoE layers) ran out of an 8 GB address space
      {"GPT mtp_num_layers 10^9", "g9.json",
       R"({"topology": {"preset": "dgx-h100"},
          "workload": {"generator": "gpt", "params": {"model": "qwen3-30b-a3b", "num_layers": 4, "mtp_num_layers": 1000000000,
            "micro_batch_size": 1, "global_batch_size": 8, "tensor_model_parallel_size": 1, "pipeline_model_parallel_size": 1,
            "expert_model_parallel_size": 8, "world_size": 8}}})",
       "run g9.json --quiet", "g9.json: /workload/params mtp_num_layers: expected at most 131072, got 1000000000"},
      {"GPT MoE: 4,096 micro-batches x 256 MoE layers", "g10.json",
       R"({"topology": {"preset": "dgx-h100"},
          "workload": {"generator": "gpt", "params": {"model": "qwen3-30b-a3b", "num_layers": 256, "num_experts": 64,
            "hidden_size": 64, "num_attention_heads": 1, "num_query_groups": 1, "kv_channels": 64, "moe_ffn_hidden_size": 64,
            "ffn_hidden_size": 64, "padded_vocab_size": 128, "seq_length": 128, "attention_backend": "flash",
            "micro_batch_size": 1, "global_batch_size": 32768, "tensor_model_parallel_size": 1,
            "pipeline_model_parallel_size": 1, "expert_model_parallel_size": 8, "world_size": 8}}})",
       "run g10.json --quiet",
       "g10.json: /workload/params global_batch_size: gives 4096 micro-batches (global_batch_size / (micro_batch_size x "
       "data-parallel size 8)) of 256 layers (1024 layer steps: an MoE layer and an MTP depth of an MoE model count as 4); "
       "at most 1048576"},
      // accepted before, the first value kept (OmegaConf refuses it)
      {"NeMo key given twice", "n3.yaml", "trainer:\n  devices: 8\nmodel:\n  num_layers: 12\n  num_layers: 4\n",
       "import nemo n3.yaml --topology dgx-h100", "n3.yaml:5: model.num_layers: duplicate key"},
      {"NeMo list as a key", "n2.yaml", "trainer:\n  devices: 8\nmodel:\n  ? [a, b]\n  : 2\n",
       "import nemo n2.yaml --topology dgx-h100", "n2.yaml:4: model: expected a key name, found a list as a key"},
      // YAML merge keys (<<) were not applied before (second fuzzing pass); merging what is not a mapping is refused
      {"NeMo merge key naming a value", "n4.yaml", "trainer:\n  devices: 8\nmodel:\n  <<: 5\n  num_layers: 4\n",
       "import nemo n4.yaml --topology dgx-h100",
       "n4.yaml:4: model.<<: expected a mapping or a list of mappings to merge (a YAML merge key), found the value '5'"},
      {"NeMo merge key list holding a list", "n5.yaml", "b: &b {num_layers: 4}\ntrainer:\n  devices: 8\nmodel:\n  <<: [*b, [1]]\n",
       "import nemo n5.yaml --topology dgx-h100",
       "n5.yaml:5: model.<<: expected a mapping or a list of mappings to merge (a YAML merge key), found a list holding "
       "a list"},
      {"NeMo merge key naming its own mapping", "n6.yaml", "trainer:\n  devices: 8\nmodel: &m\n  num_layers: 4\n  <<: *m\n",
       "import nemo n6.yaml --topology dgx-h100", "n6.yaml:5: model.<<: merges its own mapping or one around it"},
      {"NeMo two merge keys in one mapping", "n7.yaml",
       "b: &b {num_layers: 4}\ntrainer:\n  devices: 8\nmodel:\n  <<: *b\n  <<: *b\n",
       "import nemo n7.yaml --topology dgx-h100", "n7.yaml:6: model.<<: a second merge key in one mapping"},
      {"torchtitan key 30 tables deep", "t3.toml", "[job]\n" + [] {
         std::string k = "a";
         for (int i = 0; i < 29; ++i) k.append(".a");
         return k;
       }() + " = 1\n",
       "import torchtitan t3.toml --topology dgx-h100", "t3.toml:2: tables nested more than 16 deep"},
      {"sweep label with a line break", "w6.json",
       R"({"scenario": "s_gpt.json", "points": [{"label": "a\nb", "set": {"/workload/params/num_layers": 2}}]})",
       "sweep w6.json --quiet", "w6.json: /points/0/label: a text without line breaks"},
      {"dataparallel num_parameters \"1e8\"", "d1.json",
       R"({"topology": {"preset": "dgx-h100"},
          "workload": {"generator": "dataparallel", "params": {"num_parameters": "1e8"}}})",
       "run d1.json --quiet", "d1.json: /workload/params/num_parameters: expected a number, found the string \"1e8\""},
      {"dataparallel overlap_grad_reduce \"false\"", "d2.json",
       R"({"topology": {"preset": "dgx-h100"},
          "workload": {"generator": "dataparallel", "params": {"num_parameters": 1e8, "overlap_grad_reduce": "false"}}})",
       "run d2.json --quiet",
       "d2.json: /workload/params/overlap_grad_reduce: expected true or false, found the string \"false\""},
      {"ASTRA npus 2147483647", "a1.txt", "DATA" + layer, "run --trace a1.txt --topology dgx-h100 --param npus=2147483647 --quiet",
       "--param npus: expected at most 1048576 ranks"},
      {"Chakra comm_dst 2e9", "p.0.json",
       R"({"workload_graph":[{"Id":4,"Name":"s","NodeType":5,"comm_dst":2000000000,"comm_size":64}]})",
       "run --trace p.0.json --topology dgx-h100 --quiet", "p.0.json: /workload_graph/0/comm_dst: comm_dst 2000000000 is beyond"},
      // silently accepted before
      {"ASTRA npus 4294967304 (truncated to 8)", "a2.txt", "DATA all_gpus: 4294967304" + layer,
       "run --trace a2.txt --topology dgx-h100 --quiet", "a2.txt:1: all_gpus: 4294967304 is above the 1048576 ranks"},
      {"ASTRA --param npus=4294967304 (truncated to 8)", "a4.txt", "DATA" + layer,
       "run --trace a4.txt --topology dgx-h100 --param npus=4294967304 --quiet",
       "--param npus: expected at most 1048576 ranks, found 4294967304"},
      {"ASTRA compute of 1e300 cycles", "a3.txt", "DATA\n1\nl -1 1e300 NONE 0 1 NONE 0 1 ALLREDUCE 64 1\n",
       "run --trace a3.txt --topology dgx-h100 --param npus=8 --quiet", "a3.txt:3: layer 'l': forward compute time of 1e300"},
      {"trace: all_reduce on rank 0, all_gather on rank 1", "t1.json",
       trace_head + R"({"rank":1,"ops":[{"type":"collective","op":"all_gather","comm":"w","bytes":1048576},
                       {"type":"recv","peer":0,"tag":0,"bytes":2097152}]}]})",
       "run --trace t1.json --topology dgx-h100 --quiet",
       "t1.json: collective mismatch on communicator 'w' call #1: rank 0 op 0 (collective) is all_reduce of 1048576 "
       "bytes, rank 1 op 0 (collective) is all_gather of 1048576 bytes"},
      {"trace: 1 KiB recv matched with a 2 MiB send", "t2.json",
       trace_head + R"({"rank":1,"ops":[{"type":"collective","op":"all_reduce","comm":"w","bytes":1048576},
                       {"type":"recv","peer":0,"tag":0,"bytes":1024}]}]})",
       "run --trace t2.json --topology dgx-h100 --quiet",
       "t2.json: send/recv size mismatch (message #1 from rank 0 to rank 1 tag 0): rank 1 op 1 (recv) receives 1024 "
       "bytes, rank 0 op 1 (send) sends 2097152 bytes"},
      {"nccl-tests log with a header and no rows", "log.txt",
       "# nThread 1 nGpus 8 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 "
       "validation: 1 graph: 0\n#\n"
       "#                                                              out-of-place                       in-place          \n"
       "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
       "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       \n",
       "validate log.txt --op all_reduce --nranks 8 --topology dgx-h100", "log.txt:4: the result table has no rows"},
      // undefined behaviour (log2 of 0, then its -inf converted to int) before it was checked: found reading the
      // code behind the nccl_markdown fuzz target
      {"busbw markdown table with a size label of 0K", "t.md",
       "| Message Size (Bytes) | A (GB/s) |\n| --- | --- |\n| 1K | 0.04 |\n| 0K | 1.0 |\n",
       "validate t.md --op all_reduce --nranks 8 --topology dgx-h100", "t.md:4: size label '0K' is not a size between 1 B"},
      // protobuf logged its own line (invalid UTF-8 in a string field) before ours: found by the libFuzzer target
      {"Chakra .et with invalid UTF-8 in GlobalMetadata.version", "bad.0.et", std::string("\x04\x0a\x02\xff\xfe", 5),
       "run --trace bad --topology dgx-h100 --quiet", "bad.0.et: not a Chakra protobuf trace"},
      // unclear before: a cycle in rank 1's Chakra file was attributed to rank 0's file
      {"Chakra cycle in rank 1's file", "c.1.json",
       R"({"workload_graph":[{"Id":5,"Name":"a","NodeType":4,"runtime":1,"data_deps":[6]},
                             {"Id":6,"Name":"b","NodeType":4,"runtime":1,"data_deps":[5]}]})",
       "run --trace c --topology dgx-h100 --quiet", "c.1.json: dependency cycle through data_deps on rank 1: nodes"},
  };
  std::ofstream(dir / "s_gpt.json")
      << R"({"topology": {"preset": "dgx-h100"}, "workload": {"generator": "gpt", "params": {"num_layers": 2,
           "hidden_size": 1024, "num_attention_heads": 16, "seq_length": 1024, "padded_vocab_size": 51200,
           "micro_batch_size": 1, "global_batch_size": 8, "tensor_model_parallel_size": 1,
           "pipeline_model_parallel_size": 1}}})";
  for (const auto& c : cases) check_case(dir, c);
  // A directory given as a scenario: said as what it is, not as invalid JSON at 1:1 (same campaign).
  fs::create_directories(dir / "adir");
  cli_test::Run d = cli_test::run_in(dir, cli_test::fabricsim("run adir --quiet"));
  CHECK(d.rc == 2);
  CHECK_MESSAGE(d.err.find("adir: expected a file, found a directory") != std::string::npos, d.err);
  fs::remove_all(dir);
}

TEST_CASE("inputs of every format are bounded in size: a large file by its size, a device by what was read") {
  const fs::path dir = cli_test::scratch_dir("bad_inputs_size");
  // Sparse files one byte over the limit (no disk space used), refused by their size before being read.
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"big.json", "topo big.json"},
      {"big.txt", "run --trace big.txt --topology dgx-h100 --quiet"},  // ASTRA-sim text
      {"big.0.et", "run --trace big --topology dgx-h100 --quiet"},     // Chakra protobuf
      {"log.txt", "validate log.txt --op all_reduce --nranks 8 --topology dgx-h100"},
      {"a.csv", "compare a.csv a.csv"},
      {"out.csv", "sweep w.json --quiet"},  // the sweep's own output, read to resume
  };
  std::ofstream(dir / "s.json") << scenario("");
  std::ofstream(dir / "w.json")
      << R"({"scenario": "s.json", "points": [{"label": "a", "set": {"/topology/params/nodes": 1}}], "output": "out.csv"})";
  for (const auto& [file, command] : cases) {
    CAPTURE(command);
    {
      std::ofstream f(dir / file, std::ios::binary);
      f.seekp(static_cast<std::streamoff>(fabricsim::kMaxInputBytes));
      f << ' ';
    }
    cli_test::Run r = cli_test::run_in(dir, cli_test::fabricsim(command));
    CHECK_MESSAGE(r.rc == 2, r.err.substr(0, 500));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK_MESSAGE(r.err.find(file + ": file is " + std::to_string(fabricsim::kMaxInputBytes + 1) +
                             " bytes; inputs are limited to " + std::to_string(fabricsim::kMaxInputBytes) +
                             " bytes") != std::string::npos,
                  r.err.substr(0, 500));
    fs::remove(dir / file);
  }
  // A character device has no size: /dev/zero is read until the limit (here 1 MiB; the CLI's 512 MiB takes a
  // second and 1 GiB of memory, too much for the suite) and refused, instead of being read without end.
  if (fs::exists("/dev/zero")) {
    std::string err;
    try {
      fabricsim::read_input_file("/dev/zero", 1 << 20);
    } catch (const fabricsim::InputError& e) {
      err = e.what();
    }
    CHECK_MESSAGE(err.find("/dev/zero: more than 1048576 bytes read") != std::string::npos, err);
  }
  fs::remove_all(dir);
}

TEST_CASE("unknown names suggest the one they likely mistype: parameters, keys, ops, presets, models, options") {
  const fs::path d = cli_test::scratch_dir("did_you_mean");
  const std::string scen = cli_test::small_gpt_scenario(1, 8, 8, 1);
  auto with = [&](const std::string& from, const std::string& to) {
    std::string s = scen;
    s.replace(s.find(from), from.size(), to);
    return s;
  };
  std::ofstream(d / "param.json") << with("\"tensor_model_parallel_size\"", "\"tensor_parallel_size\"");
  std::ofstream(d / "model.json") << with("\"num_layers\": 4,", "\"model\": \"llama-3-8b\",");
  std::ofstream(d / "key.json") << with("\"workload\": {", "\"comm_modle\": \"shared\", \"workload\": {");
  struct Case {
    std::string args, line;
  };
  const std::vector<Case> cases = {
      {"run param.json", "param.json: /workload/params: unknown parameter(s): tensor_parallel_size (did you mean "
                         "'tensor_model_parallel_size'?)"},
      {"run model.json", "unknown model 'llama-3-8b' (did you mean 'llama3-8b'?) (expected one of"},
      {"run key.json", "key.json: /comm_modle: unknown key 'comm_modle' (did you mean 'comm_model'?)"},
      {"coll -t dgx-h100 --op allreduce -b 1M -e 1M", "--op allreduce: one of all_reduce, all_gather, reduce_scatter, "
                                                      "broadcast, reduce, all_to_all, all_to_allv, send_recv (did you "
                                                      "mean 'all_reduce'?)"},
      {"topo dgx-h10", "topology 'dgx-h10': a preset name (did you mean 'dgx-h100'?) ("},
      {"topo superpod --param nodez=4", "--param nodez: a parameter of preset 'superpod' (did you mean 'nodes'?) (valid:"},
      {"plan --target-tokens 1e9", "--target-tokens: unknown option for `fabricsim plan` (did you mean "
                                   "'--target-tokens-per-day'?)"},
  };
  for (const auto& c : cases) {
    const cli_test::Run r = cli_test::run_in(d, cli_test::fabricsim(c.args));
    CHECK_MESSAGE(r.rc == 2, c.args);
    CHECK_MESSAGE(r.err.find(c.line) != std::string::npos, (c.args + "\n" + r.err));
  }
  // Nothing close: no suggestion.
  for (const char* args : {"coll -t dgx-h100 --op sum -b 1M -e 1M", "topo frontier"}) {
    const cli_test::Run r = cli_test::run_in(d, cli_test::fabricsim(args));
    CHECK(r.rc == 2);
    CHECK_MESSAGE(r.err.find("did you mean") == std::string::npos, r.err);
  }
}
