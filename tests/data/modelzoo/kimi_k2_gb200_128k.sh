#!/bin/bash
# Megatron-MoE-ModelZoo's Kimi-K2 GB200 recipe, best_practice/kimi-k2/run_kimi_k2_gb200_128k_G128.sh at
# yanring/Megatron-MoE-ModelZoo@e865051 (128K sequence, TP 16, PP 2, EP 64 on 32 GB200 nodes of 4 GPUs, NVLink
# segments of 16 nodes):
#   OPTIMIZER_OFFLOAD=0 A2A_OVERLAP=0 DISPATCHER=hybridep MODEL=Kimi-K2 PP=2 TP=16 EP=64 CP=1 NNODES=32 GBS=128 \
#     SEQ_LEN=131072 PR=mxfp8 bash sbatch_benchmarking.sh --recompute-granularity selective \
#     --recompute-modules mla_up_proj mlp layernorm moe_act --pipeline-model-parallel-layout "'Et|t|(tt|)*29tL'" \
#     --fine-grained-activation-offloading --offload-modules expert_fc1 --te-rng-tracker --offload-optimizer-states \
#     --moe-permute-fusion-into-hybridep --moe-router-force-load-balancing --mock-data \
#     --tokenizer-type NullTokenizer --vocab-size 163840 --train-iters 10 --eval-iters 0
# written out as the training command sbatch_benchmarking.sh (same commit) assembles and srun runs on each of the
# 4 GPUs of the 32 nodes: model_configs/benchmarking/Kimi-K2.yaml's MODEL_ARGS in order (envsubst with the
# variables above and runtime.conf's Kimi-K2 row: MBS 1; "true" values as bare flags, the "false" ones dropped), the
# recipe's own flags (the layout's inner quotes are removed by the bash -c that runs the command), then what
# sbatch_benchmarking.sh appends: DISPATCHER hybridep (flex, hybridep backend, 32 SMs), PR mxfp8 (MXFP8, FP8
# parameter gather reusing the gradient buffer, precision-aware optimizer with bf16 moments, router padding) and,
# SEQ_LEN being above the yaml's 4096, --max-position-embeddings 131072. The yaml's ENV_VARS are exported first.
# Paths left to the user are placeholders. Written for fabricsim's tests (tests/apps/test_import_modelzoo.cpp).

export TORCH_NCCL_AVOID_RECORD_STREAMS=0
export NVTE_ALLOW_NONDETERMINISTIC_ALGO=1
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
export NCCL_NVLS_ENABLE=0
export NVTE_FUSED_ATTN=1
export NVTE_NORM_FWD_USE_CUDNN=1
export NVTE_NORM_BWD_USE_CUDNN=1
export CUDA_DEVICE_MAX_CONNECTIONS=1
export NVTE_FWD_LAYERNORM_SM_MARGIN=0
export NVTE_BWD_LAYERNORM_SM_MARGIN=0

OUTPUT_PATH=${OUTPUT_PATH:-/outputs/Kimi-K2-gb200-128k}

