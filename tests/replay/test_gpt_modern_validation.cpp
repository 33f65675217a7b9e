// Validation of the modern GPT step against published runs (tests/data/training-modern/PROVENANCE.md):
// torchtitan's Llama 3/3.1 tables (tokens/s per GPU, peak memory GiB) and the Llama 3 paper's 405B
// pre-training throughput (TFLOP/s per GPU). Nothing here is fitted: the compute efficiencies are the
// compute model's (models/compute.hpp), the memory model has no free parameter. The tables are printed
// with `build/tests/test_replay -tc='validation: modern*' -s` and copied into docs/validation.md.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "tests/csv_test_util.hpp"
#include "tests/doc_table_util.hpp"
#include "sim/base/error.hpp"
#include "replay/run_scenario.hpp"
#include "workloads/gpt.hpp"
#include "workloads/scenario.hpp"
#include "workloads/torchtitan_config.hpp"

using namespace fabricsim;

namespace {
const std::string kData = std::string(FABRICSIM_SOURCE_DIR) + "/tests/data/training-modern/";

using test::read_csv_rows;

bool has(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }
std::string other_of(const std::map<std::string, std::string>& r) { return r.at("other_settings"); }

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

struct Row {
  std::string label, gpu, node;
  Json params;
  int gpus = 0;
};

// A torchtitan row as gpt parameters: FSDP2 over the `dp` column, TP with sequence parallel norms, async
// TP as tp_comm_overlap, local batch as the micro-batch (PP: pp micro-batches of local / pp), SDPA flash attention,
// float8 tensorwise / rowwise dynamic scaling as fp8_recipe tensorwise / rowwise, mxfp8 as mxfp8,
// torchtitan's op-level selective AC as selective_ac_option op.
Row torchtitan_row(const std::map<std::string, std::string>& r) {
  Row out;
  const std::string m = r.at("model"), g = r.at("gpu"), prec = r.at("precision"), other = r.at("other_settings"),
                    rc = r.at("recompute");
  out.label = r.at("table") + " / " + r.at("row_label") + " / " + m;
  out.gpu = has(g, "H200")   ? "h200"
            : has(g, "A100") ? "a100-80gb"
            : has(g, "B200") ? "b200"
            // torchao's MI300X rows (torchtitan_mi300x.csv): the AMD preset (models/gpu.cpp) on its 8-GPU
            // Infinity Fabric node (topologies/presets.cpp mi300x-node).
            : has(g, "MI300X") ? "mi300x"
            // torchtitan's Grand Teton H100s: "96GB HBM2e" in the 2024-12 / 2025-06 benchmark files, "94/95GB
            // HBM2e, lower-TDP SXM" for the Aug 2024 405B rows of docs/performance.md -- the same HBM2e parts.
            : has(g, "HBM2e") ? "h100-96gb"
                             : "h100";
  out.label += " (" + out.gpu + ")";
  out.node = out.gpu == "a100-80gb" ? "dgx-a100" : out.gpu == "b200" ? "dgx-b200" : out.gpu == "mi300x" ? "mi300x-node" : "dgx-h100";
  out.gpus = std::stoi(r.at("num_gpus"));
  const int tp = std::stoi(r.at("tp")), pp = std::stoi(r.at("pp")), cp = std::stoi(r.at("cp")), dp = std::stoi(r.at("dp"));
  const int local = std::stoi(r.at("micro_batch"));
  Json p = {{"model", has(m, "405B") ? "llama3.1-405b" : has(m, "70B") ? "llama3-70b" : "llama3-8b"},
            {"gpu", out.gpu}, {"world_size", out.gpus}, {"tensor_model_parallel_size", tp},
            {"pipeline_model_parallel_size", pp}, {"context_parallel_size", cp}, {"use_torch_fsdp2", true},
            {"sequence_parallel", tp > 1}, {"grad_reduce_in_fp32", true}, {"attention_backend", "flash"}};
  if (!r.at("seq_len").empty()) p["seq_length"] = std::stoi(r.at("seq_len"));
  if (pp > 1) {
    // torchtitan splits the local batch into pipeline_parallel_microbatches, by default as many as the
    // pipeline degree (torchtitan parallelisms/pipeline_llama.py of 2024: n_microbatches =
    // pipeline_parallel_degree when unset; the tables do not print the count).
    p["micro_batch_size"] = std::max(1, local / pp);
    p["global_batch_size"] = local * dp;
    p["account_for_embedding_in_pipeline_split"] = true;
    p["account_for_loss_in_pipeline_split"] = true;
    if (has(other, "Interleaved")) p["virtual_pipeline_model_parallel_size"] = 2;
  } else {
    p["micro_batch_size"] = local;
    p["global_batch_size"] = local * dp;
  }
  const bool none_prec = has(prec, "none") || prec == "bf16";
  if (!none_prec) {
    p["precision"] = "fp8";
    p["fp8_recipe"] = has(prec, "mxfp8") ? "mxfp8" : has(prec, "rowwise") ? "rowwise" : "tensorwise";
  } else {
    p["precision"] = "bf16";
  }
  if (has(rc, "full")) p["recompute_granularity"] = "full";
  else if (has(rc, "layer")) {
    // torchtitan's layer-level selective AC checkpoints every 2nd layer (ac_freq 2).
    p["recompute_granularity"] = "full";
    p["recompute_method"] = "block";
    p["recompute_num_layers"] = (has(m, "70B") ? 80 : 32) / 2;
  } else if (has(rc, "selective") || has(rc, "SAC")) {
    // torchtitan's op-level selective AC (its llama3 configs' default selective_ac_option "op").
    p["recompute_granularity"] = "selective";
    p["selective_ac_option"] = "op";
  }
  else p["recompute_granularity"] = "none";
  // The loss: torchtitan compiles its cross entropy with training.compile from pytorch/torchtitan@bbb1b616e
  // (2025-04-02, components/loss.py build_cross_entropy_loss); before it (Dec 2024: commit e8977b007 turned
  // it off, "compiling loss function causes CUDA errors") the loss ran eagerly. The runs' own commits
  // (PROVENANCE.md / the source column): 9dec370 (Dec 2024 tables), torchtitan 0.0.2 with torchao 890e0ac8
  // of 2025-02-28 (torchao H100 table) and the 2024 docs rows are before it; 820504e (async TP 2025-06),
  // e7c0cae (H200) and 6fc499f6 (torchao B200) contain it.
  const std::string src = r.at("source");
  // e7c0cae (H200), 6fc499f6 (torchao B200) and 2c8b5947 (torchao MI300X) contain it.
  const bool loss_compiled_era =
      has(src, "820504e") || has(src, "e7c0cae") || has(src, "6fc499f6") || has(src, "2c8b5947");
  const bool compiled = has(other, "compile") || has(r.at("row_label"), "compile");
  p["cross_entropy_impl"] = loss_compiled_era && compiled ? "torch_compiled" : "torch";
  // torch.compile of the model's blocks (torch_compile): as the row states; the 405B perf.md rows ran
  // train_configs/llama3_405b.toml, whose compile = true (pytorch/torchtitan@3bdccb99c, Aug 2024), the A100
  // rows llama3_8b.toml / llama3_70b.toml with compile = false (pytorch/torchtitan@2db26cf34, Apr 2024).
  p["torch_compile"] = compiled || has(r.at("table"), "perf.md 405B");
  // The A100 8B rows' llama3_8b.toml (@2db26cf34) sets norm_type = "fused_rmsnorm" (torchtitan's Triton
  // RMSNorm); every other row's config uses "rmsnorm" (its eager module).
  if (has(r.at("table"), "A100") && has(m, "8B")) p["norm_type"] = "fused_rmsnorm";
  // Context parallelism: PyTorch's context_parallel with torchtitan's default rotate method at the runs'
  // commit 9dec370 (config_manager.py --experimental.context_parallel_rotate_method, default "allgather"),
  // SDPA restricted to the flash / efficient backends (utils.py get_train_context).
  if (cp > 1) p["context_parallel_rotate_method"] = "allgather";
  // FSDP2 units of the embedding and output layer: torchtitan before pytorch/torchtitan@83e694105 (2025-07-28)
  // leaves them in the root unit; of the runs' commits only 6fc499f6 (torchao B200, 2025-08-14) and 2c8b5947
  // (torchao MI300X, 2025-08-08) contain it.
  if (!has(src, "6fc499f6") && !has(src, "2c8b5947")) p["fsdp_embeddings_in_root"] = true;
  // The final norm: torchtitan's own eager RMSNorm up to pytorch/torchtitan@5078e92e4 (2025-04-17), then
  // torch.nn.RMSNorm, whose saved tensors depend on the torch build (not modelled). Of the runs' commits 9dec370
  // (Dec 2024 tables) and torchtitan 0.0.2 (torchao H100 table, torchao of 2025-02-28) are before it.
  if (has(src, "9dec370") || has(src, "torchtitan 0.0.2")) p["final_norm_eager"] = true;
  // SDPA backend: torchtitan puts cuDNN attention first on compute capability 10.0 from
  // pytorch/torchtitan@5de055e30 (2025-05-20, models/attention.py); of the B200 rows' commits 6fc499f6 has it.
  if (out.gpu == "b200" && has(src, "6fc499f6")) p["attention_backend"] = "fused";
  // torchao's float8 all-gather (torchtitan float8.enable_fsdp_float8_all_gather) where the row states it:
  // the H200 rows ("fp8 FSDP all-gather") and the torchao tensorwise rows ("float8 all-gather", "f8 all-gather").
  if (has(prec, "float8 all-gather") || has(prec, "f8 all-gather") || has(prec, "fp8 FSDP all-gather"))
    p["enable_fsdp_float8_all_gather"] = true;
  if (has(other, "async TP") && tp > 1) {
    // torchtitan's async TP: PyTorch's symmetric-memory micro-pipeline TP (Inductor's _micro_pipeline_tp and
    // enable_symm_mem_for_group on the TP group, parallelize_llama.py apply_tp at 9dec370 / 820504e); no
    // counterpart of Megatron's bulk wgrad overlap.
    p["tp_comm_overlap"] = true;
    p["tp_comm_overlap_impl"] = "symmetric_memory";
    p["tp_comm_bulk_wgrad"] = false;
  }
  out.params = p;
  return out;
}

// The memory model's peak per GPU for a row (GiB; the largest pipeline stage), no step simulated.
double memory_gib(const Row& row) {
  return workloads::gpt_memory_per_gpu(
             workloads::gpt_config_from_params(workloads::params_from_json(row.params, JsonPath()), row.label))
             .total_bytes() /
         1073741824.0;
}

struct Outcome {
  double sim = 0, mem_gib = 0;
  double iteration_s = 0;
  sim::Breakdown breakdown;  // where the simulated step's time goes (per-rank average)
  workloads::GptMemory mem;
  std::string error;
};

Outcome simulate(const Row& row) {
  Outcome o;
  workloads::ParamMap pm = workloads::params_from_json(row.params, JsonPath());
  try {
    workloads::GptConfig c = workloads::gpt_config_from_params(pm, row.label);
    o.mem = workloads::gpt_memory_per_gpu(c);
    o.mem_gib = o.mem.total_bytes() / 1073741824.0;
  } catch (const InputError& e) {
    o.error = e.what();
    return o;
  }
  const int per_node = row.node == "dgx-b200" || row.node == "dgx-h100" || row.node == "dgx-a100" ? 8 : 8;
  Json sc = {{"topology", {{"preset", "superpod"}, {"params", {{"nodes", std::max(1, row.gpus / per_node)}, {"node", row.node}}}}},
             {"workload", {{"generator", "gpt"}, {"params", row.params}}}};
  if (row.gpu == "h200") sc["topology"]["params"]["gpu"] = "h200";
  try {
    auto s = workloads::scenario_from_json(sc, row.label);
    sim::ScenarioRunOptions opt;
    opt.comm_model = "analytic";
    opt.engine.collect_link_stats = false;  // times only (analytic link bytes cost schedule builds)
    opt.replay.record_ops = false;
    auto res = sim::run_scenario(s, opt).result;
    o.sim = res.tokens_per_s / row.gpus;
    o.iteration_s = res.iteration_s;
    o.breakdown = res.breakdown;
  } catch (const InputError& e) {
    o.error = e.what();
  }
  return o;
}
}  // namespace

