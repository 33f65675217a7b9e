#!/usr/bin/env python3
"""Writes workloads/megatron_flags.cpp, the table of Megatron-LM's command-line flags that
`fabricsim import megatron` reads (docs/workloads.md, "Megatron-LM launch scripts").

    python3 scripts/megatron_flags.py MEGATRON_LM 1e057005 d48bd6be d98e8a64 > workloads/megatron_flags.cpp

(1e057005: main of 2025-05-24; d48bd6be: the dev branch of 2026-08-21, which Megatron-MoE-ModelZoo's recipes need
for --offload-optimizer-states; d98e8a64: main of 2026-08-22. The commits are given oldest first.)

MEGATRON_LM is a git clone of NVIDIA/Megatron-LM holding the commits; the script reads their sources with `git show`
(nothing of Megatron-LM is imported or run). Every commit's flags are in the table: a flag a later commit dropped
stays (older launch scripts still import), and each row says which of the commits have its option string; its
dest, kind, default, line and group come from the newest commit that has it.

The flags come from megatron/training/arguments.py: its `add_argument` calls (option, dest, action, type, nargs,
default, read with Python's ast module) and, from 2026, the ArgumentGroupFactory groups it builds from dataclasses
(megatron/training/argument_utils.py: one --field-name per init field not excluded; bool fields store_true when
their default is False, else store_false spelled --no-NAME and --disable-NAME; Optional[X] is X, list[X] nargs '+',
a Literal the type of its choices, anything else a string; a field's metadata "argparse_meta" overrides all of it),
read from the dataclass sources. The class of each flag is decided here, by the rules below (the argument group a
flag is declared in, then per-flag exceptions):
  model        the `gpt` generator models it (the importer maps it to a generator parameter; see
               workloads/megatron_args.cpp);
  no_effect    it does not change a training step's time or memory (learning rate, data, checkpointing,
               logging, evaluation, tokenizer files, seeds, initialisation, inference-only settings, or
               settings of other models than pretrain_gpt.py's, or of a feature that is itself not modelled);
  not_modelled it would change the step, but fabricsim does not simulate it (a warning lists it);
  rejected     Megatron-LM's validate_args refuses it (deprecated: it exits with a message).
"""
import ast
import subprocess
import sys

