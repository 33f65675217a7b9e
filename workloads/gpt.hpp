#pragma once
// Megatron-LM style GPT (dense decoder-only transformer) training step generator. Parameter names follow
// Megatron-LM's command-line arguments (without the leading dashes, '-' -> '_'); docs/workloads.md lists
// them all. A named model from the catalogue (workloads/gpt_models.hpp, `model`) sets the shape; explicit
// parameters override it.
//
// What is simulated (symmetry): one representative rank per pipeline stage (data-parallel replica 0,
// context-parallel rank 0, tensor-parallel rank 0). TP/CP peers do identical work and are stand-ins; other
// DP replicas are stand-ins. Communicators still list every real member, so TP collectives are priced over
// the real TP group, CP exchanges over the real CP group and DP collectives over the full DP x CP group on
// the real fabric, with the other TP positions' concurrent groups as `mirrors` (they share the hosts'
// NICs). Pipeline sends go between the real stage ranks.
#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "models/compute.hpp"
#include "workloads/moe.hpp"
#include "workloads/params.hpp"
#include "workloads/trace.hpp"

namespace fabricsim::workloads {

// One GEMM's Transformer Engine userbuffers setting: an entry of initialize_ub's ub_cfgs (Megatron-LM's
// --tp-comm-overlap-cfg YAML), TE's default for the GEMM with the given keys applied (get_default_config in
// transformer_engine/pytorch/module/base.py at NVIDIA/TransformerEngine@d0067d0da; workloads/gpt_tp_overlap.cpp).
struct UbGemm {
  std::string method;           // ring_exchange | pipeline | bulk | external
  std::int64_t num_sm = 16;     // SMs of the communication kernel
  std::int64_t cga_size = 2;
  bool set_sm_margin = true;    // the GEMM runs on the SMs the communication kernel leaves
  std::int64_t num_splits = 4;  // pipeline: GEMM chunks (ring_exchange: always the TP size)
  bool aggregate = false, atomic_gemm = false, use_ce = true, fp8_buf = false;
  bool is_reduce_scatter = false;
};

struct GptConfig {
  std::string model;  // catalogue name ("" = none; the shape comes from the parameters below)
  // Shape.
  std::int64_t num_layers = 96;
  std::int64_t hidden_size = 12288;
  std::int64_t num_attention_heads = 96;
  std::int64_t num_query_groups = 0;  // GQA key/value heads; 0 = num_attention_heads (MHA)
  std::int64_t kv_channels = 0;       // head dim; 0 = hidden_size / num_attention_heads
  std::int64_t ffn_hidden_size = 0;   // 0 = 4 * hidden_size
  std::int64_t seq_length = 2048;
  std::int64_t padded_vocab_size = 51200;
  bool swiglu = false;                // gated MLP: 3 GEMMs (gate, up, down), fc1 is 2 x ffn wide
  bool untie_embeddings_and_output_weights = false;
  std::string normalization = "LayerNorm";                  // LayerNorm | RMSNorm
  // Megatron-Core's --qk-layernorm: a norm of the `normalization` type over each head of Q and of K after the
  // QKV projection (SelfAttention.get_query_key_value_tensors applies q_layernorm / k_layernorm, built with
  // hidden_size = kv_channels: megatron/core/transformer/attention.py at NVIDIA/Megatron-LM@d98e8a64). Two
  // kernels forward and backward, the norms' saved inputs, 2 x kv_channels weights (and biases for LayerNorm)
  // per layer, replicated over TP. With multi-latent attention the flag puts the norms on the q / kv latents
  // (gpt_layer_specs.py: linear_q_up_proj / linear_kv_up_proj become LayerNormLinear), which the MLA layer
  // always prices.
  bool qk_layernorm = false;
  // Megatron-Core's --add-qkv-bias: biases on the QKV projection only (attention.py: linear_qkv's
  // bias = add_bias_linear or add_qkv_bias). Models with biases everywhere (normalization LayerNorm, which
  // fabricsim gives biases) already have them.
  bool add_qkv_bias = false;
  // Megatron-Core's --squared-relu: relu(x)^2 as the activation of the non-gated MLP (megatron/core/
  // activations.py; argument_utils.py asserts not swiglu): two GEMMs, as GELU.
  bool squared_relu = false;
  std::string position_embedding_type = "learned_absolute";  // learned_absolute | rope
  double hidden_dropout = 0.1, attention_dropout = 0.1;      // Megatron-LM defaults
  std::string attention_backend;                             // flash | fused | unfused ("" -> by GPU)
  // Batch and layout.
  std::int64_t micro_batch_size = 1;
  std::int64_t global_batch_size = 1536;
  std::int64_t tensor_model_parallel_size = 8;
  std::int64_t pipeline_model_parallel_size = 16;
  std::int64_t context_parallel_size = 1;
  std::string cp_comm_type = "p2p";                          // p2p | all_gather | a2a | a2a+p2p
  // cp_comm_type given as a list of differing types, one per decoder layer (Megatron's list form: TransformerLayer
  // takes entry layer_number - 1, megatron/core/transformer/transformer_layer.py:378-385 @d98e8a64); empty when one
  // type serves every layer (cp_comm_type then; with a list, cp_comm_type is its first entry).
  std::vector<std::string> cp_comm_types;
  // Megatron-LM's --hierarchical-context-parallel-sizes (space-separated): the CP group's levels, inner first
  // (megatron/core/parallel_state.py create_hierarchical_groups at NVIDIA/Megatron-LM@d98e8a64: level 0 is
  // sizes[0] consecutive CP ranks, level 1 every sizes[0]-th). cp_comm_type a2a+p2p runs the all-to-all over
  // heads inside level 0 and the KV ring across level 1 (Transformer Engine's AttnFuncWithCPAndKVP2P with
  // cp_group = [a2a group, p2p group]). Empty: not given.
  std::vector<std::int64_t> hierarchical_context_parallel_sizes;
  // The context-parallel implementation Transformer Engine runs: a2a+p2p with a level of size 1 is the other
  // level's plain form (attn_forward_func_with_cp at NVIDIA/TransformerEngine@d0067d0da: inner size 1 ->
  // p2p, outer size 1 -> a2a).
  std::string cp_impl() const;
  // a2a+p2p: the all-to-all (inner) group's size; 1 otherwise.
  std::int64_t cp_a2a_size() const { return cp_impl() == "a2a+p2p" ? hierarchical_context_parallel_sizes[0] : 1; }
  // The KV ring's size: CP for p2p, CP / inner size for a2a+p2p.
  std::int64_t cp_ring_size() const { return context_parallel_size / cp_a2a_size(); }
  // PyTorch's context parallelism (torch.distributed.tensor.experimental.context_parallel, as torchtitan runs
  // it), named by torchtitan's context_parallel_rotate_method: "allgather" (one all-gather of K/V per
  // attention, overlapped with the local chunk's attention only) or "alltoall" (K/V passed around the ring,
  // one send per step); under torch_compile "compiled" every exchange is exposed (waited where issued, as in a
  // traced graph: gpt_trace.cpp torch_cp_attention). "" = the Megatron / TE implementations of cp_comm_type.
  // Needs use_torch_fsdp2.
  std::string context_parallel_rotate_method;
  std::int64_t num_layers_per_virtual_pipeline_stage = 0;    // 0 = no interleaving
  std::int64_t virtual_pipeline_model_parallel_size = 0;     // alternative to the above (chunks per stage)
  std::int64_t decoder_first_pipeline_num_layers = 0;        // 0 = even split
  std::int64_t decoder_last_pipeline_num_layers = 0;
  bool account_for_embedding_in_pipeline_split = false;
  bool account_for_loss_in_pipeline_split = false;
  // Megatron-Core's pipeline_model_parallel_layout (PipelineParallelLayerLayout), parsed by
  // parse_pipeline_layout: one string per virtual stage in layer order (virtual stage k is pipeline rank
  // k mod PP, chunk k / PP) of the letters E (embedding), t (decoder layer), m (MTP layer), L (loss). Empty:
  // not given (the split comes from the keys above).
  std::vector<std::string> pipeline_layout;
  // Megatron-Core's microbatch_group_size_per_vp_stage (the interleaved schedule's N: micro-batches run through
  // one chunk before the next chunk; 0 = pipeline_model_parallel_size, Megatron's default). At least PP, as
  // Megatron requires (gpt.cpp says why: below PP its order waits in a cycle).
  std::int64_t microbatch_group_size_per_vp_stage = 0;
  std::int64_t world_size = 1024;
  // Megatron-LM's --use-tp-pp-dp-mapping: ranks numbered tensor, context, pipeline, data (RankGenerator order
  // 'tp-cp-ep-pp-dp') instead of tensor, context, data, pipeline ('tp-cp-ep-dp-pp'; megatron/training/
  // initialize.py at NVIDIA/Megatron-LM@d98e8a64): a DP replica's pipeline stages sit on neighbouring GPUs
  // (the same server when TP x CP x PP fits in it) and its DP peers TP x CP x PP ranks apart, so the pipeline
  // sends and the gradient collectives change links (workloads/gpt_layout.cpp).
  bool use_tp_pp_dp_mapping = false;
  bool sequence_parallel = false;
  std::string recompute_granularity = "full";  // "full" | "selective" | "none"
  std::string recompute_method = "uniform";    // uniform | block (full recompute only)
  std::int64_t recompute_num_layers = 0;       // 0 = every layer (uniform: layers per checkpoint group 1)
  // Megatron-LM's --distribute-saved-activations (full recompute, TP > 1, no sequence parallelism, as Megatron
  // asserts): each checkpoint keeps only its TP rank's 1 / TP of the saved input (a copy of that chunk after the
  // checkpointed forward) and all-gathers it over TP before the recompute (CheckpointFunction,
  // megatron/core/tensor_parallel/random.py:600-672 at NVIDIA/Megatron-LM@d98e8a64).
  bool distribute_saved_activations = false;
  // torchtitan's [activation_checkpoint] selective_ac_option with recompute_granularity selective: "" =
  // Megatron-Core's selective recompute (core attention), "op" = torchtitan's per-op policy (saves the
  // attention output and every other matmul output; the rest of the layer is recomputed).
  std::string selective_ac_option;
  // Megatron-Core's --recompute-modules with recompute_granularity selective (space-separated): core_attn
  // (the default), layernorm, moe_act, moe. Empty = "core_attn".
  std::string recompute_modules;
  bool use_distributed_optimizer = false;
  bool overlap_grad_reduce = false;
  bool overlap_param_gather = false;  // distributed optimizer: parameter all-gather under the next forward
  // Megatron's --overlap-param-gather-with-optimizer-step (interleaved schedule): the first chunk's optimizer
  // steps first and its parameter all-gather runs beside the other chunks' step (megatron/core/optimizer/
  // optimizer.py ChainedOptimizer._step, optimizer/__init__.py:1062-1068 @d98e8a64); no chunk is bucketed.
  bool overlap_param_gather_with_optimizer_step = false;
  // Megatron's --no-align-param-gather (dest align_param_gather, default true with the interleaved schedule):
  // the chunks' parameter all-gathers are dispatched by the schedule, chunks 0 and 1 at its start and chunk
  // c + 1 with the forward pipeline rank r runs r virtual micro-batches before chunk c's first
  // (megatron/core/pipeline_parallel/schedules.py:1218-1221, 1341-1355 @d98e8a64); false: each chunk's at its
  // first forward.
  bool align_param_gather = true;
  // Megatron's --no-align-grad-reduce (dest align_grad_reduce, default true): with overlap_grad_reduce under the
  // interleaved schedule the schedule launches each chunk's reduction, pipeline rank r's r virtual
  // micro-batches after the chunk's last backward, instead of the DDP hooks as its buckets are ready
  // (workloads/gpt_trace.cpp aligned_grad_reduce).
  bool align_grad_reduce = true;
  bool tp_comm_overlap = false;       // TP all-gather / reduce-scatter overlapped with the GEMMs (SM cost)
  bool tp_comm_bulk_wgrad = true;    // with tp_comm_overlap: backward reduce-scatter of the input gradient under
                                     // the weight-gradient GEMM (Megatron --disable-tp-comm-bulk-wgrad: false)
  // How tp_comm_overlap runs: "userbuffers" (Transformer Engine's comm-GEMM overlap, Megatron's) or
  // "symmetric_memory" (PyTorch's async TP: torch/_inductor/fx_passes/micro_pipeline_tp.py decomposes the
  // fused GEMMs per shard beside copy-engine pulls from peer memory; needs torch_compile "compiled").
  std::string tp_comm_overlap_impl = "userbuffers";
  // Megatron-LM's switches of the userbuffers overlaps (ModelParallelConfig at NVIDIA/Megatron-LM@d98e8a64; what
  // each does: docs/workloads.md "Tensor-parallel overlap settings"): the ring-exchange all-gathers (qkv / fc1
  // fprop, proj / fc2 dgrad), the pipelined reduce-scatter of proj / fc2 fprop, the bulk input all-gather beside
  // the qkv / fc1 dgrad, the input-gradient reduce-scatter pipelined with that dgrad (TE then runs no bulk overlap).
  bool tp_comm_overlap_ag = true, tp_comm_overlap_rs = true, tp_comm_bulk_dgrad = true, tp_comm_overlap_rs_dgrad = false;
  // tp_comm_overlap_cfg: TE's per-GEMM userbuffers settings given (GEMM name -> UbGemm; the others keep TE's
  // defaults), and the object as given (JSON text, "" = none) for the report.
  std::map<std::string, UbGemm> ub_gemms;
  std::string tp_comm_overlap_cfg;
  UbGemm ub(const std::string& gemm) const;   // the GEMM's setting (gpt_tp_overlap.cpp)
  // The time factor of a GEMM beside its userbuffers communication: TE runs it on sm_count - num_sm SMs with
  // set_sm_margin (comm_gemm_overlap.cpp), else on all of them.
  double ub_sm_factor(const std::string& gemm) const;
  // Megatron's --no-fp8-wgrad (TEDelayedScaling's override_linear_precision (False, False, True)): the
  // weight-gradient GEMMs of the FP8 linears in bf16; delayed recipe only (fp8_utils.py get_fp8_recipe @d98e8a64).
  bool fp8_wgrad = true;
  bool bf16_wgrad() const { return fp8() && !fp8_wgrad && fp8_recipe == "delayed"; }
  // Megatron's defer_embedding_wgrad_compute: the last stage's output-layer weight-gradient GEMMs of the first
  // wgrad_deferral_limit micro-batches (0 = all) wait for the pipeline flush (drain_embedding_wgrad_compute).
  bool defer_embedding_wgrad_compute = false;
  std::int64_t wgrad_deferral_limit = 0;
  bool symm_mem_tp() const { return tp_comm_overlap && tp_comm_overlap_impl == "symmetric_memory"; }
  // Megatron-LM's backward of a column-parallel linear (LinearWithGradAccumulationAndAsyncCommunication;
  // Transformer Engine's Linear / LayerNormLinear the same): the all-reduce of the input gradient runs beside
  // the weight-gradient GEMM. Megatron's --no-async-tensor-model-parallel-allreduce (dest
  // async_tensor_model_parallel_allreduce) turns it off; the code did not have it before
  // NVIDIA/Megatron-LM@cf7efd4f5a (2021-08-30), so the SC'21 rows set false. With sequence parallelism the
  // re-gather of the input and the reduce-scatter of the input gradient are always asynchronous.
  bool async_tensor_model_parallel_allreduce = true;
  bool use_torch_fsdp2 = false;       // FSDP / ZeRO-3 (same as data_parallel_sharding_strategy=optim_grads_params)
  std::string data_parallel_sharding_strategy = "no_shard";  // no_shard | optim | optim_grads | optim_grads_params
  std::int64_t num_distributed_optimizer_instances = 1;      // HSDP: replica groups (shard group = DP / this)
  // Megatron-LM's --use-megatron-fsdp (--use-custom-fsdp): the model is wrapped in Megatron-FSDP's
  // FullyShardedDataParallel instead of Megatron-Core's DDP (megatron/training/training.py get_model @d98e8a64). A
  // sharding strategy other than no_shard implies it; with no_shard it is what tells Megatron-FSDP's unsharded
  // path (gradients all-reduced per bucket after gradient_reduce_preprocessing, optimizer state not sharded:
  // megatron_fsdp/param_and_grad_buffer.py:2330-2334 and :4079-4088 @d98e8a64) from Megatron-Core's DDP.
  bool use_megatron_fsdp = false;
  // Megatron-LM's --use-sharp / --sharp-enabled-group: NCCL_COLLNET_ENABLE=1 while the data-parallel x
  // context-parallel groups are created (megatron/core/parallel_state.py initialize_model_parallel at
  // NVIDIA/Megatron-LM@d98e8a64; sharp_enabled_group defaults to "dp"), so only their collectives may run
  // NCCL's SHARP algorithms (CollNet, NVLS across hosts); every other group is created without it (Megatron
  // deletes the variable first), as are all groups without use_sharp. The trace marks the DP communicators
  // (Communicator::collnet_enable).
  bool use_sharp = false;
  std::string sharp_enabled_group;  // "" or dp (dp_replica: not modelled)
  // Megatron-Core DDP's gradient buckets (--ddp-bucket-size, --ddp-num-buckets; megatron/training/training.py
  // resolve_ddp_bucket_size at NVIDIA/Megatron-LM@d98e8a64): elements per bucket, 0 = Megatron's default
  // max(40M, 1M x data-parallel x context-parallel size); ddp_num_buckets (0 = none) splits the rank's parameters
  // into that many instead and wins over bucket_size, as in Megatron. Only pipeline stage 0's first chunk with
  // overlap_grad_reduce is cut into buckets (workloads/gpt_trace.cpp chunk_bucketed). The other data-parallel
  // paths (Megatron FSDP's optim / optim_grads) cut bucket_size, 40M when 0, across the stage.
  std::int64_t bucket_size = 0;
  std::int64_t ddp_num_buckets = 0;
  // Megatron-Core's DistributedDataParallel: neither torch FSDP2 nor Megatron-FSDP (any strategy).
  bool megatron_ddp() const { return !fsdp() && !use_megatron_fsdp && data_parallel_sharding_strategy == "no_shard"; }
  bool grad_reduce_in_fp32 = false;     // DP gradient reduction in fp32 (4 bytes) instead of 2
  // Megatron-Core's DDP averages the gradients over the data-parallel x context-parallel group. By default
  // (ddp_average_in_collective false) each bucket's gradients are first scaled by 1 / (DP x CP) in place on the
  // compute stream, right before its collective, which then sums (ReduceOp.SUM); with --ddp-average-in-collective
  // the collective averages (ReduceOp.AVG) and only the expert buckets keep a scale, by EDP / (DP x CP), where the
  // two groups differ (DistributedDataParallel.__init__, megatron/core/distributed/distributed_data_parallel.py:
  // 243-278, and _ParamAndGradBucketGroup.start_grad_sync, param_and_grad_buffer.py:660-672 at
  // NVIDIA/Megatron-LM@d98e8a64). Megatron-Core's DDP only (GptConfig::megatron_ddp); gpt_trace.cpp finish_step.
  bool ddp_average_in_collective = false;
  // Megatron-FSDP's gradient averaging (--no-gradient-reduce-div-fusion: false). Megatron-FSDP (use_megatron_fsdp or
  // a sharding strategy other than no_shard, without torch FSDP2) scales each gradient bucket by 1 / DP before its
  // reduction (the reduce-scatter, or with no_shard the all-reduce, over the shard group) unless the
  // collective averages (ddp_average_in_collective): with this fusion on (the default) and a gradient buffer that
  // is not bf16 the scale rides in the collective (NCCL's premul-sum), otherwise it is an in-place multiply of the
  // bucket on the reduce-scatter stream (gradient_reduce_preprocessing, megatron/core/distributed/fsdp/src/
  // megatron_fsdp/param_and_grad_buffer.py:4740-4760 at NVIDIA/Megatron-LM@d98e8a64). Megatron-Core's DDP does not
  // read it (its scale is ddp_average_in_collective's). With HSDP (num_distributed_optimizer_instances > 1) the
  // factor is 1 / the whole DP x CP group (megatron_fsdp.py:369-384, FSDPDistributedIndex.get_dp_group returns the
  // hybrid group, megatron_fsdp/utils.py:686-694), applied once before the shard group's reduction; the
  // all-reduce over the replicas that follows sums (or averages with ddp_average_in_collective) without a scale
  // of its own (param_and_grad_buffer.py:4135-4148). gpt_trace.cpp megatron_fsdp_scale, mfsdp_outer_ar.
  bool gradient_reduce_div_fusion = true;
  bool megatron_fsdp() const {
    return !use_torch_fsdp2 && (use_megatron_fsdp || data_parallel_sharding_strategy != "no_shard");
  }
  // Megatron-FSDP runs the in-place 1 / DP multiply before each gradient bucket's reduction (see above): the
  // gradients are bf16 when reduced in 2 bytes without fp16 parameters.
  bool megatron_fsdp_grad_scale() const {
    const bool bf16_grads = !grad_reduce_in_fp32 && precision != "fp16";
    return megatron_fsdp() && !ddp_average_in_collective && (!gradient_reduce_div_fusion || bf16_grads);
  }
  // Megatron-Core's --ddp-pad-buckets-for-high-nccl-busbw: with the distributed optimizer each bucket's end is padded
  // to a multiple of lcm(DP x CP, 128, 2^16) elements, so the padded bytes are reduced and gathered (gpt_trace.cpp
  // padded). No effect without use_distributed_optimizer (Megatron's layout pads only the distributed optimizer's).
  bool ddp_pad_buckets_for_high_nccl_busbw = false;
  // Megatron-LM's gradient-accumulation fusion (default on): weight-gradient GEMMs accumulate into the main
  // gradient; false adds each bf16 weight gradient in the DDP hook (gpt_kernels.cpp add_grad_accumulation).
  bool gradient_accumulation_fusion = true;
  // Megatron-LM's kernel fusions (default on; --no-bias-swiglu-fusion, --no-bias-gelu-fusion, --no-rope-fusion):
  // off, the activation and RoPE run as Megatron's unfused PyTorch ops (gpt_kernels.cpp layer_costs_fused).
  bool bias_swiglu_fusion = true, bias_gelu_fusion = true, apply_rope_fusion = true;
  // Megatron-Core's bias + dropout + residual add after the attention and the MLP (--no-bias-dropout-fusion: false):
  // one compiled kernel, or the eager ops of _bias_dropout_add_func (megatron/core/fusions/fused_bias_dropout.py at
  // NVIDIA/Megatron-LM@d98e8a64) each a kernel of its own (gpt_kernels.cpp bias_dropout_add).
  bool bias_dropout_fusion = true;
  // Megatron-Core's --fp32-residual-connection: the residual stream (the embedding output and every layer's
  // input and output) in fp32, cast to the activation dtype before each norm; the pipeline sends it in fp32
  // (TransformerConfig.__post_init__ sets pipeline_dtype torch.float). Costs: gpt_kernels.cpp, gpt_model.cpp,
  // gpt_trace.cpp.
  bool fp32_residual_connection = false;
  double residual_bytes() const { return fp32_residual_connection ? 4.0 : 2.0; }  // per residual-stream element
  // Megatron-Core's precision-aware optimizer (--use-precision-aware-optimizer: Transformer Engine's FusedAdam
  // holds the distributed optimizer's state in the dtypes below; megatron/core/optimizer/__init__.py and
  // optimizer_config.py at NVIDIA/Megatron-LM@d98e8a64). Needs use_distributed_optimizer. main_grads_dtype bf16
  // makes the gradient buffer and its reduction bf16 (grad_reduce_in_fp32 false); the other three set the
  // optimizer state's bytes (adam_state_bytes) and so the optimizer step's memory traffic.
  bool use_precision_aware_optimizer = false;
  // Megatron-LM's --optimizer: "adam" (two fp32 moments) or "sgd" (torch / Transformer Engine FusedSGD with
  // --sgd-momentum, default 0.9: one fp32 momentum buffer, none at momentum 0; megatron/core/optimizer/__init__.py
  // at NVIDIA/Megatron-LM@d98e8a64). The state's bytes per parameter are adam_state_bytes().
  // "lamb" (not a Megatron-LM choice; GPT-NeoX / DeepSpeed / apex name it so): Adam's two fp32 moments plus a
  // per-tensor trust ratio, so the state is Adam's and the step moves more bytes (GptStepKernels::optimizer).
  std::string optimizer = "adam";
  double sgd_momentum = 0.9;
  std::string main_grads_dtype = "fp32";   // fp32 | bf16
  std::string main_params_dtype = "fp32";  // fp32 | fp16 (the master weights)
  std::string exp_avg_dtype = "fp32";      // fp32 | fp16 | bf16 | fp8 (Adam's first moment; fp8 = TE's uint8 E4M3)
  std::string exp_avg_sq_dtype = "fp32";   // the same for the second moment
  // Megatron-Core's optimizer CPU offload (--optimizer-cpu-offload, --optimizer-offload-fraction,
  // --overlap-cpu-optimizer-d2h-h2d: HybridDeviceOptimizer, megatron/core/optimizer/cpu_offloading/
  // hybrid_optimizer.py at NVIDIA/Megatron-LM@d98e8a64). The first `optimizer_offload_fraction` of the distributed
  // optimizer's shard (dense and expert shards alike) keeps its fp32 master weight and AdamW moments in pinned host
  // memory and is stepped there by torch's CPU AdamW; the rest stays on the GPU with an fp32 FusedAdam state
  // (12 bytes: adam_state_bytes). The step copies the offloaded gradients to the host, runs the CPU AdamW at the
  // host's DRAM bandwidth (host_memory_bandwidth_per_gpu, 0 = gpt_detail::host_dram_Bps of the GPU's server) and
  // copies the parameters back: serially, or pipelined per parameter with overlap_cpu_optimizer_d2h_h2d
  // (workloads/gpt_model.cpp optimizer_offload_times). Needs use_precision_aware_optimizer, as Megatron-LM asserts.
  bool optimizer_cpu_offload = false;
  double optimizer_offload_fraction = 1.0;  // Megatron-LM's argparse default (OptimizerConfig's is 0.0)
  bool overlap_cpu_optimizer_d2h_h2d = false;
  double host_memory_bandwidth_per_gpu = 0;  // bytes/s of host DRAM per GPU; 0 = by GPU (host_dram_Bps)
  // The share of the optimizer state on the host: optimizer_offload_fraction with the offload, else 0.
  double optimizer_host_fraction() const { return optimizer_cpu_offload ? optimizer_offload_fraction : 0.0; }
  // Megatron-LM's chunked optimizer-state offload (--chunked-optimizer-state-offload, --optimizer-state-offload-
  // chunk-size-mb, --optimizer-state-offload-fraction; ChunkedOptimizerStateOffloader, megatron/core/optimizer/
  // cpu_offloading/chunked_optimizer_state_offload.py at NVIDIA/Megatron-LM dev @d48bd6be). Each distributed
  // optimizer (the dense shard's, then the experts') keeps the Adam moments and fp32 master weights of its selected
  // parameters -- the first optimizer_state_offload_fraction of its bytes, whole parameters -- in pinned host memory
  // between steps. The GPU's FusedAdam still steps them: the masters come back as one window and the moments one
  // chunk at a time (whole parameters up to optimizer_state_offload_chunk_size_mb MiB of moments; 0 = one chunk)
  // through two reusable staging slots, the copy in of chunk k+1 beside the step of chunk k and the copy out of
  // chunk k-1, over the GPU's host link (gpt_detail::host_copy_Bps). The masters and the first chunk are prefetched
  // from the end of the last backward (finalize_model_grads), beside the gradient reductions; the moments go back
  // after each chunk's step, the masters at the next step's start beside the forward. HBM holds the unselected
  // state always, the masters window and the staging slots only for the optimizer step (GptMemory::
  // optimizer_step_bytes, OptimizerStateOffload). Needs the distributed optimizer and Adam, as Megatron-LM asserts.
  bool chunked_optimizer_state_offload = false;
  std::int64_t optimizer_state_offload_chunk_size_mb = 0;  // MiB (2^20 bytes) of moments per chunk; 0 = one chunk
  double optimizer_state_offload_fraction = 1.0;           // of each optimizer's bytes (moments + masters), [0, 1]
  // --offload-optimizer-states: at dev @d48bd6be the deprecated spelling of --chunked-optimizer-state-offload
  // (chunk size 0 and fraction 1 unless given; Adam only: optimizer_config.py:418-443); at core_dev_r0.16.0
  // @bfa1d316 its own offloader of the whole state (optimizer_state_offloader.py), which the chunk size 0 /
  // fraction 1 case is.
  bool offload_optimizer_states = false;
  // Whether any optimizer state is offloaded: either spelling with a fraction above 0 (training.py:2748-2752).
  bool state_offload() const {
    return (chunked_optimizer_state_offload || offload_optimizer_states) && optimizer_state_offload_fraction > 0.0;
  }
  // The host (CPU) memory per GPU of the servers the ranks run on: a server's memory over its GPUs (the smallest
  // over the servers), in bytes. `fabricsim run` takes it from the topology (its CPU nodes' memory: the presets'
  // datasheet figures, or --param host_memory=...); 0 = not known, not checked. check_gpt_layout_and_memory
  // refuses a configuration whose pinned host memory per GPU (GptMemory::host_bytes) exceeds it.
  double host_memory_per_gpu = 0;
  // Megatron's --fp8-param-gather (precision fp8 with the distributed optimizer or Megatron FSDP): the model
  // keeps its linear weights as FP8 tensors (Transformer Engine's Float8Tensor / MXFP8Tensor, created under
  // fp8_model_init) instead of bf16, and the distributed optimizer all-gathers the FP8 bytes
  // (megatron/core/distributed/param_and_grad_buffer.py, megatron/core/fp8_utils.py at NVIDIA/Megatron-LM@d98e8a64).
  bool fp8_param_gather = false;
  // Megatron's --fp4-param-gather (precision fp4): the linear weights are NVFP4 tensors (Transformer Engine's
  // NVFP4Tensor under fp8_model_init with the NVFP4 recipe: megatron/core/fp4_utils.py get_fp4_context(is_init=True)
  // at NVIDIA/Megatron-LM@d98e8a64) and the distributed optimizer all-gathers their 4-bit data with the block scales.
  bool fp4_param_gather = false;
  // Megatron's --first-last-layers-bf16 with --num-layers-at-start-in-bf16 / --num-layers-at-end-in-bf16 (default 1
  // each, read only with the switch): under FP8 or FP4 the first `start` and the last `end` decoder layers of the
  // whole model (global layer numbers) run outside the quantisation context -- their GEMMs, casts and weights stay
  // bf16 (is_first_last_bf16_layer / get_fp8_context in megatron/core/fp8_utils.py, get_fp4_context in
  // megatron/core/fp4_utils.py, used per layer by megatron/core/transformer/transformer_block.py at
  // NVIDIA/Megatron-LM@d98e8a64).
  bool first_last_layers_bf16 = false;
  std::int64_t num_layers_at_start_in_bf16 = 1;
  std::int64_t num_layers_at_end_in_bf16 = 1;
  // Megatron-Core's activation offloading (--cpu-offloading-num-layers N: Transformer Engine's
  // get_cpu_offload_context, transformer_engine/pytorch/cpu_offload.py at NVIDIA/TransformerEngine@d0067d0da):
  // the saved activations of the first N decoder layers are copied to host memory during the forward and back
  // during the backward (workloads/gpt_trace.cpp, gpt_model.cpp). 0 = off.
  std::int64_t cpu_offloading_num_layers = 0;
  // Megatron-Core's fine-grained activation offloading (--fine-grained-activation-offloading, --offload-modules;
  // megatron/core/pipeline_parallel/fine_grained_activation_offload.py at NVIDIA/Megatron-LM@d98e8a64): the inputs
  // of the named modules and the tensors autograd saves inside them go to pinned host memory after each module's
  // forward (a side stream) and come back before its backward (workloads/gpt_model.cpp, gpt_trace.cpp).
  bool fine_grained_activation_offloading = false;
  std::string offload_modules;                    // space-separated Megatron module names
  double activation_offload_fraction = 1.0;       // share of each chunk's offload groups offloaded (earlier ones)
  std::int64_t min_offloaded_tensor_size = 1024 * 1024;  // elements; smaller tensors stay on the GPU
  std::int64_t fine_grained_offloading_max_inflight_offloads = -1;  // -1 = None: compute never waits for a copy out
  std::int64_t delta_offload_bytes_across_pp_ranks = 0;  // pipeline rank r keeps r x this many bytes on the GPU
  // Whether fine-grained activation offloading moves `module`'s input (offload_modules).
  bool offloads(const std::string& module) const;
  // Sliding-window attention (--window-size "(left, right)", -1 = unbounded; --window-attn-skip-freq: every N-th
  // layer, or a [0/1] pattern, keeps full attention): window_left < 0 = no window.
  std::int64_t window_left = -1, window_right = -1;
  std::string window_attn_skip_freq;  // "" = every layer windowed; "N"; or a pattern "[1,1,1,0]*3"
  std::vector<bool> window_layers() const;  // per decoder layer: windowed (workloads/gpt_model.cpp)
  // Hybrid linear attention as Megatron-Core runs it (TransformerConfig at NVIDIA/Megatron-LM@d98e8a64:
  // experimental_attention_variant, linear_attention_freq and the linear_* shape fields; the layer is
  // megatron/core/ssm/gated_delta_net/gdn.py): "gated_delta_net" (or its canonical name "gdn") makes the layers
  // linear_attention_freq marks Gated DeltaNet layers (arXiv:2412.06464) -- in_proj h -> q, k (key heads x key dim
  // each), v, z (value heads x value dim each), beta, alpha (value heads each), a depthwise causal conv1d of
  // linear_conv_kernel_dim taps over q, k, v, the chunked gated delta rule, a gated RMSNorm and out_proj -- the
  // others keep full attention. "" = every layer full attention.
  std::string experimental_attention_variant;
  std::string linear_attention_freq;  // "N" (one full-attention layer after N - 1 GDN layers) or a list pattern
  std::int64_t linear_conv_kernel_dim = 4, linear_key_head_dim = 128, linear_value_head_dim = 128;
  std::int64_t linear_num_key_heads = 16, linear_num_value_heads = 32;  // Megatron's defaults
  // Megatron-Core's --attention-output-gate (Qwen3-Next's gated attention): the QKV projection also produces a
  // gate of the query width, and the attention output is multiplied by sigmoid(gate) before the output
  // projection (megatron/core/transformer/attention.py at NVIDIA/Megatron-LM@d98e8a64).
  bool attention_output_gate = false;
  // The parallel transformer block (GPT-J / PaLM; MegaScale arXiv:2402.15627 Sec. 3.1): x + attn(ln(x)) +
  // mlp(ln(x)), attention and MLP fed by one LayerNorm. Named as GPT-NeoX names it (megatron/neox_arguments/
  // neox_args.py at EleutherAI/gpt-neox@e897c23e: gpt_j_residual, with gpt_j_tied for the one shared norm);
  // Megatron-LM has no such flag. Modelled: the tied form (both flags), dense layers.
  bool gpt_j_residual = false;
  bool gpt_j_tied = false;
  bool parallel_block() const { return gpt_j_residual && gpt_j_tied; }
  bool gdn() const { return !experimental_attention_variant.empty(); }
  std::vector<bool> gdn_layers() const;  // per decoder layer: Gated DeltaNet (workloads/gpt_model.cpp)
  // Megatron-LM's hybrid model (HybridModel, megatron/core/models/hybrid/hybrid_model.py at
  // NVIDIA/Megatron-LM@d98e8a64; Nemotron-H, Nemotron-3): --hybrid-layer-pattern (or its deprecated alias
  // --hybrid-override-pattern) lists the decoder's sublayers, one symbol each -- M a Mamba-2 mixer, * self-attention,
  // - a dense MLP, E an MoE block, each with its own pre-norm and residual -- and '|' marks pipeline segment
  // boundaries (megatron/core/models/hybrid/hybrid_layer_allocation.py). num_layers is the pattern's length. Without
  // a pattern, the deprecated --hybrid-attention-ratio / --hybrid-mlp-ratio spread * and - over num_layers Mamba
  // layers (pattern_from_ratios). The Mamba-2 mixer's shape: mamba_state_dim, mamba_head_dim, mamba_num_groups,
  // mamba_num_heads (0 = 2 hidden_size / mamba_head_dim, MambaMixer's expand 2). workloads/gpt_hybrid.cpp.
  std::string hybrid_layer_pattern;
  double hybrid_attention_ratio = 0, hybrid_mlp_ratio = 0;
  std::int64_t mamba_state_dim = 128, mamba_head_dim = 64, mamba_num_groups = 8, mamba_num_heads = 0;
  bool hybrid() const { return !hybrid_layer_pattern.empty(); }
  std::string hybrid_layers() const;     // per decoder layer its symbol (the pattern without '|'); "" if not hybrid
  std::int64_t mamba_heads() const { return mamba_num_heads > 0 ? mamba_num_heads : 2 * hidden_size / mamba_head_dim; }
  std::int64_t mamba_d_inner() const { return mamba_heads() * mamba_head_dim; }
  // Bytes per parameter of the optimizer state (master weight + the two Adam moments, or SGD's momentum) in the
  // shard the distributed optimizer / Megatron FSDP keeps: 12 for Adam without the precision-aware optimizer, 8
  // for SGD with momentum, 4 without (workloads/gpt_model.cpp).
  double adam_state_bytes() const;
  bool cross_entropy_loss_fusion = false;  // Megatron's fused vocab-parallel cross entropy (smaller loss buffers)
  // Which cross-entropy code runs (its buffers set the last stage's loss memory): "megatron" (Megatron-Core's
  // vocab-parallel cross entropy), "torch" (eager torch.nn.functional.cross_entropy on fp32-upcast logits, as
  // torchtitan before pytorch/torchtitan@bbb1b616e, 2025-04-02, or without compile; DTensor loss_parallel
  // under TP), "torch_compiled" (the same function under torch.compile, torchtitan from bbb1b616e with
  // training.compile).
  std::string cross_entropy_impl = "megatron";
  // Megatron-Core's --cross-entropy-fusion-impl, read only with cross_entropy_loss_fusion
  // (GPTModel.compute_language_model_loss, megatron/core/models/common/language_module/language_module.py:173-198
  // at NVIDIA/Megatron-LM@d98e8a64): "native" (fused_vocab_parallel_cross_entropy) or "te" (Transformer Engine's
  // parallel_cross_entropy). Priced alike (gpt_model.cpp says why); Megatron-LM's validate_args refuses te with the
  // fusion from d98e8a64 on (arguments.py:1697-1702), while 1e057005 ran it.
  std::string cross_entropy_fusion_impl = "native";
  // torch FSDP2 unit of the embedding and output layer: false (torchtitan from pytorch/torchtitan@83e694105,
  // 2025-07-28: tok_embeddings and [norm, output] are units of their own, the embedding resharded after forward,
  // the output unit reduced right after its backward), true (torchtitan before it: the three stay in the root
  // unit, which FSDP2 keeps unsharded from the forward to the end of the backward). Memory only.
  bool fsdp_embeddings_in_root = false;
  // torch FSDP2's reshard_after_forward for the layer units, by torchtitan's names
  // (parallelism.fsdp_reshard_after_forward): "default" (resharded after forward without pipeline parallelism,
  // the stage kept gathered with it: torchtitan's apply_fsdp, reshard_after_forward = not pp_enabled), "never"
  // (Megatron-LM's --torch-fsdp2-no-reshard-after-forward: TorchFullyShardedDataParallel passes
  // reshard_after_forward False to fully_shard, megatron/core/distributed/torch_fully_sharded_data_parallel.py
  // at NVIDIA/Megatron-LM@d98e8a64): a layer's gathered parameters stay from its forward to its backward, so the
  // backward gathers nothing and the whole stage's layers are gathered at the start of the backward.
  // "always" equals "default" without pipeline parallelism and is refused with it (not modelled).
  std::string fsdp_reshard_after_forward = "default";
  bool fsdp_no_reshard() const { return use_torch_fsdp2 && fsdp_reshard_after_forward == "never"; }
  // torch FSDP2 unit of each MoE layer's routed experts: true makes them a unit of their own sharded over the
  // expert data-parallel group (torchtitan with expert parallelism, from pytorch/torchtitan@01f4e5022,
  // 2025-07-08, "dp2ep Expert Parallel": apply_fsdp calls fully_shard(transformer_block.moe.experts, mesh =
  // dp_mod_ep_mesh) before the block's own unit; with explicit prefetching from a54725cfa, 2025-08-18: block
  // i's forward prefetches [block i+1, block i+1's experts], its backward [block i-1, block i-1's experts]),
  // so each MoE layer gathers its experts over EDP after its dense part, one layer ahead, and reduce-scatters
  // their gradients over EDP after its backward, with FSDP2's copies; false reduces the expert gradients once
  // at the step's end. torch FSDP2 with MoE only.
  bool fsdp_expert_units = false;
  // The final RMSNorm runs eagerly with an fp32 upcast, autograd keeping the fp32 copy of its input and its
  // bf16 normalized output (torchtitan's own RMSNorm before pytorch/torchtitan@5078e92e4, 2025-04-17, outside
  // the per-block torch.compile). torch FSDP2 only; memory only.
  bool final_norm_eager = false;
  // torchao's float8 all-gather under torch FSDP2 (torchtitan's `float8.enable_fsdp_float8_all_gather`):
  // each Float8Linear weight shard is cast to fp8 before FSDP's all-gather and the gathered weight is a
  // Float8Tensor over the 1-byte all-gather output (torchao/float8/fsdp_utils.py,
  // WeightWithDynamicFloat8CastTensor.fsdp_pre_all_gather / fsdp_post_all_gather): 1 byte per gathered layer
  // weight in the all-gather and in memory; the embedding and the output layer stay bf16 (torchtitan keeps
  // `output` out of float8). torch FSDP2, precision fp8 with fp8_recipe tensorwise only. torchtitan applies it
  // only where the data-parallel shard degree is above 1 (torchtitan/float8.py Float8Handler at
  // pytorch/torchtitan@9dec370: `parallel_dims.dp_shard_enabled and ...`): see fsdp_float8_all_gather().
  bool enable_fsdp_float8_all_gather = false;
  // torchao's Float8LinearConfig.force_recompute_fp8_weight_in_bwd (OLMo-core's Float8Config default True at
  // allenai/OLMo-core@7e58d1289b src/olmo_core/float8/__init__.py; torchtitan leaves torchao's default, False):
  // the fp8 weight is not saved for the backward but cast again there from the gathered bf16 weight
  // (torchao/float8/float8_linear.py Float8Linear.forward, checkpoint of cast_weight_to_float8_t). Needs
  // torch FSDP2 with fp8_recipe tensorwise. Time only.
  bool force_recompute_fp8_weight_in_bwd = false;
  // The torch FSDP runtime is FSDP1 (FullyShardedDataParallel with one FlatParameter per unit, as
  // llm-foundry / Composer run it) instead of FSDP2's per-parameter sharding: the all-gather reads the flat
  // shard and writes the flat buffer the parameters are views of, and the reduce-scatter reads the flat
  // gradient, so none of FSDP2's copy-in, copy-out and chunk-cat kernels run (GptConfig::fsdp2_copies).
  // Needs use_torch_fsdp2 (which stands for torch FSDP). Time only.
  bool fsdp_flat_params = false;
  // torchtitan's model compile (job config `training.compile`; `compile.enable` with "model" in
  // `compile.components` from pytorch/torchtitan@08b8b244f, 2025-08-20, which compiles the loss apart): unset =
  // the fused kernels Megatron-Core / Transformer Engine run; "eager" = torchtitan's Llama block as eager
  // PyTorch runs it (one kernel per op: RMSNorm as an fp32 op chain, RoPE through complex fp32, SiLU and the
  // gate product apart, FP8 casts with separate amax ops; repeat_kv copies K and V to every query head);
  // "compiled" = the same block through torch.compile (Inductor fuses each chain into one kernel). Time only;
  // needs use_torch_fsdp2 (the torch runtime).
  std::string torch_compile;  // "" | "eager" | "compiled" (the JSON key is a boolean)
  // torchtitan's model.norm_type for RMSNorm under torch_compile: "rmsnorm" (its own module, eager: an op
  // chain) or "fused_rmsnorm" (its Triton kernel, one kernel forward and one backward even in eager).
  std::string norm_type = "rmsnorm";
  // Pipeline schedule (torchtitan's [parallelism] pipeline_parallel_schedule names; "" = 1F1B, or
  // Interleaved1F1B with virtual stages): DualPipe = DeepSeek-V3's bidirectional schedule (arXiv:2412.19437
  // Sec. 3.2.1; github:deepseek-ai/DualPipe dualpipe/dualpipe.py): every rank holds two stages, one of each
  // direction, and overlaps a forward of one direction with a backward of the other.
  std::string pipeline_parallel_schedule;
  // DualPipe's zero-bubble split (dualpipe.py enable_zb, WeightGradStore): in the warm-up's nB1W1F1 and the
  // cool-down's second half each backward computes only the input gradient and queues its weight-gradient
  // GEMMs, run later (FIFO) in the W steps. false: every backward runs whole (fabricsim's key, for comparison).
  bool dualpipe_zero_bubble = true;
  bool overlap_p2p_comm = false;        // false: compute waits for its pipeline send to complete (Megatron-LM
                                        // waits on its batched isend/irecv requests; --overlap-p2p-communication)
  std::string gpu = "a100-80gb";
  std::string precision = "fp16";        // fp16 | bf16 | fp8 | fp4
  std::string fp8_recipe = "delayed";    // delayed | tensorwise | rowwise | mxfp8 | blockwise (precision fp8)
  std::string fp4_recipe = "nvfp4";      // nvfp4 (precision fp4; Megatron's --fp4-recipe, its only built-in recipe)
  std::string flops_convention;          // megatron-sc21 | megatron-core | megatron-core-causal ("" -> by configuration)
  // Layout parameters the configuration did not give, which took the generator's defaults (the SC'21 GPT-3
  // layout: TP 8, PP 16, global batch 1536, full recompute; Megatron-LM's own defaults are 1, 1, micro-batch x
  // DP and none): "name value" each, named in the trace's notes so a pasted config that omits them shows it.
  std::vector<std::string> defaulted_layout;
  std::int64_t gpus_per_host = 8;        // for placing mirrors; taken from the topology by the scenario
  std::int64_t gpus_per_nvlink_domain = 0;  // NVLink domain size (0 = gpus_per_host); from the topology
  MoeConfig moe;                         // experts, multi-latent attention, MTP (workloads/moe.hpp)