// The Dec 2024 Table 1 and Table 4 rows (pytorch/torchtitan@9dec370) through `fabricsim import torchtitan`: the
// row's own config (train_configs/llama3_8b.toml or llama3_70b.toml at 9dec370, tests/data/torchtitan-configs)
// with the torchtitan command-line overrides the row states (local batch, TP degree, compile, float8, async TP).
// The validation below runs these rows from the imported parameters.
bool imported_row(const std::map<std::string, std::string>& r) {
  return r.at("table") == "Table 1" || r.at("table") == "Table 4";
}
Json imported_row_params(const std::map<std::string, std::string>& r, const Row& row) {
  const std::string other = other_of(r);
  workloads::TorchtitanOptions opt;
  opt.gpus = row.gpus;
  opt.overrides = {{"training.batch_size", r.at("micro_batch")}, {"training.tensor_parallel_degree", r.at("tp")}};
  if (has(other, "compile")) opt.overrides.push_back({"training.compile", "true"});
  if (has(r.at("precision"), "fp8")) opt.overrides.push_back({"float8.enable_float8_linear", "true"});
  if (has(other, "async TP")) opt.overrides.push_back({"experimental.enable_async_tensor_parallel", "true"});
  const std::string file = std::string(FABRICSIM_SOURCE_DIR) + "/tests/data/torchtitan-configs/" +
                           (has(r.at("model"), "70B") ? "llama3_70b-9dec370.toml" : "llama3_8b-9dec370.toml");
  std::ifstream in(file);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return workloads::scenario_for_torchtitan(file, text, "dgx-h100", {{"gpu", row.gpu}}, opt)["workload"]["params"];
}

// ... give the parameters torchtitan_row writes for the row: the importer and the validation's mapping agree.
TEST_CASE("validation: torchtitan Table 1 and 4 rows from their 9dec370 configs (import torchtitan)") {
  int compared = 0;
  for (const auto& r : read_csv_rows(kData + "torchtitan_dense.csv")) {
    if (!imported_row(r)) continue;
    const Row row = torchtitan_row(r);
    CAPTURE(row.label);
    Json p = imported_row_params(r, row);
    // The rows leave seq_length at the model's 8192 (the table does not print it); the configs state 8192.
    CHECK(p["seq_length"] == 8192);
    if (!row.params.contains("seq_length")) p.erase("seq_length");
    CHECK_MESSAGE(p == row.params, "imported " << p.dump() << "\nrow      " << row.params.dump());
    ++compared;
  }
  CHECK(compared == 5);  // Table 1's three 8B rows, Table 4's two 70B rows
}