# Argument groups (the _add_*_args function a flag is declared in) whose flags all leave the step alone.
NO_EFFECT_GROUPS = {
    "_add_inference_args", "_add_retro_args", "_add_straggler_detector_args",
    "_add_workload_inspector_server_args", "_add_inprocess_restart_args", "_add_one_logger_args",
    "_add_ft_package_args", "_add_config_logger_args", "_add_logging_args", "_add_rerun_machine_args",
    "_add_initialization_args", "_add_learning_rate_args", "_add_checkpointing_args", "_add_validation_args",
    "_add_tokenizer_args", "_add_data_args", "_add_autoresume_args", "_add_biencoder_args", "_add_vision_args",
    "_add_msc_args",
}
# Flags (by dest) the generator models; the importer maps each (same name, or its rule).
MODEL = set("""
num_layers hidden_size ffn_hidden_size num_attention_heads attention_backend kv_channels group_query_attention
num_query_groups max_position_embeddings position_embedding_type use_rotary_position_embeddings
make_vocab_size_divisible_by normalization swiglu untie_embeddings_and_output_weights multi_latent_attention
mtp_num_layers attention_dropout hidden_dropout micro_batch_size global_batch_size recompute_activations
recompute_granularity recompute_method recompute_num_layers recompute_modules tp_comm_overlap tp_comm_bulk_wgrad
cross_entropy_loss_fusion sequence_parallel fp8 fp8_recipe fp16 bf16 grad_reduce_in_bf16
accumulate_allreduce_grads_in_fp32 tensor_model_parallel_size pipeline_model_parallel_size
decoder_first_pipeline_num_layers decoder_last_pipeline_num_layers num_layers_per_virtual_pipeline_stage
num_virtual_stages_per_pipeline_rank overlap_p2p_comm overlap_grad_reduce ddp_bucket_size ddp_num_buckets overlap_param_gather
overlap_param_gather_with_optimizer_step align_param_gather align_grad_reduce
account_for_embedding_in_pipeline_split account_for_loss_in_pipeline_split use_distributed_optimizer
data_parallel_sharding_strategy num_distributed_optimizer_instances use_torch_fsdp2 use_custom_fsdp
context_parallel_size cp_comm_type vocab_size tokenizer_type seq_length expert_model_parallel_size
expert_tensor_parallel_size num_experts moe_layer_freq moe_ffn_hidden_size moe_shared_expert_intermediate_size
moe_shared_expert_overlap moe_grouped_gemm moe_router_load_balancing_type moe_router_topk moe_router_num_groups
moe_router_group_topk moe_token_dispatcher_type moe_enable_deepep moe_permute_fusion moe_router_fusion moe_expert_capacity_factor
moe_aux_loss_coeff moe_input_jitter_eps moe_z_loss_coeff moe_router_enable_expert_bias moe_router_score_function moe_router_force_load_balancing
gradient_accumulation_fusion bias_swiglu_fusion bias_gelu_fusion apply_rope_fusion
moe_pad_expert_input_to_capacity q_lora_rank kv_lora_rank qk_head_dim qk_pos_emb_head_dim v_head_dim
async_tensor_model_parallel_allreduce add_bias_linear transformer_impl
""".split())
# Outside the no-effect groups: flags that leave the step alone (numerics, bookkeeping, profiling, checks).
NO_EFFECT = set("""
fp8_margin fp8_interval fp8_amax_history_len fp8_amax_compute_algo te_rng_tracker inference_rng_tracker
rotary_base rotary_percent rotary_interleaved rotary_seq_len_interpolation_factor use_rope_scaling
rope_scaling_factor no_rope_freq mrope_section norm_epsilon apply_layernorm_1p
apply_residual_connection_post_layernorm openai_gelu onnx_safe bert_binary_head mtp_loss_scaling_factor
weight_decay start_weight_decay end_weight_decay weight_decay_incr_style clip_grad adam_beta1 adam_beta2 adam_eps
decrease_batch_size_if_needed check_for_nan_in_loss_and_grad check_for_spiky_loss
check_for_large_grads profile profile_step_start profile_step_end iterations_to_skip
result_rejected_tracker_filename enable_gloo_process_groups use_pytorch_profiler profile_ranks
record_memory_history memory_snapshot_path tp_comm_bootstrap_backend use_cpu_initialization
check_weight_hash_across_dp_replicas_interval calculate_per_token_loss train_iters train_samples log_interval
exit_interval exit_duration_in_mins exit_signal_handler tensorboard_dir dataloader_type
deprecated_use_mcore_models loss_scale initial_loss_scale min_loss_scale loss_scale_window hysteresis
distributed_backend distributed_timeout_minutes local_rank lazy_mpu_init nccl_communicator_config_path
moe_input_jitter_eps moe_per_layer_logging moe_router_topk_scaling_factor
moe_router_bias_update_rate moe_router_pre_softmax
moe_use_upcycling moe_token_drop_policy rotary_scaling_factor mscale mscale_all_dim init_model_with_meta_device
use_flash_attn
""".split())
# Flags new in d98e8a64 (2026-08) that leave the step alone, by the reason their help text gives:
NO_EFFECT |= set("""
layernorm_epsilon layernorm_zero_centered_gamma use_gloo_process_groups
activation_func_clamp_value glu_linear_offset embedding_init_method_std moe_router_force_biased
moe_router_quantile_balancing_ema qk_clip_alpha qk_clip_threshold rope_type
yarn_beta_fast yarn_beta_slow yarn_correction_range_round_to_int yarn_original_max_position_embeddings
use_mup mup_attn_scale_power mup_base_head_dim mup_base_hidden_size mup_embedding_mult mup_output_mult mup_width_mult
lion_beta1 lion_beta2 muon_coefficient_type muon_extra_scale_factor muon_fp32_matmul_prec muon_momentum muon_nesterov
muon_num_ns_steps muon_scalar_optimizer muon_scale_mode muon_split_qkv muon_tp_mode muon_use_syrk
apply_wd_to_qk_layernorm no_weight_decay_cond_type moe_upcycling_granularity
inference_cuda_graph_scope inference_disable_triton_nvls_kernels inference_fuse_tp_communication
inference_grouped_gemm_backend inference_moe_disable_fused_quant_kernels inference_moe_token_dispatcher_type
moe_pad_experts_for_cuda_graph_inference cache_mla_latents
mamba_training_ssm_states_dtype use_mamba_mem_eff_path mtp_hybrid_override_pattern mtp_standalone
gdp_cutedsl_kernel gdp_num_chunk_states_to_recompute gdp_num_householder
dsa_indexer_head_dim dsa_indexer_k_norm_epsilon dsa_indexer_k_norm_fp32 dsa_indexer_loss_coeff dsa_indexer_n_heads
dsa_indexer_rope_interleaved dsa_indexer_rotate_activation dsa_indexer_scoring_relu dsa_indexer_skip_topk_offset
dsa_indexer_topk dsa_indexer_topk_freq dsa_indexer_use_sparse_loss dsa_kernel_backend
mhc_init_gating_factor mhc_num_residual_streams mhc_recompute_layer_num mhc_sinkhorn_iterations
kitchen_attention_backend batch_invariant_backend fp4_quantizer_factory fp8_quantizer_factory
moe_hybridep_num_blocks_permute moe_hybridep_num_blocks_unpermute moe_hybridep_num_sms_preprocessing
moe_hybridep_pad_uneven_dispatch_inputs
moe_paged_stash_buffer_size_factor_cpu moe_paged_stash_buffer_size_factor_cuda moe_paged_stash_page_size
delay_offload_until_cuda_graph cpu_offloading_retain_pinned_cpu_buffers
distributed_timeout_seconds_after_init flight_recorder_dump_on_timeout flight_recorder_dump_path
flight_recorder_extra_dump_on_exec flight_recorder_include_only_active flight_recorder_include_stack_trace
flight_recorder_trace_buffer_size
dump_param_to_param_group_map exit_signal exit_signal_handler_for_dataloader exit_signal_handler_for_training
nvtx_ranges pytorch_profiler_collect_callstack pytorch_profiler_collect_chakra pytorch_profiler_collect_shapes
record_shapes sft_tokenizer_prompt_format
""".split())
# (In order: renames of no-effect flags of 1e057005 (--norm-epsilon, --apply-layernorm-1p,
# --disable-gloo-process-groups); numerics, initialisation and RoPE/YaRN frequencies, as --rotary-base; MuP's
# multipliers (initialisation, learning rates, logit scales: same kernels); optimizer hyperparameters of Lion and
# Muon, which act only under --optimizer lion / muon, itself not modelled and warned about; weight-decay rules;
# inference-only settings; Mamba / hybrid-only settings and MTP bookkeeping; settings read only when a feature that is
# itself not modelled (and warned about) is on: gated-delta-net / GatedDeltaProduct and DSA layers
# (--experimental-attention-variant), mHC (--enable-mhc-connections), kitchen attention, batch-invariant mode, custom
# FP8 / FP4 recipes, HybridEP's kernel tuning (block counts, preprocessing SMs, input padding), paged stash
# (--moe-paged-stash), CUDA-graph capture (--delay-offload-until-cuda-graph);
# process-group timeouts and NCCL flight-recorder dumps; profiling and signal handling, as --profile; a file listing
# parameter groups; the SFT prompt format.)
# Flags the generator models that are new in d98e8a64: the same generator parameters (their help text:
# "Delay the weight gradient computation to improve batch-level communication overlapping", "Overlap EP A2A
# communications with independent computations of different micro-batches in 1f1b phase"), the padded vocabulary
# given directly, and Megatron-FSDP under its new name (validate_args: "if args.use_megatron_fsdp: ...
# args.use_custom_fsdp = True").
MODEL |= {"delay_wgrad_compute", "overlap_moe_expert_parallel_comm", "padded_vocab_size", "use_megatron_fsdp"}
# Megatron-Core's precision-aware optimizer (Transformer Engine's FusedAdam holding the optimizer state and the
# main gradients in lower precision): memory of the optimizer state, the gradient buffer and its reduction.
MODEL |= {"use_precision_aware_optimizer", "main_grads_dtype", "main_params_dtype", "exp_avg_dtype", "exp_avg_sq_dtype"}
# FP8 parameters: weight memory, the parameter all-gather's bytes, the post-step quantisation and amax all-reduce.
MODEL |= {"fp8_param_gather"}
# NVFP4 training (--fp4-format e2m1 with --fp4-recipe nvfp4: the FP4 GEMMs, the quantisation / Hadamard kernels, the
# NVFP4 weights and activations in memory; --fp4-param-gather: NVFP4 parameters and their all-gather) and the bf16
# first / last decoder layers of an FP8 / FP4 run (their GEMMs, casts, weights and activations in bf16).
MODEL |= {"fp4", "fp4_recipe", "fp4_param_gather", "first_last_layers_bf16", "num_layers_at_start_in_bf16",
          "num_layers_at_end_in_bf16"}
