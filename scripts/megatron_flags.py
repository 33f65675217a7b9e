#!/usr/bin/env python3
"""Writes workloads/megatron_flags.cpp, the table of Megatron-LM's command-line flags that
`fabricsim import megatron` reads (docs/workloads.md, "Megatron-LM launch scripts").

    git -C MEGATRON_LM show 1e057005:megatron/training/arguments.py > arguments.py
    python3 scripts/megatron_flags.py arguments.py 1e057005 > workloads/megatron_flags.cpp

The flags, their dest, action, type and nargs come from the source's `add_argument` calls (read with Python's
ast module; nothing of Megatron-LM is imported or run). The class of each flag is decided here, by the rules
below (the argument group a flag is declared in, then per-flag exceptions):
  model        the `gpt` generator models it (the importer maps it to a generator parameter; see
               workloads/megatron_args.cpp);
  no_effect    it does not change a training step's time or memory (learning rate, data, checkpointing,
               logging, evaluation, tokenizer files, seeds, initialisation, inference-only settings, or
               settings of other models than pretrain_gpt.py's);
  not_modelled it would change the step, but fabricsim does not simulate it (a warning lists it);
  rejected     Megatron-LM's validate_args refuses it (deprecated: it exits with a message).
"""
import ast
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
num_virtual_stages_per_pipeline_rank overlap_p2p_comm overlap_grad_reduce ddp_bucket_size overlap_param_gather
account_for_embedding_in_pipeline_split account_for_loss_in_pipeline_split use_distributed_optimizer
data_parallel_sharding_strategy num_distributed_optimizer_instances use_torch_fsdp2 use_custom_fsdp
context_parallel_size cp_comm_type vocab_size tokenizer_type seq_length expert_model_parallel_size
expert_tensor_parallel_size num_experts moe_layer_freq moe_ffn_hidden_size moe_shared_expert_intermediate_size
moe_shared_expert_overlap moe_grouped_gemm moe_router_load_balancing_type moe_router_topk moe_router_num_groups
moe_router_group_topk moe_token_dispatcher_type moe_enable_deepep moe_permute_fusion moe_expert_capacity_factor
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
sgd_momentum decrease_batch_size_if_needed check_for_nan_in_loss_and_grad check_for_spiky_loss
check_for_large_grads profile profile_step_start profile_step_end iterations_to_skip
result_rejected_tracker_filename enable_gloo_process_groups use_pytorch_profiler profile_ranks
record_memory_history memory_snapshot_path tp_comm_bootstrap_backend use_cpu_initialization
check_weight_hash_across_dp_replicas_interval calculate_per_token_loss train_iters train_samples log_interval
exit_interval exit_duration_in_mins exit_signal_handler tensorboard_dir dataloader_type
deprecated_use_mcore_models loss_scale initial_loss_scale min_loss_scale loss_scale_window hysteresis
distributed_backend distributed_timeout_minutes local_rank lazy_mpu_init nccl_communicator_config_path
moe_aux_loss_coeff moe_z_loss_coeff moe_input_jitter_eps moe_per_layer_logging moe_router_topk_scaling_factor
moe_router_bias_update_rate moe_router_enable_expert_bias moe_router_pre_softmax moe_router_score_function
moe_use_upcycling moe_token_drop_policy rotary_scaling_factor mscale mscale_all_dim init_model_with_meta_device
use_flash_attn
""".split())
# Inside the no-effect groups: flags of pretrain_gpt.py's model that change the step.
NOT_MODELLED_IN_GROUPS = {"qk_layernorm", "rampup_batch_size", "encoder_seq_length", "decoder_seq_length",
                          "no_persist_layer_norm"}
# Megatron-LM's validate_args refuses these (arguments.py: "no longer valid" / "deprecated").
REJECTED = {"batch_size": "use --micro-batch-size", "warmup": "use --lr-warmup-fraction",
            "model_parallel_size": "use --tensor-model-parallel-size",
            "checkpoint_activations": "use --recompute-activations or --recompute-granularity"}


def rows(src):
    tree = ast.parse(src)
    for fn in tree.body:
        if not isinstance(fn, ast.FunctionDef):
            continue
        for node in ast.walk(fn):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "add_argument"):
                continue
            opts = [a.value for a in node.args if isinstance(a, ast.Constant)]
            kw = {k.arg: k.value for k in node.keywords}
            dest = ast.literal_eval(kw["dest"]) if "dest" in kw else opts[0].lstrip("-").replace("-", "_")
            action = ast.literal_eval(kw["action"]) if "action" in kw else ""
            typ = ast.unparse(kw["type"]) if "type" in kw else ""
            nargs = ast.literal_eval(kw["nargs"]) if "nargs" in kw else ""
            try:
                dflt = ast.literal_eval(kw["default"]) if "default" in kw else None
            except ValueError:
                dflt = None
            # The default as the command line would spell it ("" when there is none to compare with).
            dflt = "" if dflt is None or isinstance(dflt, (bool, list)) or action else str(dflt)
            if action == "store_true":
                kind = "kTrue"
            elif action == "store_false":
                kind = "kFalse"
            elif action:
                raise SystemExit(f"line {node.lineno}: action {action} not handled")
            elif nargs in ("*", "+"):
                kind = {"int": "kInts", "float": "kFloats"}.get(typ, "kStrs")
            elif nargs:
                raise SystemExit(f"line {node.lineno}: nargs {nargs} not handled")
            else:
                kind = {"int": "kInt", "float": "kFloat"}.get(typ, "kStr")
            yield fn.name, node.lineno, opts, dest, kind, nargs, dflt


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
    src = open(sys.argv[1]).read()
    commit = sys.argv[2]
    out = []
    seen = set()
    for group, line, opts, dest, kind, nargs, dflt in rows(src):
        c = cls(group, dest)
        seen.add(dest)
        for o in opts:
            at_least = 0 if nargs == "*" else 1
            out.append(f'    {{"{o}", "{dest}", MegatronFlag::{kind}, {at_least}, MegatronFlag::{c}, {line}, "{group}", "{dflt}"}},')
    for name in MODEL | NO_EFFECT | NOT_MODELLED_IN_GROUPS | set(REJECTED):
        if name not in seen:
            raise SystemExit(f"{name}: not a flag of this arguments.py")
    out.sort()
    print(f"""// GENERATED by scripts/megatron_flags.py from NVIDIA/Megatron-LM@{commit} megatron/training/arguments.py
// (every add_argument call: option, dest, action/type/nargs, default, the line of the call and the _add_*_args function it
// is in). The class of each flag is the script's rules (its docstring); change them there and regenerate.
#include "workloads/megatron_args.hpp"

namespace fabricsim::workloads {{

const char* const kMegatronArgsCommit = "{commit}";

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


main()