TEST_CASE("validation: modern dense training (torchtitan tokens/s per GPU and peak memory)") {
  std::vector<double> mem_err, tps_err, tps_err_80gb_era;  // the last: all but Table 2 (see the bounds)
  std::vector<double> tps_err_no_b200;  // all but the 5 B200 rows (docs/validation.md's summary)
  std::string table = "row | GPUs | published TPS/GPU | sim | error | published GiB | sim GiB | error\n";
  // Memory rows with the simulated terms (GiB): weights, gradients, optimizer state, activations.
  std::string terms = "row | published GiB | sim GiB | error | weights | grads | optimizer | activations | reserve | buffers\n";
  int expressed = 0, parsed = 0;
  std::string f8_reading = "row | published GiB | sim GiB with enable_fsdp_float8_all_gather | error\n";
  test::DocTable doc{"torchtitan",
                     {"torchtitan row (table / label / model (GPU preset))", "GPUs", "published TPS/GPU", "simulated",
                      "error", "published GiB", "simulated GiB", "error"},
                     {false, true, true, true, true, true, true, true}, {}};
  test::DocTable doc_terms{"torchtitan-memory-terms",
                           {"row", "published GiB", "simulated GiB", "error", "loss code (`cross_entropy_impl`)",
                            "weights", "grads", "optimizer", "activations (incl. loss)", "allocator reserve",
                            "buffers"},
                           {false, true, true, true, false, true, true, true, true, true, true}, {}};
  std::map<std::string, double> sim_of, pub_of;  // by row label (the eager / compiled pairs)
  std::map<std::string, double> sim_row, pub_row;  // by Row::label (table / label / model (GPU))
  for (const auto& r : read_csv_rows(kData + "torchtitan_dense.csv")) {
    Row row = torchtitan_row(r);
    if (imported_row(r)) row.params = imported_row_params(r, row);  // the runs' own configs (see above)
    Outcome o = simulate(row);
    const double tps = std::stod(r.at("tokens_per_s_per_gpu"));
    sim_of[r.at("table") + " / " + r.at("row_label")] = o.sim, pub_of[r.at("table") + " / " + r.at("row_label")] = tps;
    sim_row[row.label] = o.sim, pub_row[row.label] = tps;
    const double mem = r.at("memory").empty() ? 0 : std::stod(r.at("memory"));
    char buf[400];
    double te = o.sim > 0 ? (o.sim - tps) / tps : NAN, me = mem > 0 && o.mem_gib > 0 ? (o.mem_gib - mem) / mem : NAN;
    std::snprintf(buf, sizeof buf, "%s | %d | %.0f | %s | %s | %s | %.1f | %s%s\n", row.label.c_str(), row.gpus, tps,
                  o.sim > 0 ? std::to_string(int(std::lround(o.sim))).c_str() : "-",
                  std::isnan(te) ? "-" : (std::to_string(int(std::lround(100 * te))) + " %").c_str(),
                  mem > 0 ? r.at("memory").c_str() : "-", o.mem_gib,
                  std::isnan(me) ? "-" : (std::to_string(int(std::lround(100 * me))) + " %").c_str(),
                  o.error.empty() ? "" : (" | not run: " + o.error.substr(o.error.find(": ") + 2, 90)).c_str());
    table += buf;
    doc.add({row.label, std::to_string(row.gpus), test::fmt("%.0f", tps),
             o.sim > 0 ? test::fmt("%.0f", o.sim) : "not run: " + o.error.substr(o.error.find(": ") + 2, 90),
             std::isnan(te) ? "—" : test::signed_pct(te, 0), mem > 0 ? r.at("memory") : "—",
             o.mem_gib > 0 ? test::fmt("%.1f", o.mem_gib) : "—", std::isnan(me) ? "—" : test::signed_pct(me, 0)});
    if (mem > 0 && o.mem_gib > 0) {
      const double g = 1073741824.0;
      doc_terms.add({row.label, test::fmt("%.1f", mem), test::fmt("%.1f", o.mem_gib), test::signed_pct(me),
                     row.params.value("cross_entropy_impl", std::string("—")),
                     test::fmt("%.1f", o.mem.weights_bytes / g), test::fmt("%.1f", o.mem.grads_bytes / g),
                     test::fmt("%.1f", o.mem.optimizer_bytes / g), test::fmt("%.1f", o.mem.activations_bytes / g),
                     test::fmt("%.1f", o.mem.allocator_reserve_bytes / g), test::fmt("%.2f", o.mem.buffers_bytes / g)});
      std::snprintf(buf, sizeof buf, "%s | %.2f | %.2f | %+.2f %% | %.1f | %.1f | %.1f | %.1f | %.1f | %.3f\n",
                    row.label.c_str(), mem, o.mem_gib, 100 * me, o.mem.weights_bytes / g, o.mem.grads_bytes / g,
                    o.mem.optimizer_bytes / g, o.mem.activations_bytes / g, o.mem.allocator_reserve_bytes / g,
                    o.mem.buffers_bytes / g);
      terms += buf;
    }
    // The float8 all-gather reading of Tables 5 and 6 (docs/validation.md, "What the worst rows still miss"):
    // the same rows with train_configs/llama3_405b.toml's float8 settings; printed, not compared.
    if (mem > 0 && std::stoi(r.at("pp")) > 1) {
      Row f8 = row;
      f8.params["enable_fsdp_float8_all_gather"] = true;
      const double gib = memory_gib(f8);
      f8_reading += test::fmt("%s | %.1f | %.2f | %+.1f %%\n", row.label.c_str(), mem, gib, 100 * (gib / mem - 1.0));
    }
    parsed += o.mem_gib > 0;
    if (!std::isnan(te)) tps_err.push_back(std::abs(te)), ++expressed;
    if (!std::isnan(te) && r.at("table") != "Table 2") tps_err_80gb_era.push_back(std::abs(te));
    if (!std::isnan(te) && row.gpu != "b200") tps_err_no_b200.push_back(std::abs(te));
    if (!std::isnan(me)) mem_err.push_back(std::abs(me));
    // Memory, per group (every row held out: no memory term has a free parameter; docs/validation.md "Peak
    // memory, term by term"). Full activation recompute without PP: Table 2 (8B, CP 1-8, eager loss) -0.2 ..
    // -0.9 %, flat over CP as published (the loss phase is the peak, the CP ring buffers live in the layer
    // backward after it); Table 4 (70B, TP 8 x FSDP 32, loss_parallel) -10.9 / -5.2 %.
    const std::string rc = r.at("recompute");
    const bool pp = std::stoi(r.at("pp")) > 1;
    if (!std::isnan(me) && has(rc, "full") && !pp) {
      CAPTURE(row.label);
      if (r.at("table") == "Table 2") CHECK(std::abs(me) <= 0.01);
      else CHECK(std::abs(me) <= 0.11);
    }
    // Full recompute with torch pipelining (Tables 5 and 6, 405B, PP 8): -17.83 .. +5.81 %. Table 5's 1F1B row
    // (-17.83 %) publishes 9.8 GiB more than the interleaved row of the same table and 7.2 GiB more than Table
    // 6's CP 1 row with the same tokens per micro-batch; docs/validation.md shows why no per-rank term meets it.
    if (!std::isnan(me) && pp) {
      CAPTURE(row.label);
      CHECK(std::abs(me) <= 0.1785);
    }
    // Memory, FSDP2 with torchtitan's per-op selective AC: the eager rows (Tables 1 and 3 "FSDP") -3.2 / -1.9 %,
    // the compiled ones on H100 / H200 -1.8 .. +6.4 %, on B200 (torch 2.9 nightly, cuDNN attention) +7.1 .. +7.9 %
    // (+7.3 .. +9.0 % before the float8 all-gather of the row that states it).
    if (!std::isnan(me) && row.params.contains("selective_ac_option")) {
      CAPTURE(row.label);
      const bool eager = !has(other_of(r), "compile") && !has(r.at("row_label"), "compile");
      CHECK(std::abs(me) <= (eager ? 0.04 : row.gpu == "b200" ? 0.08 : 0.064));
    }
  }
  MESSAGE(table);
  MESSAGE(terms);
  MESSAGE(f8_reading);
  test::check_doc_table(doc, "build/tests/test_replay -tc='validation: modern dense training (torchtitan*'");
  test::check_doc_table(doc_terms, "build/tests/test_replay -tc='validation: modern dense training (torchtitan*'");
  MESSAGE("memory: median |error| " << 100 * median(mem_err) << " %, max "
                                    << 100 * *std::max_element(mem_err.begin(), mem_err.end()) << " % over "
                                    << mem_err.size() << " rows; throughput: median |error| " << 100 * median(tps_err)
                                    << " %, max " << 100 * *std::max_element(tps_err.begin(), tps_err.end())
                                    << " % over " << tps_err.size() << " rows; without Table 2: median |error| "
                                    << 100 * median(tps_err_80gb_era) << " % over " << tps_err_80gb_era.size()
                                    << " rows; without B200: median |error| " << 100 * median(tps_err_no_b200)
                                    << " %, max " << 100 * *std::max_element(tps_err_no_b200.begin(), tps_err_no_b200.end())
                                    << " % over " << tps_err_no_b200.size() << " rows");
  // Every H100 / H200 / A100 / B200 row is expressible and runs: torchtitan's H100s are the 96 GB Grand Teton
  // parts (h100-96gb), so the 4 Table 2 rows (published 83.9-84.5 GiB, simulated 84.2) fit.
  CHECK(parsed == 46);
  CHECK(expressed == 46);
  // Nothing here is fitted to these rows (the FP8 rowwise GEMM factor is a kernel measurement,
  // tests/data/hardware/h100-fp8-rowwise), so every row is held out. Bounds at the measured values
  // (memory: median 5.74 %, max 17.83 % over 28 rows -- 9.2 % / 23.0 % before the torch runtime's phases, FSDP2
  // units, CP ring buffers, pipelining buffers and kept logits, eager final norm, allocator reserve; 5.3 % / 19.8 %
  // before the last three and torch TP's saved inputs; throughput: median 20.3 %, max
  // 138 % over 46 rows, 120 % before the B200 rows ran cuDNN attention as torchtitan does there).
  // The 42 rows that ran before the 96 GB preset existed had a median of 15.6 %; the 4 Table 2 rows came out
  // 22-78 % fast (the preset has the 700 W SXM5's clocks, the parts run at 500 W), 18-69 % with PyTorch's CP.
  // torch.compile against eager PyTorch, same runs otherwise (Tables 1 and 3, 8 and 128 GPUs): published
  // compiled / eager tokens/s 1.157 and 1.162, simulated 1.189 and 1.190 (+2.8 / +2.4 %; 1.182 / 1.183 before the
  // loss was priced at its calibration's 8 B per logit element, 1.000 before torch_compile priced torchtitan's
  // eager kernels). Nothing is fitted to these rows. With the parts' stated 2.4 TB/s HBM2e instead of the SXM5's
  // 3.35 (h100-96gb, models/gpu.cpp) the simulated ratio is 1.254 / 1.255 (+8.4 / +8.0 %): eager's memory-bound
  // kernels slow down, the GEMMs do not, because the preset keeps the SXM5's compute peaks, an upper bound for
  // this 500 W part (its benchmark file: peak "between SXM and NVL", not known).
  for (const char* t : {"Table 1", "Table 3"}) {
    CAPTURE(t);
    const std::string e = std::string(t) + " / FSDP", c = e + " + torch.compile";
    const double pub = pub_of.at(c) / pub_of.at(e), sim = sim_of.at(c) / sim_of.at(e);
    MESSAGE(std::string(t) << ": compiled / eager published " << pub << ", simulated " << sim);
    CHECK(std::abs(sim / pub - 1.0) <= 0.085);
  }
  // Async TP against vanilla TP, same runs otherwise (8 pairs, TP 8 on one node): the published tokens/s ratio
  // and the simulated one. Nothing is fitted to these rows. Priced as Transformer Engine's userbuffers overlap
  // (the whole all-gather / reduce-scatter beside the whole block, the GEMMs on 116 of 132 SMs) the simulated
  // gain was 2-3x the published one: ratio error +7.4 .. +18.8 %, median 13.6 %, max 18.8 %. Priced as PyTorch's
  // symmetric-memory code runs it (tp_comm_overlap_impl symmetric_memory: per-shard GEMMs beside copy-engine
  // pulls, exposed local copy and barriers, the final reduction, only the collectives Inductor fuses): median
  // 4.0 %, max 14.4 % (the bf16 70B pair, +14.4 %; Table 4, +11.9 %). What the bf16 pairs still miss is not a
  // barrier or launch cost (docs/validation.md "Async TP against vanilla TP").
  {
    test::DocTable doc_atp{"torchtitan-async-tp",
                           {"pair (async TP row / vanilla TP row)", "published ratio", "simulated ratio", "error"},
                           {false, true, true, true}, {}};
    const std::string h = " (h100-96gb)";
    const std::vector<std::pair<std::string, std::string>> pairs = {
        {"Table 4 / 2D + AsyncTP / Llama 3.1 70B" + h, "Table 4 / 2D / Llama 3.1 70B" + h},
        {"asyncTP 2025-06 / None (bfloat16), async TP / Llama 3.1 70B" + h, "asyncTP 2025-06 / None (bfloat16), vanilla TP / Llama 3.1 70B" + h},
        {"asyncTP 2025-06 / float8 tensorwise, async TP / Llama 3.1 70B" + h, "asyncTP 2025-06 / float8 tensorwise, vanilla TP / Llama 3.1 70B" + h},
        {"asyncTP 2025-06 / float8 rowwise, async TP / Llama 3.1 70B" + h, "asyncTP 2025-06 / float8 rowwise, vanilla TP / Llama 3.1 70B" + h},
        {"asyncTP 2025-06 / None (bfloat16), async TP / Llama 3.1 8B" + h, "asyncTP 2025-06 / None (bfloat16), vanilla TP / Llama 3.1 8B" + h},
        {"asyncTP 2025-06 / float8 tensorwise, async TP / Llama 3.1 8B" + h, "asyncTP 2025-06 / float8 tensorwise, vanilla TP / Llama 3.1 8B" + h},
        {"asyncTP 2025-06 / float8 rowwise, async TP / Llama 3.1 8B" + h, "asyncTP 2025-06 / float8 rowwise, vanilla TP / Llama 3.1 8B" + h},
        {"perf.md 405B (Aug 2024) / Float8 + Async TP / Llama 3.1 405B" + h, "perf.md 405B (Aug 2024) / Float8 / Llama 3.1 405B" + h}};
    std::vector<double> ratio_err;
    std::string ratios = "async / vanilla TP: pair | published | simulated | error\n";
    for (const auto& [a, v] : pairs) {
      CAPTURE(a);
      const double pub = pub_row.at(a) / pub_row.at(v), sim = sim_row.at(a) / sim_row.at(v);
      ratio_err.push_back(sim / pub - 1.0);
      ratios += test::fmt("%s | %.3f | %.3f | %+.1f %%\n", a.c_str(), pub, sim, 100 * ratio_err.back());
      doc_atp.add({a + " / " + v.substr(v.find(" / ") + 3, v.rfind(" / ") - v.find(" / ") - 3), test::fmt("%.3f", pub),
                   test::fmt("%.3f", sim), test::signed_pct(ratio_err.back())});
    }
    MESSAGE(ratios);
    std::vector<double> abs_err;
    for (double e : ratio_err) abs_err.push_back(std::abs(e));
    MESSAGE("async / vanilla TP ratio: median |error| " << 100 * median(abs_err) << " %, max "
                                                       << 100 * *std::max_element(abs_err.begin(), abs_err.end()) << " %");
    test::check_doc_table(doc_atp, "build/tests/test_replay -tc='validation: modern dense training (torchtitan*'");
    // 3.49 % / 14.44 % (4.00 % / 14.44 % before torchao float8's weight costs slowed the float8 pairs' rows alike);
    // 3.49 % / 14.51 % with the attention kernels priced per CTA (models/compute_calibration.hpp, issue 19).
    CHECK(median(abs_err) <= 0.0350);
    CHECK(*std::max_element(abs_err.begin(), abs_err.end()) <= 0.1452);
  }
  // PyTorch's context parallelism on the 405B (Table 6: TP 8 fills a node, the CP ring crosses nodes): the signed
  // error over CP 1, 2, 4, 8 spread over 30 points (+9 .. +39 %) while the ring's exchanges were priced beside
  // the compute; exposed as the compiled block runs them (docs/validation.md "Under torch.compile the ring's
  // exchanges are exposed") 9.6 points (+8.5 / +18.1 / +8.8 / +18.2 %); with each dK/dV permute moving the whole
  // fp32 tensor to its peer (an all-to-all of that buffer moves (cp - 1) / cp of it) the measured value below,
  // every CP row closer to its published figure. The 8B rows (Table 2, NVLink) keep a CP 4 / CP 8 excess the
  // code does not explain, so they are not bounded here.
  {
    std::vector<double> e6;
    for (const char* l : {"FSDP 8, CP 1", "FSDP 4, CP 2", "FSDP 2, CP 4", "FSDP 1, CP 8"}) {
      const std::string k = std::string("Table 6 / ") + l;
      e6.push_back(sim_of.at(k) / pub_of.at(k) - 1.0);
    }
    const double spread = *std::max_element(e6.begin(), e6.end()) - *std::min_element(e6.begin(), e6.end());
    MESSAGE("Table 6 signed error over CP 1/2/4/8: " << 100 * e6[0] << " / " << 100 * e6[1] << " / " << 100 * e6[2]
                                                     << " / " << 100 * e6[3] << " %, spread " << 100 * spread);
    // 10.2 points (+8.5 / +14.1 / +6.5 / +16.8 %) at the SXM5's 3.35 TB/s; at the parts' stated 2.4 TB/s the CP 1
    // row comes down most (+0.6 / +8.2 / +2.9 / +14.2 %): 13.6 points. With the attention kernels priced per CTA
    // instead of with a fitted 37-140 us fixed time each (issue 19), the ring's per-step kernels cost less and the
    // CP rows gain most: +14.7 / +23.1 / +17.6 / +30.6 %, 15.9 points (12.4 before, +14.0 / +21.2 / +14.6 / +26.4 %).
    CHECK(spread <= 0.159);
  }
  // Table 2 (8B, one node) grows the sequence with CP: 32,768 tokens per GPU in every row, so each row adds
  // cp - 1 ring steps of the same 32,768 x 16,384 SDPA blocks to CP 1 (docs/validation.md "Table 2's CP 4 / CP 8
  // excess is not in the ring's kernels"). Step time per added step, published and simulated: the simulation
  // prices every added step alike (CP 2 -> 4 and CP 4 -> 8 within 1 %); the published rows do not (4.48 / 8.85 /
  // 7.30 s), which is what no per-step price can reproduce.
  {
    const char* t2[] = {"Table 2 / FSDP 8, CP 1", "Table 2 / FSDP 4, CP 2", "Table 2 / FSDP 2, CP 4", "Table 2 / FSDP 1, CP 8"};
    const double added[] = {0, 1, 3, 7};
    double pub_step[3], sim_step[3];
    for (int i = 1; i < 4; ++i) {
      const double d = added[i] - added[i - 1];
      pub_step[i - 1] = (32768.0 / pub_of.at(t2[i]) - 32768.0 / pub_of.at(t2[i - 1])) / d;
      sim_step[i - 1] = (32768.0 / sim_of.at(t2[i]) - 32768.0 / sim_of.at(t2[i - 1])) / d;
    }
    MESSAGE("Table 2 seconds per added ring step (CP 1->2, 2->4, 4->8): published " << pub_step[0] << " / "
            << pub_step[1] << " / " << pub_step[2] << ", simulated " << sim_step[0] << " / " << sim_step[1] << " / "
            << sim_step[2]);
    CHECK(std::abs(sim_step[2] / sim_step[1] - 1.0) <= 0.01);
    CHECK(std::abs(sim_step[1] / sim_step[0] - 1.0) <= 0.05);
  }
  // Memory: the bound over all 28 rows is asserted by `validation: peak memory, every published figure` (below).
  // torch_compile (torchtitan's eager vs compiled block) and PyTorch's context parallelism
  // (context_parallel_rotate_method) moved them to median 17.2 % (42 rows: 14.8 %), max 134.0 %; pricing the loss
  // at its calibration's 8 B per logit element (24 B before: 3x the measured time) to median 20.6 % (42 rows:
  // 17.2 %), max 145.0 % (37 of 46 rows up to 4.7 % faster, none slower; 34 rows were already simulated fast);
  // PyTorch CP's exchanges exposed under torch.compile (the 6 compiled CP 2-8 rows of Tables 2 and 6 slower,
  // no other row moves) to median 17.3 % (42 rows: 14.7 %), max 145.0 %; the dK/dV permutes priced as one-peer
  // sends of the whole fp32 tensor (the 6 CP 2-8 rows slower, no other row moves) to median 15.3 % (42 rows:
  // 14.1 %), max 145.0 %; the h100-96gb parts' stated 2.4 TB/s HBM2e instead of the SXM5's 3.35 TB/s (every
  // Grand Teton row slower) to median 14.9 % (42 rows: 14.1 %), max 145.0 %; FP8 under sequence parallelism cast on
  // the local shard and all-gathered in FP8 (torchao's Float8ColwiseParallel / PrepareFloat8ModuleInput: the
  // 14 float8 tensorwise TP rows of Tables 4-6, asyncTP 2025-06 and perf.md faster) and
  // tp_comm_overlap's SM cost on the GEMMs beside SM communication only (the async TP rows faster) to median
  // 24.4 % (42 rows: 24.4 %), max 145.0 %: those rows had matched only while their casts were priced on
  // all-gathered tokens; priced as the code runs they are fast like the other Grand Teton rows (power-limited
  // 500 W parts against a 700 W compute fit).
  // PyTorch's async TP priced as its symmetric-memory micro-pipeline (tp_comm_overlap_impl symmetric_memory:
  // the 14 async TP rows slower) and torchao float8's weight casts and scale precompute under FSDP2 (the 23
  // float8 tensorwise rows slower) to median 13.92 % (42 rows: 13.62 %), max 134.07 %: the bounds are these,
  // rounded up (they were 24.5 % / 145 % until then). The attention kernels priced per CTA (issue 19: no fitted
  // 37-140 us per kernel) speed up the CP rows of Tables 2 and 6 most: median 14.19 % (42 rows: 13.49 %), max
  // 135.05 %.
  REQUIRE(tps_err_80gb_era.size() == 42);
  CHECK(median(tps_err_80gb_era) <= 0.137);
  CHECK(median(tps_err) <= 0.142);
  CHECK(*std::max_element(tps_err.begin(), tps_err.end()) <= 1.351);  // a B200 row (docs/validation.md)
}