# Activation offloading to host memory (Transformer Engine's cpu_offload): activation memory and the host copies.
MODEL |= {"cpu_offloading_num_layers"}
# Megatron-Core's fine-grained activation offloading (megatron/core/pipeline_parallel/
# fine_grained_activation_offload.py): the offloaded modules' activation memory and the host copies beside compute.
MODEL |= {"fine_grained_activation_offloading", "offload_modules", "activation_offload_fraction",
          "min_offloaded_tensor_size", "fine_grained_offloading_max_inflight_offloads",
          "delta_offload_bytes_across_pp_ranks"}
# Sliding-window attention: the attention kernels over the window's band.
MODEL |= {"window_size", "window_attn_skip_freq"}
# Hybrid linear attention (Gated DeltaNet layers, Qwen3-Next) and Qwen3-Next's gated attention output: the GDN
# layers' GEMMs, conv / gating / chunked delta-rule kernels, weights and activations (workloads/gpt.hpp).
MODEL |= {"experimental_attention_variant", "linear_attention_freq", "linear_conv_kernel_dim", "linear_key_head_dim",
          "linear_num_key_heads", "linear_num_value_heads", "linear_value_head_dim", "attention_output_gate"}
# Megatron-LM's hybrid model (Mamba-2 mixers with attention, MLP and MoE sublayers; Nemotron-H / Nemotron-3): the
# layer pattern (and the older ratio flags that build one), the Mamba-2 mixer's shape (workloads/gpt_hybrid.cpp).
# --is-hybrid-model only selects the model class, which the pattern already does (is_hybrid_model in
# megatron/training/utils/common_utils.py at d98e8a64 tests the pattern).
MODEL |= {"hybrid_layer_pattern", "hybrid_override_pattern", "hybrid_attention_ratio", "hybrid_mlp_ratio",
          "mamba_state_dim", "mamba_head_dim", "mamba_num_groups", "mamba_num_heads"}
