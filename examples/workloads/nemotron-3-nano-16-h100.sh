#!/bin/bash
# Nemotron-3 Nano 30B-A3B pretraining with Megatron-LM's hybrid model on 2 DGX H100 (16 GPUs): 23 Mamba-2
# mixers, 23 MoE blocks (128 experts, top-6, one shared expert) and 6 attention layers, BF16, expert parallel 8
# over DP 16, distributed optimizer, full activation recompute (the 8K-token activations of 52 sublayers do not
# fit in 80 GB beside the weights and optimizer state without it), mock data. The model flags follow
# examples/post_training/modelopt/conf/nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.sh of Megatron-LM.
#   fabricsim run --megatron examples/workloads/nemotron-3-nano-16-h100.sh --topology dgx-h100

GPUS_PER_NODE=8
NNODES=${NNODES:-2}

DISTRIBUTED_ARGS=(
    --nproc-per-node $GPUS_PER_NODE
    --nnodes $NNODES
)

MODEL_ARGS=(
    --hybrid-layer-pattern MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME
    --mamba-num-heads 64 --mamba-head-dim 64
    --hidden-size 2688
    --ffn-hidden-size 1856
    --num-attention-heads 32 --kv-channels 128
    --group-query-attention --num-query-groups 2
    --seq-length 8192 --max-position-embeddings 8192
    --position-embedding-type none
    --squared-relu
    --normalization RMSNorm
    --untie-embeddings-and-output-weights
    --disable-bias-linear
    --attention-backend flash
    --num-experts 128 --moe-router-topk 6
    --moe-shared-expert-intermediate-size 3712
    --moe-grouped-gemm --moe-permute-fusion
    --moe-token-dispatcher-type alltoall
    --padded-vocab-size 131072
)

PARALLEL_ARGS=(
    --tensor-model-parallel-size 1
    --pipeline-model-parallel-size 1
    --expert-model-parallel-size 8
    --use-distributed-optimizer
    --overlap-grad-reduce
    --overlap-param-gather
)

TRAINING_ARGS=(
    --micro-batch-size 1
    --recompute-granularity full --recompute-method uniform --recompute-num-layers 1
    --global-batch-size 128
    --bf16
    --train-iters 100
    --mock-data
)

torchrun ${DISTRIBUTED_ARGS[@]} pretrain_hybrid.py \
    ${MODEL_ARGS[@]} ${PARALLEL_ARGS[@]} ${TRAINING_ARGS[@]}