// Every published peak-memory figure of the visible data (tests/data/training-modern, the rows copied from the
// team's training-modern/ set, PROVENANCE.md): which file publishes one, what checks it, and the memory model's
// error over the compared rows (issue 19: within 10 % of every published figure). Memory only, no step simulated.
// A figure added to any file of the folder fails the per-file counts below until it is compared here.
TEST_CASE("validation: peak memory, every published figure (torchtitan GiB, MoE Parallel Folding OOM)") {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(kData))
    if (e.path().extension() == ".csv") files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  // The rows compared: every torchtitan row that prints a memory figure, on the GPU presets the throughput
  // validation runs (the 28 of torchtitan_dense.csv).
  std::vector<double> err;
  std::vector<std::string> outside;  // rows beyond 10 %
  for (const auto& r : read_csv_rows(kData + "torchtitan_dense.csv")) {
    if (r.at("memory").empty()) continue;
    Row row = torchtitan_row(r);
    if (imported_row(r)) row.params = imported_row_params(r, row);
    const double e = memory_gib(row) / std::stod(r.at("memory")) - 1.0;
    err.push_back(std::abs(e));
    if (std::abs(e) > 0.10) outside.push_back(r.at("table") + " / " + r.at("row_label") + test::fmt(" (%+.1f %%)", 100 * e));
  }
  // torchao's MI300X rows (torchtitan_mi300x.csv), held out (no memory term was written while looking at them),
  // with the mi300x preset: the memory terms depend on the GPU only through the compute stream's BLAS workspace
  // (8.1 MiB off Hopper; ROCm's hipBLASLt workspace is not sized here) and the SDPA backend (torchtitan puts cuDNN
  // first only on compute capability 10.0, models/attention.py at pytorch/torchtitan@2c8b5947; ROCm runs the
  // flash op, which the selective-AC save list names, as H100). Compared, kept out of the 28-row bound above.
  test::DocTable reading{"torchtitan-memory-mi300x-reading",
                         {"row (MI300X, `mi300x` preset)", "published GB (as printed)", "model GiB", "difference"},
                         {false, true, true, true}, {}};
  double reading_lo = 1e9, reading_hi = -1e9;
  for (const auto& r : read_csv_rows(kData + "torchtitan_mi300x.csv")) {
    const Row row = torchtitan_row(r);
    REQUIRE(row.gpu == "mi300x");
    const double gib = memory_gib(row), pub = std::stod(r.at("memory"));
    reading_lo = std::min(reading_lo, gib / pub - 1.0), reading_hi = std::max(reading_hi, gib / pub - 1.0);
    reading.add({r.at("table") + " / " + r.at("row_label") + " / " + r.at("model"), r.at("memory"),
                 test::fmt("%.1f", gib), test::signed_pct(gib / pub - 1.0)});
  }
  MESSAGE(reading.markdown());
  // The bound of the compiled FSDP2 + op-level SAC rows on H100 / H200 (modern dense training test: 6.4 %),
  // the same code path; measured -3.3 .. -1.8 %.
  CHECK(reading_lo >= -0.064);
  CHECK(reading_hi <= 0.064);
  test::check_doc_table(reading, "build/tests/test_replay -tc='validation: peak memory*'");
  // What each file publishes (a `memory` figure; an "OOM" printed in place of a result) and what checks it.
  const std::map<std::string, std::string> checked_by = {
      {"torchtitan_dense.csv", "compared: simulated peak GiB, largest pipeline stage (this test)"},
      {"torchtitan_mi300x.csv", "compared with the `mi300x` preset, outside the 28-row bound (`validation: torchtitan MI300X*` and below)"},
      {"moe_h100.csv", "the memory model's fit / OOM verdict on 80 GB (`validation: parallel folding tables 1-3*`)"},
      {"llama3_405b_h100.csv", "no figure; the paper's runs fit 80 GB without recompute: asserted (`validation: modern dense training (Llama 3 405B*`)"},
      {"llmfoundry_mpt.csv", "no figure; every row runs, so fits its GPU: asserted (`validation: modern dense training (llm-foundry*`)"},
      {"olmo_core_h100.csv", "no figure; every row fits its 80 GB: asserted (`validation: olmo-core*`)"}};
  test::DocTable inventory{"memory-figures",
                           {"file (tests/data/training-modern)", "rows", "memory figures", "printed OOM",
                            "checked by", "result"},
                           {false, true, true, true, false, false}, {}};
  std::map<std::string, int> figures, ooms;
  for (const auto& f : files) {
    int rows = 0;
    for (const auto& r : read_csv_rows(kData + f)) {
      ++rows;
      figures[f] += r.count("memory") && !r.at("memory").empty();
      bool oom = false;
      for (const auto& kv : r) oom = oom || kv.second == "OOM";
      ooms[f] += oom;
    }
    std::string result = "—";
    if (f == "torchtitan_dense.csv") {
      int within = static_cast<int>(err.size() - outside.size());
      result = test::fmt("%d rows: median |error| %.2f %%, max %.1f %%; %d within 10 %%", static_cast<int>(err.size()),
                         100 * median(err), 100 * *std::max_element(err.begin(), err.end()), within);
    } else if (f == "torchtitan_mi300x.csv") {
      result = test::signed_pct(reading_lo) + " .. " + test::signed_pct(reading_hi);
    } else if (f == "moe_h100.csv") {
      result = "docs: MoE Parallel Folding";
    }
    const auto it = checked_by.find(f);
    inventory.add({"`" + f + "`", std::to_string(rows), std::to_string(figures[f]), std::to_string(ooms[f]),
                   it != checked_by.end() ? it->second : "no figure published", result});
  }
  MESSAGE(inventory.markdown());
  test::check_doc_table(inventory, "build/tests/test_replay -tc='validation: peak memory*'");
  // The figures: torchtitan's 28 compared rows and 4 MI300X rows, MoE Parallel Folding's 2 printed OOMs
  // (Llama3-8x70B rows 15 and 17 of moe_h100.csv); no other file prints a memory figure or an OOM.
  for (const auto& f : files) {
    CAPTURE(f);
    CHECK(figures[f] == (f == "torchtitan_dense.csv" ? 28 : f == "torchtitan_mi300x.csv" ? 4 : 0));
    CHECK(ooms[f] == (f == "moe_h100.csv" ? 2 : 0));
  }
  // The bound over the compared rows (nothing fitted; the memory terms were written while comparing with these
  // rows, docs/validation.md): median |error| 5.66 %, max 17.83 %, 25 of 28 within 10 %. The three rows beyond
  // it, and why no term found in the code the runs executed closes them, are in docs/validation.md ("What the
  // worst rows still miss").
  REQUIRE(err.size() == 28);
  MESSAGE("peak memory over " << err.size() << " torchtitan rows: median |error| " << 100 * median(err) << " %, max "
                              << 100 * *std::max_element(err.begin(), err.end()) << " %; beyond 10 %: " << outside.size());
  CHECK(median(err) <= 0.0567);
  CHECK(*std::max_element(err.begin(), err.end()) <= 0.1784);
  const std::vector<std::string> expected_outside = {"Table 4 / 2D (-10.9 %)", "Table 5 / 1F1B (-17.8 %)",
                                                     "Table 6 / FSDP 1, CP 8 (-15.1 %)"};
  CHECK(outside == expected_outside);
}