NO_EFFECT |= {"is_hybrid_model"}
# MoE settings of 2025-2026 recipes (Nemotron 3, NVFP4 MoE runs): latent MoE (the routed experts and the dispatch in
# moe_latent_size, two dense latent projections), the shared expert's sigmoid gate, the router's fp32 backward GEMMs,
# the routing map padded to the FP8 / FP4 GEMM alignment (and its older name), the MoE layer's checkpointing under
# its older name (recompute_modules moe; workloads/moe.hpp and workloads/gpt_kernels.cpp moe_costs).
MODEL |= {"moe_latent_size", "moe_shared_expert_gate", "moe_router_dtype", "moe_router_padding_for_quantization",
          "moe_router_padding_for_fp8", "moe_layer_recompute"}
# Megatron-Core's flexible pipeline layout (PipelineParallelLayerLayout) and the interleaved schedule's micro-batch
# group N (schedules.py get_schedule_table): the gpt generator's pipeline_model_parallel_layout and
# microbatch_group_size_per_vp_stage.
MODEL |= {"pipeline_model_parallel_layout", "microbatch_group_size_per_vp_stage"}
# Model shape of 2024-2026 configs (Qwen2 / Qwen3, Nemotron): per-head norms of Q and K, QKV-only biases, the
# squared-ReLU activation of the non-gated MLP (workloads/gpt.hpp GptConfig says how each is priced).
MODEL |= {"qk_layernorm", "add_qkv_bias", "squared_relu"}
# The rank order tp-cp-ep-pp-dp (megatron/training/initialize.py): which GPUs form the DP and PP groups.
MODEL |= {"use_tp_pp_dp_mapping"}
# Hierarchical context parallelism (cp_comm_type a2a+p2p: Transformer Engine's all-to-all over heads inside the
# first level's groups, the K/V ring across the second's) and SHARP for the data-parallel x context-parallel group
# (use_sharp, sharp_enabled_group dp: NCCL's SHARP algorithms for those communicators only, on a fabric with SHARP).
MODEL |= {"hierarchical_context_parallel_sizes", "use_sharp", "sharp_enabled_group"}
# torch FSDP2's reshard_after_forward False (the importer's rule: fsdp_reshard_after_forward never).
MODEL |= {"torch_fsdp2_reshard_after_forward"}
# The optimizer's state and step: --optimizer adam / sgd (the importer's rule; the others stay not modelled) and
# SGD's momentum buffer (none at --sgd-momentum 0).
MODEL |= {"optimizer", "sgd_momentum"}
# Optimizer CPU offload (HybridDeviceOptimizer): the offloaded share of the optimizer state leaves HBM and its step
# runs on the host (the gradients' copy out, the CPU AdamW, the parameters' copy back; workloads/gpt.hpp).
MODEL |= {"optimizer_cpu_offload", "optimizer_offload_fraction", "overlap_cpu_optimizer_d2h_h2d"}
# Chunked optimizer-state offload (dev @d48bd6be; --offload-optimizer-states is its deprecated spelling): the selected
# optimizer state in host memory between steps, copied back chunk by chunk for the optimizer step (workloads/gpt.hpp).
MODEL |= {"offload_optimizer_states", "chunked_optimizer_state_offload", "optimizer_state_offload_chunk_size_mb",
          "optimizer_state_offload_fraction"}