  std::int64_t data_parallel() const {
    return world_size / (tensor_model_parallel_size * pipeline_model_parallel_size * context_parallel_size);
  }
  std::int64_t ffn() const { return ffn_hidden_size ? ffn_hidden_size : 4 * hidden_size; }
  std::int64_t query_groups() const { return num_query_groups ? num_query_groups : num_attention_heads; }
  std::int64_t head_dim() const { return kv_channels ? kv_channels : hidden_size / num_attention_heads; }
  bool fsdp() const { return use_torch_fsdp2 || data_parallel_sharding_strategy == "optim_grads_params"; }
  bool fp8() const { return precision == "fp8"; }
  bool fp4() const { return precision == "fp4"; }
  // The decoder linears run quantised GEMMs (Transformer Engine's FP8 or NVFP4 recipes).
  bool quantized() const { return fp8() || fp4(); }
  // The recipe of the quantised GEMMs: fp8_recipe under fp8, fp4_recipe ("nvfp4") under fp4.
  const std::string& quant_recipe() const { return fp4() ? fp4_recipe : fp8_recipe; }
  // Whether global decoder layer `gl` stays bf16 in a quantised run (first_last_layers_bf16).
  bool bf16_layer(std::int64_t gl) const {
    return quantized() && first_last_layers_bf16 &&
           (gl < num_layers_at_start_in_bf16 || gl >= num_layers - num_layers_at_end_in_bf16);
  }
  bool has_bf16_layers() const {
    return quantized() && first_last_layers_bf16 && (num_layers_at_start_in_bf16 > 0 || num_layers_at_end_in_bf16 > 0);
  }
  // The same run with its decoder layers in bf16: the configuration the layers of first_last_layers_bf16 are
  // priced with.
  GptConfig bf16_layers_config() const {
    GptConfig h = *this;
    h.precision = "bf16";
    h.fp8_param_gather = h.fp4_param_gather = false;
    return h;
  }
  // The float8 all-gather in effect: asked for and a data-parallel shard group of more than one rank (context
  // parallelism alone does not turn it on; HSDP's replicas do not count).
  bool fsdp_float8_all_gather() const {
    const std::int64_t r = num_distributed_optimizer_instances > 1 ? num_distributed_optimizer_instances : 1;
    return enable_fsdp_float8_all_gather && data_parallel() / r > 1;
  }
  // Bytes per element of a layer weight as torch FSDP2 all-gathers and holds it: 1 with the float8
  // all-gather, else 2 (bf16).
  double fsdp_layer_gather_bytes() const { return fsdp_float8_all_gather() ? 1.0 : 2.0; }
  // Whether the layer linears are torchao Float8Linear modules with tensorwise dynamic scaling (torch FSDP2,
  // precision fp8, fp8_recipe tensorwise, dense layers: workloads/gpt_kernels.cpp, torchao_float8_weight_costs).
  bool torchao_float8_weights() const { return use_torch_fsdp2 && fp8() && fp8_recipe == "tensorwise"; }
  // Whether the step runs torch FSDP2's copies around its collectives (workloads/gpt_kernels.cpp,
  // fsdp_copy_costs): torch FSDP2, not FSDP1's flat parameters.
  bool fsdp2_copies() const { return use_torch_fsdp2 && !fsdp_flat_params; }
  // Whether the sequence-parallel all-gathers of the TP blocks (the column-parallel linears' input, the
  // row-parallel linears' output gradient, the backward's re-gather of the input) move FP8 data: the input is
  // quantised on the local sequence shard and the FP8 shards are gathered. Megatron with Transformer Engine
  // (torch_compile unset): every TE recipe (LayerNormLinear quantises the norm output before
  // gather_along_first_dim, grad_output_preprocess casts the gradient before its gather;
  // transformer_engine/pytorch/module/layernorm_linear.py and base.py at NVIDIA/TransformerEngine@0004dbd0 for
  // delayed scaling, @d0067d0da for the current-scaling / MXFP8 / block quantizers); torchao's rowwise recipe is
  // no TE recipe and is left in bf16. torchtitan (torch_compile set): only the tensorwise recipe, through
  // torchao's Float8ColwiseParallel / Float8RowwiseParallel / PrepareFloat8ModuleInput
  // (torchtitan/models/llama3/parallelize_llama.py apply_tp at pytorch/torchtitan@820504e: "float8 all-gather
  // with TP is only supported for tensorwise"; torchao/float8/float8_tensor_parallel.py at pytorch/ao@6243040).
  // The reduce-scatters stay in bf16 in both.
  // NVFP4 (precision fp4) gathers its NVFP4 shards the same way (_all_gather_nvfp4 in
  // transformer_engine/pytorch/distributed.py at @d0067d0da).
  bool tp_gathers_fp8() const {
    if (fp4()) return sequence_parallel && tensor_model_parallel_size > 1;
    if (!fp8() || !sequence_parallel || tensor_model_parallel_size <= 1) return false;
    return torch_compile.empty() ? fp8_recipe != "rowwise" : fp8_recipe == "tensorwise";
  }
  // Whether Megatron's selective recompute covers `module` (recompute_modules; never under torchtitan's "op").
  bool recomputes(const std::string& module) const;
  std::int64_t moe_ffn() const { return moe.moe_ffn_hidden_size ? moe.moe_ffn_hidden_size : ffn(); }
  // Width of the routed tokens: moe_latent_size under latent MoE (the dispatcher and the routed experts see the
  // fc1_latent_proj output, megatron/core/transformer/moe/moe_layer.py and token_dispatcher.py @d98e8a64),
  // otherwise hidden_size.
  std::int64_t moe_width() const { return moe.moe_latent_size ? moe.moe_latent_size : hidden_size; }
  std::int64_t etp() const {
    return moe.expert_tensor_parallel_size ? moe.expert_tensor_parallel_size : tensor_model_parallel_size;
  }
  // Expert data-parallel size: the expert grid ETP x EP x EDP covers the TP x CP x DP GPUs of a stage.
  std::int64_t expert_data_parallel() const {
    return tensor_model_parallel_size * context_parallel_size * data_parallel() / (etp() * moe.expert_model_parallel_size);
  }
  // Virtual pipeline chunks per stage (1 = no interleaving).
  std::int64_t vp() const;
  // The interleaved schedule's N (microbatch_group_size_per_vp_stage, default the pipeline size).
  std::int64_t microbatch_group() const {
    return microbatch_group_size_per_vp_stage ? microbatch_group_size_per_vp_stage : pipeline_model_parallel_size;
  }
  // The layers the pipeline split divides: num_layers, plus one each for the embedding and the loss where
  // account_for_embedding/loss_in_pipeline_split count them.
  std::int64_t split_layers() const;
  bool dualpipe() const { return pipeline_parallel_schedule == "DualPipe"; }
  // The virtual stage (in layer order: pipeline rank k mod PP, chunk k / PP) that runs the MTP layers: the
  // layout's stage holding the `m`s, else the last one; -1 without MTP.
  std::int64_t mtp_virtual_stage() const;
  // Megatron-Core's mtp_standalone (pipeline_parallel_layer_layout.py validate_layer_layout at
  // NVIDIA/Megatron-LM@d98e8a64dd): the MTP layers sit on a pipeline rank before the last, so they are not in the
  // loss's virtual stage.
  bool mtp_standalone() const {
    const std::int64_t k = mtp_virtual_stage();
    return k >= 0 && k != pipeline_model_parallel_size * vp() - 1;
  }
};

// Reads and validates (divisibility, memory fit is checked by generate_gpt). Unknown keys are errors.
GptConfig gpt_config_from_params(const ParamMap& p, const std::string& where);
ParamMap gpt_config_to_params(const GptConfig& c);
// The defaults the generator gives a scenario's shape, batch and layout where it names no model and no value
// (GptConfig's initialisers: GPT-3 175B's), "key value" joined by ", ", for help and docs.
std::string gpt_defaults_text();
// One warning line (without "warning: ") when `p` names a catalogue model but no parallelism parameter, naming
// the layout defaults applied (TP, PP, no virtual pipeline, and recompute / global batch where not given); ""
// otherwise. The defaults are GPT-3 175B's, not a choice for the model.
std::string gpt_default_layout_warning(const ParamMap& p);
// The parameter names gpt_config_from_params accepts (read from its own code: workloads/params.hpp names()).
std::set<std::string> gpt_param_names();
// The parameters read as gpt_config_from_params reads them (each value's type and range, no key left unread),
// without the checks between parameters (layout, batch, memory): what a search over layouts (`plan`) checks
// once on its base scenario, so that a misspelt key is an error rather than every candidate refused.
void check_gpt_params_read(const ParamMap& p, const std::string& where);

// Megatron-Core's pipeline_model_parallel_layout (megatron/core/transformer/pipeline_parallel_layer_layout.py at
// NVIDIA/Megatron-LM@d98e8a64dd): the string form ("Et*3|(tt|)*29,m|L": `|` ends a virtual stage, `,` is
// cosmetic, `(..)*n` and `x*n` repeat) or the list form (a JSON list of lists of LayerType names: embedding,
// decoder, mtp, loss), as one string per virtual stage of the letters E t m L. Throws InputError at `where`.
std::vector<std::string> parse_pipeline_layout(const std::string& text, const std::string& where);
// The string form of a parsed layout (stages joined by `|`).
std::string pipeline_layout_text(const std::vector<std::string>& stages);
// The layout of a split given as decoder layers per virtual stage, in layer order (the embedding opens the
// first, the loss closes the last): what the torchtitan importer writes for its per-stage layer counts.
std::string pipeline_layout_of_counts(const std::vector<std::int64_t>& layers_per_virtual_stage);

// Decoder layers of each (pipeline stage, virtual chunk): layout[stage][chunk]. Megatron-LM's rules: an
// even split, or decoder_first/last_pipeline_num_layers on the first/last stage and the rest evenly, or
// the embedding / loss counted as one layer each (account_for_*_in_pipeline_split), or
// pipeline_model_parallel_layout's `t` per virtual stage.
std::vector<std::vector<std::int64_t>> gpt_layer_layout(const GptConfig& c);

// Model FLOPs per iteration in the configuration's convention (gpt_flops_convention):
//  megatron-sc21: 96 B s l h^2 (1 + s/(6h) + V/(16 l h)) with full recompute, 72 (...) without (Narayanan
//    et al., SC'21, Sec. 5.1 / Appendix) -- the convention of the SC'21 validation rows;
//  megatron-core: Megatron-Core's num_floating_point_operations (megatron/training/training.py): 12 B s l h^2
//    ((1 + g/a + s/h) q/h + (f/h)(3/2 if swiglu) + V/(2 l h)), q = a * kv_channels, independent of recompute,
//    attention counted non-causal (the 2024 version), logits counted once (tied or untied);
//  megatron-core-causal: the same with s/h halved for the causal mask, as Megatron-LM counts from
//    NVIDIA/Megatron-LM@8873b55d6a (2025-03-06, "Only half of the attention matrix is non-zero") to
//    d98e8a64dd (2026-08) at least.
double gpt_model_flops(const GptConfig& c);
std::string gpt_flops_convention(const GptConfig& c);
// Parameters of the whole model (GQA, SwiGLU, untied output, norm type aware).
double gpt_num_parameters(const GptConfig& c);

// The chunked optimizer-state offload of one rank (ChunkedOptimizerStateOffloader, megatron/core/optimizer/
// cpu_offloading/chunked_optimizer_state_offload.py at NVIDIA/Megatron-LM dev @d48bd6be; workloads/gpt_model.cpp
// plan_state_offload says what is modelled and how).
struct OptimizerStateOffload {
  struct Child {                 // one distributed optimizer: the dense shard's, then the experts' (ChainedOptimizer)
    double elements = 0;         // its shard's elements on this rank
    double piece = 0;            // elements of its largest parameter piece (the unit of selection and chunking)
    double selected = 0;         // offloaded elements (whole pieces)
    std::vector<double> chunks;  // offloaded elements per chunk, in step order
    double slot[2] = {0, 0};     // the largest chunk (elements) of each of the two staging slots
  };
  std::vector<Child> children;
  double moment_bytes = 0;  // per element: Adam's two moments (exp_avg_dtype + exp_avg_sq_dtype)
  double master_bytes = 0;  // per element: the master weight (adam_state_bytes - moment_bytes)
  std::int64_t chunks() const;
  double selected_elements() const;
  double host_bytes() const { return selected_elements() * (moment_bytes + master_bytes); }
  double masters_bytes() const { return selected_elements() * master_bytes; }
  // The staging slots' peak: while child i steps, its two slots and the first chunks prefetched for the later ones.
  double staging_bytes() const;
  double step_bytes() const { return masters_bytes() + staging_bytes(); }
};

struct GptMemory {
  double weights_bytes = 0;      // model weights (incl. FP8 weight copies) on the most loaded GPU
  double grads_bytes = 0;        // gradient buffers
  double optimizer_bytes = 0;    // fp32 master weights + Adam moments (sharded by dist. optimizer / FSDP)
  double activations_bytes = 0;  // stored activations (in-flight micro-batches) + logits + working set
  double activations_offloaded_bytes = 0;  // fine-grained activation offloading: at the peak, in host memory
  double allocator_reserve_bytes = 0;  // cached, not live (torch runtime only): FSDP2's all-gather pool, loss hole
  double buffers_bytes = 0;      // runtime buffers (torch runtime only): cuBLAS workspace, RoPE table
  // Pinned host memory per GPU, not in HBM and not in total_bytes(): optimizer_cpu_offload's fp32 master weights,
  // AdamW moments and fp32 gradient buffers of the offloaded shard (16 bytes per element; workloads/gpt_model.cpp).
  double host_optimizer_bytes = 0;
  double host_optimizer_elements = 0;  // the offloaded elements of the shard (dense and expert)
  // Chunked optimizer-state offload (GptConfig::state_offload): the selected moments and master weights, kept in
  // pinned host memory between steps (optimizer_bytes is then the unselected state only), and what HBM holds of
  // them during the optimizer step, when the micro-batches' activations are gone: the masters window and the
  // staging slots' peak (OptimizerStateOffload::step_bytes).
  double optimizer_offloaded_bytes = 0;
  double optimizer_step_bytes = 0;
  OptimizerStateOffload state_offload;  // the plan (empty without the offload)
  std::int64_t stage = 0;        // pipeline stage of the peak
  // Host memory per GPU of everything offloaded: optimizer_cpu_offload's shard, the offloaded optimizer state,
  // fine-grained activation offloading's activations at the peak (pinned buffers all, none freed within a step).
  double host_bytes() const { return host_optimizer_bytes + optimizer_offloaded_bytes + activations_offloaded_bytes; }
  std::string largest_host_term() const;
  double params_bytes() const { return weights_bytes + grads_bytes + optimizer_bytes; }
  // The peak: the forward / backward phase (activations) or, with the optimizer-state offload, the optimizer step
  // (the masters window and the staging slots in HBM), whichever is larger.
  double total_bytes() const {
    return params_bytes() + std::max(activations_bytes, optimizer_step_bytes) + allocator_reserve_bytes + buffers_bytes;
  }
  std::string largest_term() const;
};
// Peak over pipeline stages.
GptMemory gpt_memory_per_gpu(const GptConfig& c);
GptMemory gpt_memory_of_stage(const GptConfig& c, std::int64_t stage);

// What generate_gpt checks before pricing a kernel: the layer split over (virtual) pipeline stages, the GPU,
// and the memory per GPU against its HBM. Throws InputError (`where`) for a layout that cannot be split and
// DoesNotFitError naming every memory term and the largest when the model does not fit; returns the memory.
// With GptConfig::host_memory_per_gpu known, also DoesNotFitError when the largest pipeline stage's host memory
// per GPU (GptMemory::host_bytes) exceeds it, naming the host terms, the largest and the capacity.
// `fabricsim plan` prunes candidates with it before simulating.
GptMemory check_gpt_layout_and_memory(const GptConfig& c, const std::string& where);

// Builds the trace. `cm` prices the compute kernels (durations are written into the trace). Throws
// InputError (`where`) if the layout is invalid or the model does not fit in GPU memory.
Trace generate_gpt(const GptConfig& c, const models::ComputeModel& cm, const std::string& where);

}  // namespace fabricsim::workloads
