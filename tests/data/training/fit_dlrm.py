#!/usr/bin/env python3
"""Fit the two DLRM compute parameters (embedding memory efficiency, per-op framework overhead) on 3 rows of
the distributed-embeddings synthetic step times (Tiny 1 GPU, Small 1 GPU, Small 8 GPUs) by grid search
minimising the sum of squared relative step-time errors; the other 5 rows are predictions. Writes
dlrm_fit.json next to this script. Usage: fit_dlrm.py path/to/fabricsim

The workload parameters below describe how the benchmark runs; they are taken from its source, not fitted:
  github:NVIDIA-Merlin/distributed-embeddings @ c6b2e2f (the commit whose step times the README reports)
  - TensorFlow ops per input and per table (embedding_ops=tensorflow; op list in workloads/dlrm.cpp).
  - examples/benchmarks/synthetic_models/synthetic_models.py: SyntheticModel uses
    DistributedEmbedding(strategy="memory_balanced", dp_input=False): model-parallel input, no id all-to-all.
  - examples/benchmarks/synthetic_models/README.md: the multi-GPU command passes
    --column_slice_threshold $((1280*1048576)) (without it Medium puts 120 GiB on one 80 GB GPU).
  - synthetic_models.py gen_power_law_data (main.py default alpha 1.05): numpy int64 ids turned into tensors
    with tf.convert_to_tensor, i.e. in host memory (convert_to_tensor makes a CPU eager tensor:
    github:tensorflow/tensorflow issue #42242), looked up on the GPU every step: a host->device copy of
    8 bytes per id per step. H2D 26.28 GB/s: measured nvbandwidth on A100 (ND A100 v4),
    /work/shared/data/hardware/hardware_specs.json facts[12]; 2 GPUs per PCIe switch in a DGX A100
    (topologies/presets.cpp dgx-a100 PCIe tree).
  - Horovod runs every collective from its background thread, which cycles every HOROVOD_CYCLE_TIME
    (default 1 ms since Horovod v0.21.0, changelog "Changed default cycle time from 5ms to 1ms"): a
    collective waits half a cycle on average, 0.5 ms. (Assumes the README's container,
    nvcr.io/nvidia/tensorflow:22.02-tf2-py3, ships Horovod >= v0.21.0; its version is not verified here.)
"""
import csv, json, os, subprocess, sys, tempfile
HERE = os.path.dirname(os.path.abspath(__file__))
FS = sys.argv[1]
FIT = [('Tiny', 1), ('Small', 1), ('Small', 8)]
WORKLOAD = {"embedding_ops": "tensorflow", "sharding": "memory_balanced", "column_slice_threshold": 1280 * 1048576, "host_input": True,
            "index_bytes": 8, "h2d_bandwidth": "26.28GB/s", "gpus_per_pcie_uplink": 2,
            "collective_latency": "0.5ms"}
rows = [r for r in csv.DictReader(open(os.path.join(HERE, 'distributed_embeddings_benchmarks.csv')))
        if r['table'] == 'synthetic_step_time' and (r['model'], int(r['num_gpus'])) in FIT]
tmp = tempfile.mkdtemp()
def step_ms(r, emb_eff, overhead_us):
    n = int(r['num_gpus'])
    topo = {"preset": "dgx-a100"} if n <= 8 else {"preset": "superpod", "params": {"nodes": n // 8, "node": "dgx-a100"}}
    params = {"configs": os.path.join(HERE, 'distributed_embeddings_synthetic_configs.json'), "model": r['model'].lower(),
              "global_batch_size": int(r['global_batch_size']), "world_size": n}
    params.update(WORKLOAD)
    sc = {"topology": topo, "workload": {"generator": "dlrm", "params": params},
          "compute": {"embedding": {"memory_efficiency": emb_eff}, "kernel_overhead": f"{overhead_us}us"}}
    p = os.path.join(tmp, 'sc.json'); json.dump(sc, open(p, 'w'))
    subprocess.run([FS, 'run', p, '-q', '--json', os.path.join(tmp, 'r.json')], check=True, capture_output=True)
    return json.load(open(os.path.join(tmp, 'r.json')))['iteration_s'] * 1e3
best = None
for e in [round(0.30 + 0.02 * i, 2) for i in range(26)]:        # 0.30 .. 0.80
    for o in range(20, 82, 2):                                  # 20 .. 80 us
        sse = sum(((step_ms(r, e, o) - float(r['step_time_ms'])) / float(r['step_time_ms'])) ** 2 for r in rows)
        if best is None or sse < best[0]:
            best = (sse, e, o)
out = {"fit_rows": [f"{m}/{n}" for m, n in FIT], "sse": best[0],
       "compute": {"embedding": {"memory_efficiency": best[1]}, "kernel_overhead": f"{best[2]}us"},
       "workload": WORKLOAD,
       "note": "compute: fitted by fit_dlrm.py (kernel_overhead is the per-op TensorFlow framework overhead: 2 ops "
               "per input forward, 3 per input + 3 per table shard backward, MLP ops; not a CUDA launch latency). "
               "workload: how the benchmark runs, from its source (see fit_dlrm.py), not fitted."}
json.dump(out, open(os.path.join(HERE, 'dlrm_fit.json'), 'w'), indent=1)
print(json.dumps(out))