# The flex dispatcher's backend: deepep and hybridep are the kernels the flex model's dispatch follows (a token moves
# once per destination NVLink domain and once per destination GPU in it; workloads/gpt_layout.cpp cites both, and
# HybridEP is the backend whose NVLink domain is a whole NVL72 rack); the importer's rule leaves ncclep not modelled.
MODEL |= {"moe_flex_dispatcher_backend"}
# --enable-experimental at d98e8a64 switches only the token dispatchers' routing-map padding and the flex
# dispatcher's indices-to-multihot to their fused kernels (megatron/core/transformer/moe/token_dispatcher.py:651,
# 1415, 1425; megatron/core/utils.py's experimental_fn / experimental_cls have no users): the fused path is the one
# fabricsim prices (neither form's kernels, nor the unfused form's host waits, are in the model; docs/validation.md
# "Dispatch and combine"), so the flag changes nothing simulated.
NO_EFFECT |= {"enable_experimental"}
# Transformer Engine's userbuffers overlap as Megatron configures it (ub_overlap_ag / ub_overlap_rs /
# ub_overlap_rs_dgrad / ub_bulk_dgrad, the per-GEMM --tp-comm-overlap-cfg YAML the importer reads), the weight-gradient
# GEMMs in bf16 under the delayed FP8 recipe, and the output layer's weight gradient deferred to the pipeline flush
# (workloads/gpt.hpp; docs/workloads.md "Tensor-parallel overlap settings").
MODEL |= {"tp_comm_overlap_ag", "tp_comm_overlap_rs", "tp_comm_overlap_rs_dgrad", "tp_comm_bulk_dgrad",
          "tp_comm_overlap_cfg", "fp8_wgrad", "defer_embedding_wgrad_compute", "wgrad_deferral_limit"}
# --tp-comm-split-ag / --tp-comm-split-rs: read only for Transformer Engine before 1.5 (ub_split_ag / ub_split_rs,
# megatron/core/extensions/transformer_engine.py at d98e8a64; from 1.5 tp_comm_overlap_ag / _rs decide).
NO_EFFECT |= {"tp_comm_split_ag", "tp_comm_split_rs"}
# The bias + dropout + residual add as one compiled kernel or eager ops (--no-bias-dropout-fusion), and the residual
# stream in fp32 (--fp32-residual-connection: the residual adds, the norms' input casts, the pipeline sends, the
# checkpointed layer inputs; workloads/gpt.hpp).
MODEL |= {"bias_dropout_fusion", "fp32_residual_connection"}
# Megatron-Core DDP's gradient scaling before each bucket's collective, gone when the collective averages
# (--ddp-average-in-collective; workloads/gpt.hpp).
MODEL |= {"ddp_average_in_collective"}
# Megatron-FSDP's gradient scale as a kernel of its own or folded into the collective
# (--no-gradient-reduce-div-fusion; workloads/gpt.hpp).
MODEL |= {"gradient_reduce_div_fusion"}
# The distributed optimizer's bucket padding to lcm(DP, 128, 2^16) elements (--ddp-pad-buckets-for-high-nccl-busbw):
# the padded bytes in the bucket collectives (workloads/gpt.hpp).
MODEL |= {"ddp_pad_buckets_for_high_nccl_busbw"}
# Which fused cross entropy runs with --cross-entropy-loss-fusion (native | te): the same loss memory and pricing
# (workloads/gpt.hpp, gpt_model.cpp).
MODEL |= {"cross_entropy_fusion_impl"}
# Full recompute's checkpointed inputs split over TP (--distribute-saved-activations): the memory, the split copy
# and the all-gather before each recompute (workloads/gpt.hpp).
MODEL |= {"distribute_saved_activations"}
# Groups new in d98e8a64 whose flags leave pretrain_gpt.py's step alone: GRPO reinforcement learning (train_rl.py)
# and the fault injector (it hangs or kills ranks to test resilience; it does not change a step).
NO_EFFECT_GROUPS |= {"_add_rl_args", "_add_fault_injector_args"}
# Inside the no-effect groups: flags of pretrain_gpt.py's model that change the step.
NOT_MODELLED_IN_GROUPS = {"rampup_batch_size", "encoder_seq_length", "decoder_seq_length",
                          "no_persist_layer_norm",
                          # d98e8a64: the RL training step itself; an unpadded vocabulary; frozen layers (no weight
                          # gradients); per-document attention masks (cu_seqlens); CUDA-graph capture of training
                          "perform_rl_step", "pad_vocab_size", "freeze_all_layers", "dataloader_inter_document_masking",
                          "cuda_graph_modules",
                          # CUDA-graph capture of training layers under its older names (validate_args @d98e8a64:
                          # --enable-cuda-graph is --cuda-graph-impl local, --external-cuda-graph transformer_engine,
                          # --cuda-graph-scope --cuda-graph-modules; 1e057005 declared them among the inference
                          # flags, but TransformerLayer captures the training step with them)
                          "enable_cuda_graph", "external_cuda_graph", "cuda_graph_scope_deprecated"}
