#!/bin/bash
# Megatron-MoE-ModelZoo's DeepSeek-V3 H100 recipe, the first command of
# best_practice/deepseek-v3/run_deepseek_v3_h100.sh at yanring/Megatron-MoE-ModelZoo@e865051 ("best config on 1024
# H100 GPUs with 4096 sequence lengths"):
#   A2A_OVERLAP=1 PP=8 VPP=4 TP=2 EP=64 NNODES=128 GBS=8192 PR=fp8 bash sbatch_benchmarking.sh \
#     --recompute-granularity selective --recompute-modules mla_up_proj mlp \
#     --mtp-num-layers 1 --mtp-loss-scaling-factor 0.1 --pipeline-model-parallel-layout "Et|(tt|)*30mL"
# written out as the training command sbatch_benchmarking.sh (same commit) assembles and srun runs on each of the
# 8 GPUs of the 128 nodes: model_configs/benchmarking/DeepSeek-V3.yaml's MODEL_ARGS in order (envsubst with the
# variables above and runtime.conf's DeepSeek-V3 row: CP 1, MBS 1, SEQ_LEN 4096; "true" values as bare flags, the
# "false" ones dropped), the recipe's own flags, then what sbatch_benchmarking.sh appends: the default DISPATCHER
# deepep, PR fp8 (blockwise FP8, FP8 parameter gather, precision-aware optimizer with bf16 moments, router padding)
# and A2A_OVERLAP 1 (delayed wgrad, EP-communication overlap, CUDA_DEVICE_MAX_CONNECTIONS 32). The yaml's ENV_VARS
# are exported first. Paths that the run leaves to the user (data, checkpoints, tensorboard) are placeholders.
# Written for fabricsim's tests (tests/apps/test_import_modelzoo.cpp); nothing here is run.

export TORCH_NCCL_AVOID_RECORD_STREAMS=0
export NVTE_ALLOW_NONDETERMINISTIC_ALGO=1
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
export NCCL_NVLS_ENABLE=0
export NVTE_FUSED_ATTN=1
export NVTE_NORM_FWD_USE_CUDNN=1
export NVTE_NORM_BWD_USE_CUDNN=1
export CUDA_DEVICE_MAX_CONNECTIONS=32
export NVTE_FWD_LAYERNORM_SM_MARGIN=24
export NVTE_BWD_LAYERNORM_SM_MARGIN=24

OUTPUT_PATH=${OUTPUT_PATH:-/outputs/DeepSeek-V3-benchmarking}

torchrun --nproc-per-node 8 --nnodes 128 pretrain_gpt.py \
    --distributed-timeout-minutes 60 \
    --tensor-model-parallel-size 2 \
    --pipeline-model-parallel-size 8 \
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
    --global-batch-size 8192 \
    --train-samples 585937500 \
    --exit-duration-in-mins 220 \
    --no-save-optim \
    --no-check-for-nan-in-loss-and-grad \
    --cross-entropy-loss-fusion \
    --cross-entropy-fusion-impl native \
    --manual-gc \
    --manual-gc-interval 10 \
    --transformer-impl transformer_engine \
    --seq-length 4096 \
    --data-cache-path /workspace/data_cache \
    --tokenizer-type HuggingFaceTokenizer \
    --tokenizer-model unsloth/DeepSeek-V3 \
    --data-path /data/dsv3_text_document \
    --split 99,1,0 \
    --no-mmap-bin-files \
    --no-create-attention-mask-in-dataloader \
    --num-workers 6 \
    --num-layers 61 \
    --hidden-size 7168 \
    --ffn-hidden-size 18432 \
    --num-attention-heads 128 \
    --kv-channels 128 \
    --max-position-embeddings 4096 \
    --position-embedding-type rope \
    --rotary-base 10000 \
    --make-vocab-size-divisible-by 3232 \
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
    --num-experts 256 \
    --moe-layer-freq "([0]*3+[1]*58)" \
    --moe-ffn-hidden-size 2048 \
    --moe-shared-expert-intermediate-size 2048 \
    --moe-router-load-balancing-type seq_aux_loss \
    --moe-router-topk 8 \
    --moe-grouped-gemm \
    --moe-aux-loss-coeff 1e-4 \
    --moe-router-group-topk 4 \
    --moe-router-num-groups 8 \
    --moe-router-topk-scaling-factor 2.5 \
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
    --rotary-scaling-factor 40 \
    --mscale 1.0 \
    --mscale-all-dim 1.0 \
    --eval-iters 32 \
    --eval-interval 200 \
    --no-load-optim \
    --no-load-rng \
    --auto-detect-ckpt-format \
    --load /checkpoints/dsv3 \
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
    --wandb-project moe-benchmarking \
    --wandb-exp-name DeepSeek-V3-TP2PP8EP64CP1VPP4-MBS1GBS8192- \
    --bf16 \
    --enable-experimental \
    --recompute-granularity selective \
    --recompute-modules mla_up_proj mlp \
    --mtp-num-layers 1 --mtp-loss-scaling-factor 0.1 \
    --pipeline-model-parallel-layout "Et|(tt|)*30mL" \
    --moe-token-dispatcher-type flex --moe-flex-dispatcher-backend deepep \
    --fp8-recipe blockwise --fp8-format e4m3 \
    --fp8-param-gather \
    --use-precision-aware-optimizer --main-grads-dtype fp32 --main-params-dtype fp32 --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16 \
    --moe-router-padding-for-fp8 \
    --delay-wgrad-compute --overlap-moe-expert-parallel-comm