// torchao's four Llama 3 8B rows on 8 AMD MI300X (torchtitan_mi300x.csv; FSDP2 over 8, local batch 1 x 8192,
// op-level selective AC, torch.compile; bf16 and three float8 recipes), held out: nothing is fitted on them, and
// nothing of the model was fitted on an AMD GPU. The mi300x preset's peaks are AMD's (models/gpu.cpp); its kernel
// efficiencies are the H200's NVIDIA fit (no MI300X kernel measurement exists in the project), its collectives
// run NCCL's ring / tree pricing over the node's Infinity Fabric full mesh (topologies/presets.cpp mi300x-node).
TEST_CASE("validation: torchtitan MI300X rows (mi300x preset on mi300x-node, held out)") {
  test::DocTable doc{"torchtitan-mi300x",
                     {"row (MI300X, `mi300x` preset)", "published TPS/GPU", "simulated", "error",
                      "published speedup over bf16", "simulated", "step s", "compute s", "exposed DP s"},
                     {false, true, true, true, true, true, true, true, true}, {}};
  double pub_bf16 = 0, sim_bf16 = 0;
  std::vector<double> err;
  for (const auto& r : read_csv_rows(kData + "torchtitan_mi300x.csv")) {
    const Row row = torchtitan_row(r);
    CAPTURE(row.label);
    REQUIRE(row.gpu == "mi300x");
    REQUIRE(row.node == "mi300x-node");
    const Outcome o = simulate(row);
    CHECK(o.error.empty());
    REQUIRE(o.sim > 0);
    const double tps = std::stod(r.at("tokens_per_s_per_gpu"));
    if (has(r.at("row_label"), "bfloat16)")) pub_bf16 = tps, sim_bf16 = o.sim;
    REQUIRE(pub_bf16 > 0);  // the bf16 row comes first in the file
    err.push_back(o.sim / tps - 1.0);
    const auto dp = o.breakdown.exposed_comm_s.find("dp");
    doc.add({row.label, test::fmt("%.0f", tps), test::fmt("%.0f", o.sim), test::signed_pct(err.back(), 0),
             test::signed_pct(tps / pub_bf16 - 1.0), test::signed_pct(o.sim / sim_bf16 - 1.0),
             test::fmt("%.2f", o.iteration_s), test::fmt("%.2f", o.breakdown.compute_s),
             test::fmt("%.2f", dp == o.breakdown.exposed_comm_s.end() ? 0.0 : dp->second)});
  }
  MESSAGE(doc.markdown());
  test::check_doc_table(doc, "build/tests/test_replay -tc='validation: torchtitan MI300X*'");
  REQUIRE(err.size() == 4);
  // Measured (nothing fitted): +97 / +104 / +77 / +84 %, all fast, simulated compute 0.63-0.75 s of a 0.65-0.77 s
  // step (exposed FSDP collectives 0.02 s). The model prices MI300X kernels at the H200's NVIDIA-fitted
  // efficiencies times AMD's peaks (1.32x the H100's BF16); the same torchao bf16 configuration published on H100
  // (torchao of Feb 2025) ran 1.14x faster than the MI300X, where the peaks say 0.76x; the B200 rows of the same
  // Aug 2025 torchao table come out +113 .. +135 % on NVIDIA's own fit. Which of the two (AMD kernels, that
  // software generation) makes these rows fast only an MI300X kernel measurement can say (docs/validation.md).
  // Bounds at the measured values, so that a change that moves these rows is seen.
  for (double e : err) CHECK(e > 0);
  CHECK(*std::min_element(err.begin(), err.end()) >= 0.76);
  CHECK(*std::max_element(err.begin(), err.end()) <= 1.045);
}

TEST_CASE("validation: modern dense training (Llama 3 405B pre-training, TFLOP/s per GPU)") {
  std::string table = "row | published TFLOP/s | sim | error | sim GiB\n";
  // Where the simulated step goes (seconds per rank, breakdown of the result): compute, pipeline bubble,
  // exposed TP / CP / DP / PP communication.
  std::string where = "row | step s | compute | bubble | TP | CP | DP | PP | bubble share\n";
  test::DocTable doc{"llama3-405b", {"row", "published", "simulated", "error", "simulated memory"},
                     {false, true, true, true, true}, {}};
  test::DocTable doc_where{"llama3-405b-breakdown",
                           {"row", "step", "compute", "pipeline bubble", "exposed TP", "exposed CP", "exposed DP",
                            "exposed PP", "bubble share"},
                           {false, true, true, true, true, true, true, true, true}, {}};
  for (const auto& r : read_csv_rows(kData + "llama3_405b_h100.csv")) {
    const int gpus = std::stoi(r.at("num_gpus")), cp = std::stoi(r.at("cp")), dp = std::stoi(r.at("dp"));
    const int seq = std::stoi(r.at("seq_len"));
    Row row;
    row.label = r.at("row_label");
    row.gpu = "h100";
    row.node = "dgx-h100";
    row.gpus = gpus;
    // Table 4 layout; the paper's text: first and last stage one layer fewer, no activation recompute at 8K,
    // FSDP-style sharding of optimizer state and gradients (the distributed optimizer), fp32 gradient
    // reduce-scatter, CP with all-gathered K/V.
    row.params = {{"model", "llama3.1-405b"}, {"gpu", "h100"}, {"world_size", gpus}, {"tensor_model_parallel_size", 8},
                  {"pipeline_model_parallel_size", 16}, {"context_parallel_size", cp}, {"cp_comm_type", "all_gather"},
                  {"decoder_first_pipeline_num_layers", 7}, {"decoder_last_pipeline_num_layers", 7},
                  {"seq_length", seq}, {"micro_batch_size", 1}, {"global_batch_size", 16777216 / seq},
                  {"sequence_parallel", true}, {"recompute_granularity", "none"}, {"use_distributed_optimizer", true},
                  {"overlap_grad_reduce", true}, {"overlap_param_gather", true}, {"grad_reduce_in_fp32", true}};
    Outcome o = simulate(row);
    REQUIRE_MESSAGE(o.error.empty(), o.error);
    // tokens/s per GPU -> Megatron-Core model TFLOP/s per GPU.
    workloads::GptConfig c =
        workloads::gpt_config_from_params(workloads::params_from_json(row.params, JsonPath()), row.label);
    const double tflops = o.sim * gpus * workloads::gpt_model_flops(c) / (double(c.global_batch_size) * seq) / gpus / 1e12;
    const double pub = std::stod(r.at("tflops_per_gpu"));
    char buf[200];
    std::snprintf(buf, sizeof buf, "%s | %.0f | %.0f | %+.0f %% | %.1f\n", row.label.c_str(), pub, tflops,
                  100 * (tflops - pub) / pub, o.mem_gib);
    table += buf;
    doc.add({row.label, r.at("tflops_per_gpu"), test::fmt("%.0f", tflops), test::signed_pct((tflops - pub) / pub, 0),
             test::fmt("%.1f GiB", o.mem_gib)});
    CHECK(o.mem_gib < 80.0);  // the runs fit on 80 GB H100s without recompute
    const auto& bd = o.breakdown;
    auto comm = [&](const char* k) { return bd.exposed_comm_s.count(k) ? bd.exposed_comm_s.at(k) : 0.0; };
    std::snprintf(buf, sizeof buf, "%s | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.0f %%\n", row.label.c_str(),
                  o.iteration_s, bd.compute_s, bd.bubble_s, comm("tp"), comm("cp"), comm("dp"), comm("pp"),
                  100 * bd.bubble_s / o.iteration_s);
    where += buf;
    auto cell = [](double v) { return v > 0 ? test::fmt("%.2f", v) : std::string("\u2014"); };
    doc_where.add({row.label + " (m = " + std::to_string(16777216 / seq / dp) + ")", test::fmt("%.2f", o.iteration_s),
                   test::fmt("%.2f", bd.compute_s), test::fmt("%.2f", bd.bubble_s), cell(comm("tp")), cell(comm("cp")),
                   cell(comm("dp")), cell(comm("pp")), test::fmt("%.0f %%", 100 * bd.bubble_s / o.iteration_s)});
    // The non-interleaved 1F1B bubble, (PP - 1) / m of the per-micro-batch time with m = 32 or 16 micro-batches
    // per pipeline, is the largest term after compute (docs/validation.md: 31-48 % of the step, 4.5-10.3 s,
    // against 0.03-0.6 s for PP, DP and CP and 0.8-1.6 s for TP); the paper's interleaved schedule is what
    // would shrink it, and the memory model refuses it on 80 GB (docs).
    CHECK(bd.bubble_s > comm("tp") + comm("cp") + comm("dp") + comm("pp"));
    CHECK(bd.bubble_s / o.iteration_s >= 0.30);
  }
  MESSAGE(table);
  MESSAGE(where);
  test::check_doc_table(doc, "build/tests/test_replay -tc='validation: modern dense training (Llama 3 405B*'");
  test::check_doc_table(doc_where, "build/tests/test_replay -tc='validation: modern dense training (Llama 3 405B*'");
}

namespace {
// An A100 Megatron-LM row (unfused attention, fp16, SC'21-fitted compute preset) -> simulated result.
sim::RunResult a100_result(const Json& params, int gpus, const std::string& label, const std::string& comm) {
  Json tp = {{"nodes", gpus / 8}, {"node", "dgx-a100"}};
  if (gpus > 8192) tp["radix"] = 64;
  Json sc = {{"topology", {{"preset", "superpod"}, {"params", tp}}},
             {"workload", {{"generator", "gpt"}, {"params", params}}},
             {"compute", {{"preset", "megatron-sc21"}}}};
  auto s = workloads::scenario_from_json(sc, label);
  sim::ScenarioRunOptions opt;
  opt.comm_model = comm;
  opt.replay.record_ops = false;
  if (comm == "analytic") opt.engine.collect_link_stats = false;  // times only
  return sim::run_scenario(s, opt).result;
}
double a100_iteration_s(const Json& params, int gpus, const std::string& label, const std::string& comm) {
  return a100_result(params, gpus, label, comm).iteration_s;
}
}  // namespace