# Megatron-LM's validate_args refuses these (arguments.py: "no longer valid" / "deprecated").
REJECTED = {"batch_size": "use --micro-batch-size", "warmup": "use --lr-warmup-fraction",
            "model_parallel_size": "use --tensor-model-parallel-size",
            "checkpoint_activations": "use --recompute-activations or --recompute-granularity"}


def git_show(repo, commit, path):
    return subprocess.run(["git", "-C", repo, "show", f"{commit}:{path}"], check=True, capture_output=True,
                          text=True).stdout


def find_class(repo, commit, name, cache={}):
    """The ClassDef of `name` in the commit's Python sources (first `class NAME` at column 0)."""
    key = (commit, name)
    if key not in cache:
        hits = subprocess.run(["git", "-C", repo, "grep", "-l", "-E", f"^class {name}\\b", commit, "--", "*.py"],
                              capture_output=True, text=True).stdout.split()
        cache[key] = None
        for hit in hits:
            tree = ast.parse(git_show(repo, commit, hit.split(":", 1)[1]))
            for node in tree.body:
                if isinstance(node, ast.ClassDef) and node.name == name:
                    cache[key] = node
                    break
            if cache[key]:
                break
    return cache[key]


def literal(node, fallback=None):
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return fallback


def dataclass_fields(repo, commit, name):
    """Fields of a dataclass in declaration order, base classes first (dataclasses.fields order)."""
    cdef = find_class(repo, commit, name)
    if cdef is None:
        raise SystemExit(f"{commit}: class {name} not found")
    out = {}
    for base in cdef.bases:
        bname = ast.unparse(base).split(".")[-1]
        if find_class(repo, commit, bname) is not None:
            for f in dataclass_fields(repo, commit, bname):
                out[f["name"]] = f
    for node in cdef.body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        ann = ast.unparse(node.annotation)
        if ann.startswith(("ClassVar", "typing.ClassVar", "InitVar")):
            continue
        f = {"name": node.target.id, "ann": ann, "default": None, "has_default": node.value is not None,
             "init": True, "meta": {}, "line": node.lineno}
        v = node.value
        if isinstance(v, ast.Call) and ast.unparse(v.func) in ("field", "dataclasses.field"):
            kw = {k.arg: k.value for k in v.keywords}
            if "default" in kw:
                f["default"] = literal(kw["default"])
            elif "default_factory" in kw:
                f["default"] = literal(ast.Call(kw["default_factory"], [], []), None)
                if ast.unparse(kw["default_factory"]) == "list":
                    f["default"] = []
            if "init" in kw:
                f["init"] = literal(kw["init"], True)
            if isinstance(kw.get("metadata"), ast.Dict):
                for mk, mv in zip(kw["metadata"].keys, kw["metadata"].values):
                    if literal(mk) == "argparse_meta" and isinstance(mv, ast.Dict):
                        f["meta"] = {literal(a): b for a, b in zip(mv.keys, mv.values)}
        elif v is not None:
            f["default"] = literal(v)
        out[f["name"]] = f
    return list(out.values())


