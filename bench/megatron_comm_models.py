#!/usr/bin/env python3
"""Megatron-LM SC'21 Table 1 rows under one communication model, with wall time per row.

usage: bench/megatron_comm_models.py engine|shared|analytic [FABRICSIM_BINARY] [WORK_DIR]

Writes one scenario per row (the same as tests/replay/test_training_validation.cpp: superpod of DGX A100,
compute efficiencies from tests/data/training/megatron_fit.json) into WORK_DIR (default: a temporary
directory), runs `fabricsim run ROW --comm-model MODEL --quiet --json RESULT` and prints achieved TFLOP/s
per GPU, the error against the paper and the wall time of the run. Results: docs/performance.md.
"""
import csv
import json
import os
import subprocess
import sys
import tempfile
import time

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
data = os.path.join(root, "tests", "data", "training")
mode = sys.argv[1] if len(sys.argv) > 1 else "engine"
binary = sys.argv[2] if len(sys.argv) > 2 else os.path.join(root, "build", "apps", "fabricsim")
work = sys.argv[3] if len(sys.argv) > 3 else tempfile.mkdtemp(prefix="fabricsim_megatron_")
fit = json.load(open(os.path.join(data, "megatron_fit.json")))
for r in csv.DictReader(open(os.path.join(data, "megatron_sc21_table1_a100.csv"))):
    p = {"num_layers": int(r["num_layers"]), "hidden_size": int(r["hidden_size"]),
         "num_attention_heads": int(r["attention_heads"]), "seq_length": int(r["seq_len"]),
         "padded_vocab_size": int(r["vocab_size"]), "micro_batch_size": int(r["micro_batch_size"]),
         "global_batch_size": int(r["global_batch_size"]), "tensor_model_parallel_size": int(r["tensor_parallel"]),
         "pipeline_model_parallel_size": int(r["pipeline_parallel"]), "recompute_granularity": "full"}
    if r["virtual_pipeline_layers_per_stage"]:
        p["num_layers_per_virtual_pipeline_stage"] = int(r["virtual_pipeline_layers_per_stage"])
    scenario = {"topology": {"preset": "superpod", "params": {"nodes": int(r["num_gpus"]) // 8, "node": "dgx-a100"}},
                "workload": {"generator": "gpt", "params": p}, "compute": fit["compute"]}
    label = r["model_size_label"]
    sc = os.path.join(work, "row_%s.json" % label)
    res = os.path.join(work, "res_%s_%s.json" % (mode, label))
    json.dump(scenario, open(sc, "w"))
    t0 = time.time()
    out = subprocess.run([binary, "run", sc, "--comm-model", mode, "--quiet", "--json", res],
                         capture_output=True, text=True)
    wall = time.time() - t0
    if out.returncode:
        print("%-6s error: %s" % (label, out.stderr.strip()[-300:]))
        continue
    tflops = json.load(open(res))["tflops_per_gpu"]
    paper = float(r["achieved_tflops_per_gpu"])
    print("%-6s %5s GPUs  paper %5.1f  simulated %6.2f  error %+5.1f %%  wall %.1f s" %
          (label, r["num_gpus"], paper, tflops, 100 * (tflops - paper) / paper, wall), flush=True)