// Korthikanti et al. 2022 Table 5 (A100): iteration time with full recompute and with sequence parallelism
// + selective recompute. The compute preset megatron-sc21 was fitted on 3 rows of SC'21 Table 1, not on
// these, so all 8 rows are held out. The layout is the table's (vpp = virtual pipeline stages per rank).
TEST_CASE("validation: modern dense training (Korthikanti et al. Table 5, A100 iteration time)") {
  std::vector<double> errs;
  std::string table = "row | GPUs | published s | sim s | error\n";
  test::DocTable doc{"korthikanti-table5", {"row", "GPUs", "published", "simulated", "error"},
                     {false, true, true, true, true}, {}};
  for (const auto& r : read_csv_rows(kData + "korthikanti_sp_selective.csv")) {
    if (r.at("table") != "Table 5") continue;
    const bool sel = has(r.at("recompute"), "selective");
    const int gpus = std::stoi(r.at("num_gpus")), pp = std::stoi(r.at("pp"));
    Json p = {{"num_layers", std::stoi(r.at("layers"))}, {"hidden_size", std::stoi(r.at("hidden"))},
              {"num_attention_heads", std::stoi(r.at("heads"))}, {"seq_length", std::stoi(r.at("seq_len"))},
              {"padded_vocab_size", std::stoi(r.at("vocab"))}, {"micro_batch_size", std::stoi(r.at("micro_batch"))},
              {"global_batch_size", std::stoi(r.at("global_batch_seqs"))},
              {"tensor_model_parallel_size", std::stoi(r.at("tp"))}, {"pipeline_model_parallel_size", pp},
              {"recompute_granularity", sel ? "selective" : "full"}, {"sequence_parallel", sel}};
    if (!r.at("vpp").empty()) p["virtual_pipeline_model_parallel_size"] = std::stoi(r.at("vpp"));
    const double sim_s = a100_iteration_s(p, gpus, r.at("row_label"), "engine");
    const double pub = std::stod(r.at("iteration_s"));
    const double err = (sim_s - pub) / pub;
    errs.push_back(std::abs(err));
    CHECK_MESSAGE(std::abs(err) <= 0.10, r.at("row_label") << " error " << 100 * err << " %");
    char buf[200];
    std::snprintf(buf, sizeof buf, "%s | %d | %.2f | %.2f | %+.1f %%\n", r.at("row_label").c_str(), gpus, pub, sim_s, 100 * err);
    table += buf;
    doc.add({r.at("row_label"), std::to_string(gpus), test::fmt("%.2f s", pub), test::fmt("%.2f s", sim_s), test::signed_pct(err)});
  }
  MESSAGE(table);
  test::check_doc_table(doc, "build/tests/test_replay -tc='validation: modern dense training (Korthikanti*'");
  REQUIRE(errs.size() == 8);
  MESSAGE("median |error| " << 100 * median(errs) << " %, max " << 100 * *std::max_element(errs.begin(), errs.end()) << " %");
  // The SC'21 validation's bounds (same software, hardware and fitted preset): max 10 %, median 5 %.
  CHECK(median(errs) <= 0.05);
}

// MegaScale (NSDI'24) Table 2, Megatron-LM rows (A100-class "Ampere", 175B with 128 heads, vocab 64000):
// iteration time. Assumed where the paper is silent: micro-batch 1, sequence parallel + selective
// recompute. ZeRO-2-style DP is Megatron's distributed optimizer as the cited commit runs it: not overlapped.
// Megatron-LM @285068c8 (the paper's Sec. 6.1) has no --overlap-grad-reduce: train_step calls
// optimizer.reduce_model_grads (one reduce-scatter per gradient buffer) after forward_backward_func returns,
// and gather_model_params after optimizer.step (megatron/training.py, megatron/optimizer/distrib_optimizer.py
// at that commit); the paper's Sec. 3.2 and Table 3 ("with DP overlap", +1.5 MFU points) claim the overlap as
// MegaScale's own.
TEST_CASE("validation: modern dense training (MegaScale Table 2, Megatron-LM iteration time)") {
  std::vector<double> errs;
  std::string table = "row | published s | sim s | error\n";
  test::DocTable doc{"megascale-table2", {"row", "published", "simulated", "error"}, {false, true, true, true}, {}};
  // Where each simulated step goes (per-rank averages, seconds), beside the published step.
  test::DocTable terms{"megascale-table2-terms",
                       {"GPUs", "DP", "micro-batches", "compute", "exposed TP", "exposed PP", "exposed DP", "bubble",
                        "simulated", "published", "published − simulated"},
                       {true, true, true, true, true, true, true, true, true, true, true},
                       {}};
  std::vector<double> mbs, pub_s, sim_s_all;
  std::map<std::string, std::vector<double>> parts;  // per-row seconds of each simulated term
  std::vector<int> batch;                            // global batch of each row
  auto signed_s = [](double v) {  // "+1.09" / "−0.78" (the tables' minus sign)
    const std::string t = test::fmt("%+.2f", v);
    return t[0] == '-' ? "\u2212" + t.substr(1) : t;
  };
  for (const auto& r : read_csv_rows(kData + "megascale_megatron.csv")) {
    const int gpus = std::stoi(r.at("num_gpus"));
    const int tp = std::stoi(r.at("tp")), pp = std::stoi(r.at("pp")), gbs = std::stoi(r.at("global_batch_seqs"));
    Json p = {{"num_layers", std::stoi(r.at("layers"))}, {"hidden_size", std::stoi(r.at("hidden"))},
              {"num_attention_heads", std::stoi(r.at("heads"))}, {"seq_length", std::stoi(r.at("seq_len"))},
              {"padded_vocab_size", std::stoi(r.at("vocab"))}, {"micro_batch_size", 1},
              {"global_batch_size", gbs},
              {"tensor_model_parallel_size", tp}, {"pipeline_model_parallel_size", pp},
              {"virtual_pipeline_model_parallel_size", std::stoi(r.at("vpp"))}, {"recompute_granularity", "selective"},
              {"sequence_parallel", true}, {"use_distributed_optimizer", true}, {"overlap_grad_reduce", false}};
    // Analytic communication model: these runs go to 12,288 GPUs and the suite must stay fast.
    const sim::RunResult res = a100_result(p, gpus, r.at("row_label"), "analytic");
    const double sim_s = res.iteration_s;
    const double pub = std::stod(r.at("iteration_s"));
    const double err = (sim_s - pub) / pub;
    errs.push_back(std::abs(err));
    // Looser than the SC'21 bounds because micro-batch and recompute are assumed, not published.
    // 13.5 %: measured up to 13.2 % (12,288 GPUs) with the gradient reduce-scatter after the backward and one
    // reduce-scatter / all-gather per model-chunk buffer, as the cited commit runs them (12.7 % when the
    // simulation cut 40M-element buckets the commit does not have; 15.4 % with the reduce-scatter overlapped).
    CHECK_MESSAGE(std::abs(err) <= 0.135, r.at("row_label") << " error " << 100 * err << " %");
    char buf[200];
    std::snprintf(buf, sizeof buf, "%s | %.2f | %.2f | %+.1f %%\n", r.at("row_label").c_str(), pub, sim_s, 100 * err);
    table += buf;
    doc.add({r.at("row_label"), test::fmt("%.2f s", pub), test::fmt("%.2f s", sim_s), test::signed_pct(err)});
    const int dp = gpus / (tp * pp), m = gbs / dp;  // micro-batch 1: micro-batches per pipeline per step
    const auto& b = res.breakdown;
    auto ex = [&b](const char* k) {
      auto it = b.exposed_comm_s.find(k);
      return it == b.exposed_comm_s.end() ? 0.0 : it->second;
    };
    double other = b.idle_s;
    for (const auto& [k, v] : b.exposed_comm_s)
      if (std::string(k) != "tp" && std::string(k) != "pp" && std::string(k) != "dp") other += v;
    CHECK(other < 0.01 * sim_s);  // every simulated second is in one of the columns
    terms.add({std::to_string(gpus), std::to_string(dp), std::to_string(m), test::fmt("%.2f", b.compute_s),
               test::fmt("%.2f", ex("tp")), test::fmt("%.2f", ex("pp")), test::fmt("%.2f", ex("dp")),
               test::fmt("%.2f", b.bubble_s), test::fmt("%.2f", sim_s), test::fmt("%.2f", pub),
               signed_s(pub - sim_s)});
    mbs.push_back(m), pub_s.push_back(pub), sim_s_all.push_back(sim_s), batch.push_back(gbs);
    parts["compute"].push_back(b.compute_s), parts["exposed TP"].push_back(ex("tp"));
    parts["exposed PP"].push_back(ex("pp")), parts["exposed DP"].push_back(ex("dp")), parts["bubble"].push_back(b.bubble_s);
  }
  MESSAGE(table);
  test::check_doc_table(doc, "build/tests/test_replay -tc='validation: modern dense training (MegaScale*'");
  test::check_doc_table(terms, "build/tests/test_replay -tc='validation: modern dense training (MegaScale*'");
  REQUIRE(errs.size() == 8);
  MESSAGE("median |error| " << 100 * median(errs) << " %, max " << 100 * *std::max_element(errs.begin(), errs.end()) << " %");
  CHECK(median(errs) <= 0.10);
  // The published steps of both batch sizes (DP 4-192) lie on one line in the micro-batch count m: a
  // least-squares line t = a m + b (slope a, intercept b: the cost a step pays once, with its standard error),
  // printed beside the simulated one and each simulated term's (docs/validation.md reads them).
  // `rows`: the global batch of the rows fitted (0 = all).
  auto line = [&mbs, &batch](const std::vector<double>& t, int rows = 0) {
    std::vector<double> x, y;
    for (std::size_t k = 0; k < mbs.size(); ++k)
      if (rows == 0 || batch[k] == rows) x.push_back(mbs[k]), y.push_back(t[k]);
    const double n = double(x.size());
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (std::size_t k = 0; k < x.size(); ++k) sx += x[k], sy += y[k], sxx += x[k] * x[k], sxy += x[k] * y[k];
    const double a = (n * sxy - sx * sy) / (n * sxx - sx * sx), b = (sy - a * sx) / n;
    double worst = 0, ss = 0;
    for (std::size_t k = 0; k < x.size(); ++k) {
      const double r = a * x[k] + b - y[k];
      ss += r * r;
      if (y[k] > 0) worst = std::max(worst, std::abs(r) / y[k]);
    }
    const double se_b = std::sqrt(ss / (n - 2) * sxx / (n * sxx - sx * sx));
    return std::array<double, 4>{a, b, se_b, worst};
  };
  const auto lp = line(pub_s), ls = line(sim_s_all);
  MESSAGE("published t = " << lp[0] << " s x m + " << lp[1] << " s (max residual " << 100 * lp[3] << " %); simulated t = "
                           << ls[0] << " s x m + " << ls[1] << " s (max residual " << 100 * ls[3] << " %)");
  test::DocTable lines{"megascale-table2-lines",
                       {"steps fitted", "rows", "slope (s per micro-batch)", "intercept (s per step)", "± (standard error)",
                        "max residual"},
                       {false, true, true, true, true, true},
                       {}};
  auto s2 = [](double v) { return test::fmt("%.2f", std::abs(v) < 0.005 ? 0.0 : v); };  // no "-0.00"
  auto add_line = [&](const std::string& what, const std::vector<double>& t, int rows) {
    const auto l = line(t, rows);
    const auto n = rows == 0 ? mbs.size() : std::size_t(std::count(batch.begin(), batch.end(), rows));
    lines.add({what + (rows ? " (batch " + std::to_string(rows) + ")" : ""), std::to_string(n), test::fmt("%.4f", l[0]),
               s2(l[1]), s2(l[2]), test::fmt("%.1f %%", 100 * l[3])});
    return l;
  };
  add_line("published", pub_s, 0), add_line("published", pub_s, 768), add_line("published", pub_s, 6144);
  add_line("simulated", sim_s_all, 0), add_line("simulated", sim_s_all, 768), add_line("simulated", sim_s_all, 6144);
  double part_b = 0;
  for (const char* k : {"compute", "exposed TP", "exposed PP", "exposed DP", "bubble"}) {
    lines.add({std::string("simulated ") + k, std::to_string(mbs.size()), test::fmt("%.4f", line(parts[k])[0]),
               s2(line(parts[k])[1]), s2(line(parts[k])[2]), "\u2014"});
    part_b += line(parts[k])[1];
  }
  test::check_doc_table(lines, "build/tests/test_replay -tc='validation: modern dense training (MegaScale*'");
  // The simulation lacks a fixed per-step cost the published runs pay (docs/validation.md): its intercept is
  // below the published one and its slope above it -- on all rows and on each batch size's rows.
  CHECK(ls[1] < lp[1]);
  CHECK(ls[0] > lp[0]);
  CHECK(line(sim_s_all, 768)[1] < line(pub_s, 768)[1]);
  CHECK(line(sim_s_all, 6144)[1] < line(pub_s, 6144)[1]);
  // The simulated cost a step pays once is the DP reduce-scatter / all-gather and the pipeline fill and drain:
  // compute, TP and PP scale with m (their intercepts are near zero), the terms' intercepts add up to the step's.
  CHECK(std::abs(part_b - ls[1]) < 0.05);
  for (const char* k : {"compute", "exposed TP", "exposed PP"}) CHECK(std::abs(line(parts[k])[1]) < 0.05);
  // Checks and what-ifs on the 12,288- and 256-GPU shapes, printed for docs/validation.md. (1) bf16 instead of fp16
  // (precision is not printed): the commit then accumulates and reduce-scatters the gradients in fp32.
  Json last = {{"num_layers", 96}, {"hidden_size", 12288}, {"num_attention_heads", 128}, {"seq_length", 2048},
               {"padded_vocab_size", 64000}, {"micro_batch_size", 1}, {"global_batch_size", 6144},
               {"tensor_model_parallel_size", 8}, {"pipeline_model_parallel_size", 8},
               {"virtual_pipeline_model_parallel_size", 6}, {"recompute_granularity", "selective"},
               {"sequence_parallel", true}, {"use_distributed_optimizer", true}, {"overlap_grad_reduce", false}};
  // (0) The analytic model is a shortcut: NCCL's schedules on the flow engine price the largest row alike.
  const double t_engine = a100_iteration_s(last, 12288, "MegaScale 12288 GPUs, engine", "engine");
  MESSAGE("12288 GPUs with the engine communication model: " << t_engine << " s (analytic " << sim_s_all.back() << " s)");
  CHECK(std::abs(t_engine / sim_s_all.back() - 1) < 0.01);
  Json bf16 = last;
  bf16["precision"] = "bf16";
  const double t_bf16 = a100_iteration_s(bf16, 12288, "MegaScale 12288 GPUs, bf16", "analytic");
  MESSAGE("12288 GPUs in bf16 (fp32 gradient reduce-scatter): " << t_bf16 << " s, " << 100 * (t_bf16 / 8.57 - 1) << " %");
  CHECK(t_bf16 > sim_s_all.back());
  // (2) MegaScale's Table 3 setting (256 GPUs, batch 256): the speed-up from overlapping the DP reduce-scatter
  // and all-gather (published, on MegaScale's already optimised step: 58.0 -> 59.5 % MFU, 1.026x).
  Json t3 = last;
  t3["global_batch_size"] = 256;
  const sim::RunResult r3 = a100_result(t3, 256, "MegaScale Table 3 shape", "analytic");
  const double t3_plain = r3.iteration_s;
  // MegaScale's decoupled pipeline send / receive gained 2.5 MFU points there (55.5 -> 58.0 %, 1.045x): the
  // exposed PP communication of the simulated baseline step, for comparison.
  MESSAGE("256 GPUs, batch 256: exposed PP " << r3.breakdown.exposed_comm_s.at("pp") << " s of " << t3_plain << " s");
  t3["overlap_grad_reduce"] = true, t3["overlap_param_gather"] = true;
  const double t3_overlap = a100_iteration_s(t3, 256, "MegaScale Table 3 shape, DP overlap", "analytic");
  MESSAGE("256 GPUs, batch 256: DP overlap speeds the step up " << t3_plain / t3_overlap << "x (published 1.026x)");
  CHECK(t3_plain > t3_overlap);
}