def strip_optional(ann):
    """Optional[X], X | None, Union[X, None] -> X."""
    for pre in ("Optional[", "typing.Optional["):
        if ann.startswith(pre) and ann.endswith("]"):
            return strip_optional(ann[len(pre):-1])
    parts = [a.strip() for a in ann.split("|")]
    if len(parts) == 2 and parts[1] == "None":
        return strip_optional(parts[0])
    return ann


def factory_rows(repo, commit, cls_name, exclude):
    """The flags ArgumentGroupFactory(cls_name, exclude).build_group adds (megatron/training/argument_utils.py):
    --name-with-dashes per init field not excluded; bool fields store_true when the default is False, else
    store_false spelled --no-NAME and --disable-NAME; Optional[X] is X, list[X] is nargs '+', Literal[...] the type
    of its choices, an Enum its member names; the field's metadata "argparse_meta" overrides all of it."""
    for f in dataclass_fields(repo, commit, cls_name):
        if f["name"] in exclude or not f["init"]:
            continue
        ann = strip_optional(f["ann"])
        nargs = ""
        for pre in ("list[", "List[", "typing.List["):
            if ann.startswith(pre) and ann.endswith("]"):
                ann, nargs = strip_optional(ann[len(pre):-1]), "+"
        if ann.startswith(("Literal[", "typing.Literal[")):
            choices = literal(ast.parse(ann[ann.index("[") + 1:-1], mode="eval").body, ())
            choices = choices if isinstance(choices, tuple) else (choices,)
            ann = type(choices[0]).__name__ if choices else "str"
        typ = ann if ann in ("int", "float", "str", "bool") else "str"
        action = ""
        names = ["--" + f["name"].replace("_", "-")]
        dflt = f["default"]
        meta = f["meta"]
        if typ == "bool" and "type" not in meta:
            action = "store_true" if dflt is False else "store_false"
            if action == "store_false":
                names = ["--no-" + f["name"].replace("_", "-"), "--disable-" + f["name"].replace("_", "-")]
        if "arg_names" in meta:
            names = literal(meta["arg_names"])
        if "type" in meta:
            typ = ast.unparse(meta["type"])
        if "nargs" in meta:
            nargs = literal(meta["nargs"])
        if "action" in meta:
            action = literal(meta["action"], ast.unparse(meta["action"]))
        if "default" in meta:
            dflt = literal(meta["default"])
        dest = literal(meta["dest"]) if "dest" in meta else f["name"]
        yield names, dest, action, typ, nargs, dflt


def kind_of(line, action, typ, nargs):
    if action == "store_true":
        return "kTrue"
    if action == "store_false":
        return "kFalse"
    if action:
        raise SystemExit(f"line {line}: action {action} not handled")
    if nargs in ("*", "+") or isinstance(nargs, int):
        return {"int": "kInts", "float": "kFloats"}.get(typ, "kStrs")
    if nargs:
        raise SystemExit(f"line {line}: nargs {nargs} not handled")
    return {"int": "kInt", "float": "kFloat"}.get(typ, "kStr")


def spelled_default(dflt, action):
    """The default as the command line would spell it ("" when there is none to compare with)."""
    return "" if dflt is None or isinstance(dflt, (bool, list, tuple)) or action else str(dflt)


