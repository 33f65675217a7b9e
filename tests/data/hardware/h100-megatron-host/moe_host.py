#!/usr/bin/env python3
"""Host (CPU) time and kernel launches of Megatron-core's MoE layer (Megatron-LM 1e057005, megatron/core only,
local spec: no Transformer Engine, no DeepEP, no grouped_gemm package) on one GPU, eager, bf16, forward+backward.
Shape: Qwen3-235B-A22B (hidden 4096, 64 heads / 4 KV groups, head dim 128, expert ffn 1536, top-8, RMSNorm,
qk-layernorm, SwiGLU, aux-loss router in fp32) with E local experts (row 97: 128 experts over EP 8 = 16 local).
One GPU means EP 1 and the alltoall dispatcher (no collective), SequentialMLP experts (one fc1/act/fc2 per expert).
Host time = wall time per iteration at few tokens (the GPU keeps up), checked against the GPU's busy time from the
profiler. Writes moe_host.csv and prints everything."""
import os, sys, time, csv, traceback
import torch, torch.nn.functional as F
out = sys.argv[1]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault('MASTER_ADDR', '127.0.0.1'); os.environ.setdefault('MASTER_PORT', '29517')
torch.distributed.init_process_group('nccl', rank=0, world_size=1)
torch.cuda.set_device(0)
from megatron.core import parallel_state
from megatron.core.tensor_parallel.random import model_parallel_cuda_manual_seed
from megatron.core.transformer.transformer_config import TransformerConfig
from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
from megatron.core.transformer.moe.moe_layer import MoELayer
from megatron.core.transformer.transformer_layer import TransformerLayer
parallel_state.initialize_model_parallel(1, 1)
model_parallel_cuda_manual_seed(123)
import dataclasses
FIELDS = {f.name for f in dataclasses.fields(TransformerConfig)}
def cfg(E, **kw):
    d = dict(num_layers=1, hidden_size=4096, num_attention_heads=64, num_query_groups=4, kv_channels=128,
             ffn_hidden_size=12288, num_moe_experts=E, moe_ffn_hidden_size=1536, moe_router_topk=8,
             moe_router_load_balancing_type='aux_loss', moe_aux_loss_coeff=1e-3, moe_router_dtype='fp32',
             moe_token_dispatcher_type='alltoall', moe_grouped_gemm=False, add_bias_linear=False,
             gated_linear_unit=True, activation_func=F.silu, normalization='RMSNorm', qk_layernorm=True,
             bf16=True, params_dtype=torch.bfloat16, hidden_dropout=0.0, attention_dropout=0.0,
             use_cpu_initialization=False, perform_initialization=True)
    d.update(kw)
    dropped = [k for k in d if k not in FIELDS]
    if dropped: print('config fields not at this commit, dropped:', dropped, flush=True)
    return TransformerConfig(**{k: v for k, v in d.items() if k in FIELDS})
rows = []
def measure(name, mod, fwd, tokens, iters=30):
    x = torch.randn(tokens, 1, 4096, device='cuda', dtype=torch.bfloat16, requires_grad=True)
    def step():
        y = fwd(mod, x); y.backward(torch.ones_like(y))
    def fonly():
        with torch.no_grad(): fwd(mod, x)
    for _ in range(5): step()
    torch.cuda.synchronize()
    res = {}
    for tag, fn in (('fwd', fonly), ('fwd+bwd', step)):
        t = []
        for _ in range(iters):
            torch.cuda.synchronize(); a = time.perf_counter(); fn(); b = time.perf_counter(); torch.cuda.synchronize(); c = time.perf_counter()
            t.append((b - a, c - a))
        t.sort(); host = t[len(t) // 2][0]; total = sorted(q[1] for q in t)[len(t) // 2]
        from torch.profiler import profile, ProfilerActivity
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
            fn(); torch.cuda.synchronize()
        ev = p.events()
        kern = [e for e in ev if e.device_type == torch.autograd.DeviceType.CUDA]
        launches = sum(1 for e in ev if e.name in ('cudaLaunchKernel', 'cudaLaunchKernelExC', 'cuLaunchKernel', 'cuLaunchKernelEx'))
        memcpy = sum(1 for e in ev if 'Memcpy' in e.name and e.device_type != torch.autograd.DeviceType.CUDA)
        syncs = sum(1 for e in ev if e.name in ('cudaStreamSynchronize', 'cudaDeviceSynchronize', 'cudaEventSynchronize'))
        gpu_busy = sum(e.device_time_total if hasattr(e, 'device_time_total') else e.cuda_time_total for e in kern) / 1e6
        r = dict(module=name, tokens=tokens, pass_=tag, host_ms_median=round(host * 1e3, 3), wall_ms_median=round(total * 1e3, 3),
                 gpu_kernels=len(kern), launch_calls=launches, memcpy_calls=memcpy, sync_calls=syncs, gpu_busy_ms=round(gpu_busy * 1e3, 3))
        print(r, flush=True); rows.append(r)
def run(name, build, fwd, tokens_list):
    try:
        mod = build().cuda()
        mod.train()
        for tk in tokens_list: measure(name, mod, fwd, tk)
        del mod; torch.cuda.empty_cache()
    except Exception:
        print('FAILED', name); traceback.print_exc(); sys.stdout.flush()
# eager launch floor on this host
a = torch.zeros(1, device='cuda'); torch.cuda.synchronize(); t0 = time.perf_counter()
for _ in range(2000): a.add_(1)
t1 = time.perf_counter(); torch.cuda.synchronize()
print(f'eager tiny add: {(t1 - t0) / 2000 * 1e6:.2f} us host per launch', flush=True)
rows.append(dict(module='torch tiny add_ (host us per launch)', tokens=0, pass_='fwd', host_ms_median=round((t1 - t0) / 2000 * 1e3, 5), wall_ms_median='', gpu_kernels=1, launch_calls=1, memcpy_calls=0, sync_calls=0, gpu_busy_ms=''))
moe_fwd = lambda m, x: m(x)[0]
layer_fwd = lambda m, x: m(x, attention_mask=None)[0]
for E in (8, 16, 32):
    run(f'MoELayer E={E}', lambda: MoELayer(cfg(E), get_gpt_layer_local_spec(num_experts=E, moe_grouped_gemm=False, qk_layernorm=True, normalization='RMSNorm').submodules.mlp.submodules), moe_fwd, (64, 1024) if E == 16 else (64,))
run('TransformerLayer MoE E=16', lambda: TransformerLayer(cfg(16), get_gpt_layer_local_spec(num_experts=16, moe_grouped_gemm=False, qk_layernorm=True, normalization='RMSNorm').submodules, layer_number=1), layer_fwd, (64, 1024))
run('TransformerLayer dense ffn 12288', lambda: TransformerLayer(cfg(None), get_gpt_layer_local_spec(qk_layernorm=True, normalization='RMSNorm').submodules, layer_number=1), layer_fwd, (64, 1024))
with open(os.path.join(out, 'moe_host.csv'), 'w', newline='') as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0].keys())); w.writeheader(); w.writerows(rows)
print('done', flush=True)