namespace {
// MegaScale's model FLOPs per step, 72 B s L h^2 (1 + s / 6h + V / 12hL) (Narayanan et al. SC'21 Sec. 5.1): with
// the A100's 312 TFLOP/s dense fp16 peak it gives the published MFU of Table 2's 16 rows from their iteration
// times to within 1.6 % (column `check` of tests/data/training-modern/megascale_system.csv), so the simulated MFU
// is this count over the simulated step.
double megascale_mfu(int layers, int hidden, int gbs, int gpus, double step_s) {
  const double L = layers, h = hidden, s = 2048, V = 64000, B = gbs;
  const double f = 72.0 * B * s * L * h * h * (1.0 + s / (6.0 * h) + V / (12.0 * h * L));
  return f / (step_s * double(gpus) * 312e12);
}

// MegaScale's features, cumulative in its Table 3's order: 0 the Megatron-LM baseline (the Table 2 Megatron-LM
// rows' expression: micro-batch 1, SP + selective recompute, distributed optimizer without overlap, unfused
// attention), 1 + parallel transformer block, 2 + sliding-window attention (FlashAttention-2: a windowed kernel
// needs flash attention here), 3 + TP overlap, 4 + PP overlap (no parameter: the simulated pipeline already posts
// its receives ahead), 5 + DP overlap, 6 + efficient operators (FlashAttention-2 is in since 2; the fused
// path's norm and GeLU kernels are already single kernels), 7 + misc (data pipeline, nothing to express), 8 + LAMB
// (the row's batch: 768 in Table 3).
Json megascale_params(int layers, int hidden, int heads, int pp, int vpp, int gbs, int level, int window = 512) {
  Json p = {{"num_layers", layers}, {"hidden_size", hidden}, {"num_attention_heads", heads}, {"seq_length", 2048},
            {"padded_vocab_size", 64000}, {"micro_batch_size", 1}, {"global_batch_size", gbs},
            {"tensor_model_parallel_size", 8}, {"pipeline_model_parallel_size", pp},
            {"virtual_pipeline_model_parallel_size", vpp}, {"recompute_granularity", "selective"},
            {"sequence_parallel", true}, {"use_distributed_optimizer", true}, {"overlap_grad_reduce", false}};
  if (level >= 1) p["gpt_j_residual"] = true, p["gpt_j_tied"] = true;
  if (level >= 2) p["attention_backend"] = "flash", p["window_size"] = "(" + std::to_string(window) + ", 0)";
  if (level >= 3) p["tp_comm_overlap"] = true;
  if (level >= 5) p["overlap_grad_reduce"] = true, p["overlap_param_gather"] = true;
  if (level >= 8) p["optimizer"] = "lamb";
  return p;
}
}  // namespace