def rows(repo, commit):
    """(group, line, option, dest, kind, nargs, default) for every option string of megatron/training/arguments.py
    at `commit`: its add_argument calls and the ArgumentGroupFactory groups it builds."""
    tree = ast.parse(git_show(repo, commit, "megatron/training/arguments.py"))
    for fn in tree.body:
        if not isinstance(fn, ast.FunctionDef):
            continue
        lists = {}  # local name = [literal list] (a factory's exclude=)
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                v = literal(node.value)
                if isinstance(v, list):
                    lists[node.targets[0].id] = v
        for node in ast.walk(fn):
            if not isinstance(node, ast.Call):
                continue
            if ast.unparse(node.func) == "ArgumentGroupFactory":
                kw = {k.arg: k.value for k in node.keywords}
                ex = kw.get("exclude")
                exclude = set(lists.get(ex.id, []) if isinstance(ex, ast.Name) else literal(ex, []) if ex else [])
                for names, dest, action, typ, nargs, dflt in factory_rows(repo, commit, ast.unparse(node.args[0]), exclude):
                    kind = kind_of(node.lineno, action, typ, nargs)
                    for o in names:
                        yield fn.name, node.lineno, o, dest, kind, nargs, spelled_default(dflt, action)
                continue
            if not (isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument"):
                continue
            opts = [a.value for a in node.args if isinstance(a, ast.Constant)]
            kw = {k.arg: k.value for k in node.keywords}
            dest = ast.literal_eval(kw["dest"]) if "dest" in kw else opts[0].lstrip("-").replace("-", "_")
            action = literal(kw["action"], ast.unparse(kw["action"])) if "action" in kw else ""
            typ = ast.unparse(kw["type"]) if "type" in kw else ""
            nargs = ast.literal_eval(kw["nargs"]) if "nargs" in kw else ""
            dflt = literal(kw["default"]) if "default" in kw else None
            if action == "argparse.BooleanOptionalAction":  # --flag and --no-flag
                for o in opts:
                    yield fn.name, node.lineno, o, dest, "kTrue", "", ""
                    yield fn.name, node.lineno, "--no-" + o[2:], dest, "kFalse", "", ""
                continue
            kind = kind_of(node.lineno, action, typ, nargs)
            for o in opts:
                yield fn.name, node.lineno, o, dest, kind, nargs, spelled_default(dflt, action)


def cls(group, dest):
    if dest in REJECTED:
        return "kRejected"
    if dest in MODEL:
        return "kModel"
    if dest in NOT_MODELLED_IN_GROUPS:
        return "kNotModelled"
    if group in NO_EFFECT_GROUPS or dest in NO_EFFECT:
        return "kNoEffect"
    return "kNotModelled"


def main():
    repo, commits = sys.argv[1], sys.argv[2:]
    if len(commits) < 1:
        raise SystemExit(__doc__)
    newest = commits[-1]
    table = {}  # option -> (row, commits that have it); the newest commit's row wins
    for commit in commits:
        for group, line, o, dest, kind, nargs, dflt in rows(repo, commit):
            row = (group, line, dest, kind, nargs, dflt, commit)
            have = table[o][1] if o in table else []
            table[o] = (row, have + [commit])
    seen = {r[3] for commit in commits for r in rows(repo, commit)}  # dests of every commit (renamed ones too)
    # A flag is classed by the group of the oldest commit that has its dest: a flag that moved into another
    # group (d98e8a64 builds --init-method-std, --enable-cuda-graph, ... from TransformerConfig) keeps its class.
    first_group = {}
    for commit in commits:
        for r in rows(repo, commit):
            first_group.setdefault(r[3], r[0])
    seen_new = {row[2] for row, have in table.values() if newest in have}
    for name in MODEL | NO_EFFECT | NOT_MODELLED_IN_GROUPS | set(REJECTED):
        if name not in seen:
            raise SystemExit(f"{name}: not a flag of these arguments.py")
    out = []
    for o, ((group, line, dest, kind, nargs, dflt, commit), have) in sorted(table.items()):
        c = cls(first_group[dest], dest)
        at_least = 0 if nargs == "*" else nargs if isinstance(nargs, int) else 1
        out.append(f'    {{"{o}", "{dest}", MegatronFlag::{kind}, {at_least}, MegatronFlag::{c}, {line}, "{group}", "{dflt}", '
                   f'"{" ".join(have)}"}},')
    dests = len({row[2] for row, _ in table.values()})
    print(f"""// GENERATED by scripts/megatron_flags.py from NVIDIA/Megatron-LM megatron/training/arguments.py at {", ".join(commits)}
// ({len(table)} option strings, {dests} flags; every add_argument call and ArgumentGroupFactory group: option, dest,
// action/type/nargs, default, the line of the call and the _add_*_args function it is in, from the newest commit that has
// it, and the commits that have it). The class of each flag is the script's rules (its docstring); change them there
// and regenerate.
#include "workloads/megatron_args.hpp"

namespace fabricsim::workloads {{

const char* const kMegatronArgsCommit = "{newest}";
const char* const kMegatronArgsCommits = "{" ".join(commits)}";

const std::vector<MegatronFlag>& megatron_flags() {{
  static const std::vector<MegatronFlag> table = {{""")
    print("\n".join(out))
    print("""  };
  return table;
}

std::string megatron_rejected_hint(const std::string& dest) {""")
    for d, h in sorted(REJECTED.items()):
        print(f'  if (dest == "{d}") return "{h}";')
    print("""  return "";
}

}  // namespace fabricsim::workloads""")
    print(f"{len(table)} option strings, {dests} flags ({len(seen_new)} in {newest})", file=sys.stderr)

main()