torchrun --nproc-per-node 4 --nnodes 32 pretrain_gpt.py \
    --distributed-timeout-minutes 60 \
    --tensor-model-parallel-size 16 \
    --pipeline-model-parallel-size 2 \
    --expert-model-parallel-size 64 \
    --context-parallel-size 1 \
    --expert-tensor-parallel-size 1 \
    --use-distributed-optimizer \
    --overlap-grad-reduce \
    --overlap-param-gather \
    --use-mcore-models \
    --sequence-parallel \
    --use-flash-attn \
    --disable-bias-linear \
    --micro-batch-size 1 \
    --global-batch-size 128 \
    --train-samples 585937500 \
    --exit-duration-in-mins 220 \
    --no-save-optim \
    --no-check-for-nan-in-loss-and-grad \
    --cross-entropy-loss-fusion \
    --cross-entropy-fusion-impl native \
    --manual-gc \
    --manual-gc-interval 10 \
    --transformer-impl transformer_engine \
    --seq-length 131072 \
    --data-cache-path /workspace/data_cache \
    --tokenizer-type HuggingFaceTokenizer \
    --tokenizer-model moonshotai/Kimi-K2-Instruct \
    --data-path mock \
    --split 99,1,0 \
    --no-mmap-bin-files \
    --no-create-attention-mask-in-dataloader \
    --num-workers 6 \
    --num-layers 61 \
    --hidden-size 7168 \
    --ffn-hidden-size 18432 \
    --num-attention-heads 64 \
    --kv-channels 64 \
    --max-position-embeddings 4096 \
    --position-embedding-type rope \
    --rotary-base 50000 \
    --make-vocab-size-divisible-by 1280 \
    --normalization RMSNorm \
    --norm-epsilon 1e-6 \
    --swiglu \
    --untie-embeddings-and-output-weights \
    --multi-latent-attention \
    --attention-dropout 0.0 \
    --hidden-dropout 0.0 \
    --clip-grad 1.0 \
    --weight-decay 0.1 \
    --qk-layernorm \
    --lr-decay-samples 584765624 \
    --lr-warmup-samples 1536000 \
    --lr-warmup-init 3.9e-7 \
    --lr 3.9e-6 \
    --min-lr 3.9e-7 \
    --lr-decay-style cosine \
    --adam-beta1 0.9 \
    --adam-beta2 0.95 \
    --num-experts 384 \
    --moe-layer-freq "([0]*1+[1]*60)" \
    --moe-ffn-hidden-size 2048 \
    --moe-shared-expert-intermediate-size 2048 \
    --moe-router-load-balancing-type seq_aux_loss \
    --moe-router-topk 8 \
    --moe-grouped-gemm \
    --moe-aux-loss-coeff 0 \
    --moe-router-group-topk 1 \
    --moe-router-num-groups 1 \
    --moe-router-topk-scaling-factor 2.827 \
    --moe-router-score-function sigmoid \
    --moe-router-enable-expert-bias \
    --moe-router-bias-update-rate 1e-3 \
    --moe-router-dtype fp32 \
    --moe-permute-fusion \
    --moe-router-fusion \
    --q-lora-rank 1536 \
    --kv-lora-rank 512 \
    --qk-head-dim 128 \
    --qk-pos-emb-head-dim 64 \
    --v-head-dim 128 \
    --rotary-scaling-factor 32 \
    --mscale 1.0 \
    --mscale-all-dim 1.0 \
    --eval-iters 32 \
    --eval-interval 200 \
    --no-load-optim \
    --no-load-rng \
    --auto-detect-ckpt-format \
    --save "$OUTPUT_PATH/checkpoints" \
    --save-interval 500 \
    --dist-ckpt-strictness log_all \
    --init-method-std 0.02 \
    --log-timers-to-tensorboard \
    --log-memory-to-tensorboard \
    --log-validation-ppl-to-tensorboard \
    --log-throughput \
    --log-interval 1 \
    --logging-level 40 \
    --tensorboard-dir "$OUTPUT_PATH/tensorboard" \
    --wandb-project megatron-moe-benchmarking \
    --wandb-exp-name Kimi-K2-TP16PP2EP64CP1VPP4-MBS1GBS128-gb200-128k \
    --bf16 \
    --enable-experimental \
    --recompute-granularity selective \
    --recompute-modules mla_up_proj mlp layernorm moe_act \
    --pipeline-model-parallel-layout "Et|t|(tt|)*29tL" \
    --fine-grained-activation-offloading \
    --offload-modules expert_fc1 \
    --te-rng-tracker \
    --offload-optimizer-states \
    --moe-permute-fusion-into-hybridep \
    --moe-router-force-load-balancing \
    --mock-data \
    --tokenizer-type NullTokenizer --vocab-size 163840 \
    --train-iters 10 \
    --eval-iters 0 \
    --moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep --moe-hybridep-num-sms 32 \
    --fp8-recipe mxfp8 --fp8-format e4m3 \
    --fp8-param-gather --reuse-grad-buf-for-mxfp8-param-ag \
    --overlap-grad-reduce --overlap-param-gather \
    --use-precision-aware-optimizer --main-grads-dtype fp32 --main-params-dtype fp32 --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16 \
    --moe-router-padding-for-quantization \
    --max-position-embeddings 131072