// MegaScale (NSDI'24) rows of its own system: Table 2's MegaScale rows (175B, 256-12,288 GPUs), Table 3's
// cumulative ablation (256 GPUs, batch 256; the LAMB row batch 768) and Figure 9's 530B weak scaling (both
// systems). The same A100 assumptions as the Megatron-LM rows (megatron-sc21 compute preset, DGX A100 SuperPOD,
// analytic communication); nothing fitted to these rows. The window of the sliding-window attention is not
// printed: 512 tokens here (chosen before running), 1024 and 2048 (= the sequence, no window) printed beside.
// Flash attention leaves the SC'21-fitted unfused pricing for the per-kernel fits (an A100 borrows the H200's
// FlashAttention-2 fit), so the MegaScale rows are also printed with unfused attention and no window.
TEST_CASE("validation: modern dense training (MegaScale's own system: Table 2, Table 3, Figure 9)") {
  const std::string cmd = "build/tests/test_replay -tc='validation: modern dense training (MegaScale*'";
  test::DocTable doc{"megascale-system",
                     {"row", "GPUs", "batch", "published MFU", "simulated MFU", "simulated step", "error",
                      "unfused, no window: MFU", "error"},
                     {false, true, true, true, true, true, true, true, true}, {}};
  test::DocTable abl{"megascale-ablation",
                     {"Table 3 row", "what the simulation adds", "published MFU", "published ratio", "simulated MFU",
                      "simulated ratio", "compute", "exposed TP", "exposed DP", "step"},
                     {false, false, true, true, true, true, true, true, true, true}, {}};
  std::vector<double> errs_t2, errs_f9, errs_t2_unfused;
  std::vector<double> pub3, sim3;
  std::vector<sim::RunResult> res3;
  const char* adds[] = {"the Megatron-LM rows' expression", "gpt_j_residual + gpt_j_tied",
                        "attention_backend flash, window_size (512, 0)", "tp_comm_overlap",
                        "nothing (receives already posted ahead)", "overlap_grad_reduce + overlap_param_gather",
                        "nothing (flash and fused kernels already)", "nothing (data pipeline)", "optimizer lamb, batch 768"};
  auto ex = [](const sim::RunResult& r, const char* k) {
    auto it = r.breakdown.exposed_comm_s.find(k);
    return it == r.breakdown.exposed_comm_s.end() ? 0.0 : it->second;
  };
  for (const auto& r : read_csv_rows(kData + "megascale_system.csv")) {
    const std::string table = r.at("table"), label = r.at("row_label");
    const int gpus = std::stoi(r.at("num_gpus")), gbs = std::stoi(r.at("global_batch_seqs"));
    const int layers = std::stoi(r.at("layers")), hidden = std::stoi(r.at("hidden")), heads = std::stoi(r.at("heads"));
    const int pp = std::stoi(r.at("pp")), vpp = std::stoi(r.at("vpp"));
    int level = has(label, "Megatron-LM") ? 0 : 8;
    if (table == "Table 3") level = std::stoi(label.substr(0, label.find(' '))) - 1;
    const Json p = megascale_params(layers, hidden, heads, pp, vpp, gbs, level);
    const sim::RunResult res = a100_result(p, gpus, table + " " + label, "analytic");
    const double mfu = megascale_mfu(layers, hidden, gbs, gpus, res.iteration_s);
    const double pub = std::stod(r.at("mfu_pct")) / 100.0;
    const double err = mfu / pub - 1.0;  // on throughput: positive = the simulation is faster
    MESSAGE(table << " " << label << ": step " << res.iteration_s << " s, MFU " << 100 * mfu << " % (published " << 100 * pub
                  << " %), " << 100 * err << " %");
    if (table == "Table 3") {
      const int k = level;
      pub3.push_back(pub), sim3.push_back(mfu), res3.push_back(res);
      // Ratio to the previous row's MFU: its step-time speed-up at the same batch; the LAMB row triples the batch.
      abl.add({label, adds[k], test::fmt("%.1f %%", 100 * pub), k ? test::fmt("%.3fx", pub / pub3[k - 1]) : "\u2014",
               test::fmt("%.1f %%", 100 * mfu), k ? test::fmt("%.3fx", mfu / sim3[k - 1]) : "\u2014",
               test::fmt("%.2f s", res.breakdown.compute_s), test::fmt("%.2f s", ex(res, "tp")),
               test::fmt("%.2f s", ex(res, "dp")), test::fmt("%.2f s", res.iteration_s)});
      continue;
    }
    std::vector<std::string> cells = {table + ", " + label, std::to_string(gpus), std::to_string(gbs),
                                      test::fmt("%.1f %%", 100 * pub), test::fmt("%.1f %%", 100 * mfu),
                                      test::fmt("%.2f s", res.iteration_s), test::signed_pct(err)};
    if (level > 0) {
      Json u = p;
      u.erase("window_size"), u["attention_backend"] = "unfused";
      const double mu = megascale_mfu(layers, hidden, gbs, gpus, a100_iteration_s(u, gpus, label + ", unfused", "analytic"));
      cells.push_back(test::fmt("%.1f %%", 100 * mu)), cells.push_back(test::signed_pct(mu / pub - 1.0));
      if (table == "Table 2") errs_t2_unfused.push_back(std::abs(mu / pub - 1.0));
    } else {
      cells.push_back("\u2014"), cells.push_back("\u2014");
    }
    doc.add(cells);
    (table == "Table 2" ? errs_t2 : errs_f9).push_back(std::abs(err));
    // The simulated MegaScale steps are longer than the published ones on every Table 2 row (docs/validation.md:
    // the simulation's features gain less than MegaScale's did).
    if (table == "Table 2") CHECK(err < 0);
  }
  REQUIRE(errs_t2.size() == 8);
  REQUIRE(errs_f9.size() == 6);
  REQUIRE(sim3.size() == 9);
  auto mx = [](const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); };
  MESSAGE("Table 2 MegaScale rows: median |error| " << 100 * median(errs_t2) << " %, max " << 100 * mx(errs_t2)
                                                     << " % (unfused, no window: " << 100 * median(errs_t2_unfused)
                                                     << " %, max " << 100 * mx(errs_t2_unfused) << " %)");
  MESSAGE("Figure 9 rows: median |error| " << 100 * median(errs_f9) << " %, max " << 100 * mx(errs_f9) << " %");
  // Bounds: measured 2026-11-28 (median 9.4 %, max 16.9 % on Table 2; 5.3 % / 11.0 % on Figure 9), rounded up;
  // they fail if a change moves these rows further from the published runs.
  CHECK(median(errs_t2) <= 0.10);
  CHECK(mx(errs_t2) <= 0.17);
  CHECK(median(errs_f9) <= 0.06);
  CHECK(mx(errs_f9) <= 0.12);
  // What each step of the ablation changes in the simulation (Table 3 rows 1-9, index 0-8).
  // The parallel block halves the exposed TP time (one all-gather and one reduce-scatter a layer instead of two).
  CHECK(ex(res3[1], "tp") == doctest::Approx(0.5 * ex(res3[0], "tp")).epsilon(0.02));
  CHECK(sim3[1] > sim3[0]);
  // PP overlap, efficient operators and misc add nothing to the simulated step.
  CHECK(res3[4].iteration_s == res3[3].iteration_s);
  CHECK(res3[7].iteration_s == res3[5].iteration_s);
  // DP overlap: the exposed DP communication shrinks and the step with it.
  CHECK(ex(res3[5], "dp") < 0.5 * ex(res3[4], "dp"));
  CHECK(sim3[5] > sim3[4]);
  // Table 3 row 8 with LAMB at batch 256 (not a published row): the optimizer's extra passes cost little.
  Json lamb256 = megascale_params(96, 12288, 128, 8, 6, 256, 8);
  const double t_lamb256 = a100_iteration_s(lamb256, 256, "Table 3 row 8 + LAMB, batch 256", "analytic");
  MESSAGE("LAMB at batch 256: " << t_lamb256 << " s against " << res3[7].iteration_s << " s with Adam");
  CHECK(t_lamb256 > res3[7].iteration_s);
  CHECK(t_lamb256 < 1.005 * res3[7].iteration_s);
  // Attention variants on Table 3 row 2's shape (parallel block, batch 256): unfused, flash without and with windows.
  test::DocTable win{"megascale-window", {"attention (Table 3 row 2 shape)", "simulated step", "compute", "simulated MFU"},
                     {false, true, true, true}, {}};
  std::vector<double> steps;
  for (int w : {0, 2048, 1024, 512}) {
    Json p = megascale_params(96, 12288, 128, 8, 6, 256, 1);
    if (w > 0) p["attention_backend"] = "flash", p["window_size"] = "(" + std::to_string(w) + ", 0)";
    const sim::RunResult r = w == 0 ? res3[1] : a100_result(p, 256, "window " + std::to_string(w), "analytic");
    steps.push_back(r.iteration_s);
    win.add({w == 0 ? "unfused (Table 3 row 2)" : "flash, window_size (" + std::to_string(w) + ", 0)" + (w == 2048 ? ": no window" : ""),
             test::fmt("%.2f s", r.iteration_s), test::fmt("%.2f s", r.breakdown.compute_s),
             test::fmt("%.1f %%", 100 * megascale_mfu(96, 12288, 256, 256, r.iteration_s))});
  }
  CHECK(steps[3] < steps[1]);  // a 512-token window shortens the flash step
  test::check_doc_table(doc, cmd);
  test::check_doc_table(abl, cmd);
  test::check_doc_table(win, cmd);
}

// llm-foundry MPT benchmarks (PyTorch FSDP, 8-512 GPUs, seq 512-65536, A100 40/80 GB and H100, bf16 and
// fp8): every row is expressed (MHA, GELU 4h, LayerNorm without linear biases -- expressed as the
// LayerNorm shape, ALiBi as rope: no position parameters -- triton flash attention, the MPT yamls' fused
// cross entropy (loss_fn: fused_crossentropy) as cross_entropy_loss_fusion, FULL_SHARD or
// SHARD_GRAD_OP as FSDP, grad accumulation as micro-batches) and run. Throughput is priced by the default
// per-kernel compute model (A100 borrows the H200 fit), and the table is printed, not bounded (median |error|
// 14.7 % over the 216 rows, 2026-11-26, docs/validation.md).
TEST_CASE("validation: modern dense training (llm-foundry MPT tokens/s per GPU)") {
  std::vector<double> errs;
  int rows = 0, run = 0;
  std::string table = "row | GPU | published TPS/GPU | sim | error\n";
  std::map<std::string, std::vector<double>> by_group;  // signed errors by "GPU, precision" (and "all")
  for (const auto& r : read_csv_rows(kData + "llmfoundry_mpt.csv")) {
    ++rows;
    const std::string g = r.at("gpu");
    const std::string gpu = g == "h100_80gb" ? "h100" : g == "a100_80gb" ? "a100-80gb" : "a100-40gb";
    const int gpus = std::stoi(r.at("num_gpus")), mbs = std::stoi(r.at("micro_batch"));
    const int accum = std::stoi(r.at("other_settings").substr(std::string("grad accum ").size()));
    Json p = {{"num_layers", std::stoi(r.at("layers"))}, {"hidden_size", std::stoi(r.at("hidden"))},
              {"num_attention_heads", std::stoi(r.at("heads"))}, {"ffn_hidden_size", std::stoi(r.at("ffn_hidden"))},
              {"seq_length", std::stoi(r.at("seq_len"))}, {"padded_vocab_size", std::stoi(r.at("vocab"))},
              {"position_embedding_type", "rope"}, {"hidden_dropout", 0}, {"attention_dropout", 0},
              {"attention_backend", "flash"}, {"cross_entropy_loss_fusion", true},
              {"gpu", gpu}, {"world_size", gpus}, {"tensor_model_parallel_size", 1},
              {"pipeline_model_parallel_size", 1}, {"micro_batch_size", mbs}, {"global_batch_size", mbs * accum * gpus},
              {"precision", r.at("precision") == "amp_fp8" ? "fp8" : "bf16"},
              {"recompute_granularity", has(r.at("recompute"), "checkpointing") ? "full" : "none"}};
    // llm-foundry shards with FSDP1 (Composer's FullyShardedDataParallel, flat parameters): torch FSDP without
    // FSDP2's copy-in / copy-out / chunk-cat kernels.
    if (has(r.at("fsdp_zero"), "FULL_SHARD")) p["use_torch_fsdp2"] = true, p["fsdp_flat_params"] = true;
    else p["data_parallel_sharding_strategy"] = "optim_grads", p["use_distributed_optimizer"] = true;
    Row row;
    row.label = r.at("row_label");
    row.gpu = gpu;
    row.node = gpu == "h100" ? "dgx-h100" : "dgx-a100";
    row.gpus = gpus;
    row.params = p;
    Outcome o = simulate(row);
    const double tps = std::stod(r.at("tokens_per_s_per_gpu"));
    char buf[300];
    if (o.sim > 0) {
      ++run;
      errs.push_back(std::abs(o.sim - tps) / tps);
      const std::string group = std::string(g == "h100_80gb" ? "H100" : g == "a100_80gb" ? "A100 80 GB" : "A100 40 GB") +
                                ", " + (r.at("precision") == "amp_fp8" ? "fp8" : "bf16");
      by_group[group].push_back((o.sim - tps) / tps);
      by_group["all"].push_back((o.sim - tps) / tps);
      std::snprintf(buf, sizeof buf, "%s | %s | %.0f | %.0f | %+.0f %%\n", row.label.c_str(), gpu.c_str(), tps, o.sim,
                    100 * (o.sim - tps) / tps);
    } else {
      std::snprintf(buf, sizeof buf, "%s | %s | %.0f | not run: %.100s\n", row.label.c_str(), gpu.c_str(), tps,
                    o.error.c_str());
    }
    table += buf;
  }
  MESSAGE(table);
  MESSAGE(run << " of " << rows << " rows run; median |error| " << 100 * median(errs) << " %");
  test::DocTable doc{"llm-foundry-mpt",
                     {"GPU, precision", "rows", "median |error|", "median signed error", "max |error|", "within 10 %"},
                     {false, true, true, true, true, true}, {}};
  for (const char* gname : {"A100 40 GB, bf16", "A100 80 GB, bf16", "H100, bf16", "H100, fp8", "all"}) {
    if (!by_group.count(gname)) continue;
    const auto& v = by_group.at(gname);
    std::vector<double> a;
    int within = 0;
    for (double e : v) a.push_back(std::abs(e)), within += std::abs(e) <= 0.10;
    doc.add({gname, std::to_string(v.size()), test::fmt("%.1f %%", 100 * median(a)), test::signed_pct(median(v)),
             test::fmt("%.1f %%", 100 * *std::max_element(a.begin(), a.end())), std::to_string(within)});
  }
  test::check_doc_table(doc, "build/tests/test_replay -tc='validation: modern dense training (llm-foundry*'");
  CHECK(rows == 216);
  CHECK(run == 216);  // every row fits its GPU, as the published runs did
}

