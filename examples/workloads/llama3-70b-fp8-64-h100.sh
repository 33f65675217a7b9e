#!/bin/bash
# Llama-3-70B pretraining benchmark with Megatron-LM on 8 DGX H100 (64 GPUs): FP8 (delayed scaling),
# TP 8 x PP 4 with 5 virtual stages per rank x DP 2, sequence parallel, distributed optimizer with
# overlapped gradient reduce and parameter gather, TP communication overlap, mock data.
# The same job as llama3-70b-fp8-64-h100.json except the vocabulary, which Megatron-LM pads to
# 129,024 (a multiple of 128 x TP) where the JSON uses Llama-3's 128,256. FlashAttention is asked for, as the
# JSON runs it (without --attention-backend, Transformer Engine would pick cuDNN attention on H100):
#   fabricsim import megatron examples/workloads/llama3-70b-fp8-64-h100.sh --topology dgx-h100 -o llama.json
#   fabricsim run --megatron examples/workloads/llama3-70b-fp8-64-h100.sh --topology dgx-h100

export CUDA_DEVICE_MAX_CONNECTIONS=1

GPUS_PER_NODE=8
NNODES=${NNODES:-8}
TP=8
PP=4
CHECKPOINT_DIR=${CHECKPOINT_DIR:-/checkpoints/llama3-70b}

DISTRIBUTED_ARGS=(
    --nproc-per-node $GPUS_PER_NODE
    --nnodes $NNODES
    --master-addr ${MASTER_ADDR:-localhost}
    --master-port 6000
)

MODEL_ARGS=(
    --num-layers 80
    --hidden-size 8192
    --ffn-hidden-size 28672
    --num-attention-heads 64
    --group-query-attention --num-query-groups 8
    --seq-length 8192 --max-position-embeddings 8192
    --swiglu
    --normalization RMSNorm
    --position-embedding-type rope --rotary-base 500000
    --untie-embeddings-and-output-weights
    --disable-bias-linear
    --attention-dropout 0.0 --hidden-dropout 0.0
    --attention-backend flash
)

# Megatron-LM overlaps pipeline sends with compute by default under the interleaved schedule; this
# run waits for them (--no-overlap-p2p-communication), as the JSON example does.
PARALLEL_ARGS=(
    --tensor-model-parallel-size $TP
    --pipeline-model-parallel-size $PP
    --num-virtual-stages-per-pipeline-rank 5
    --no-overlap-p2p-communication
    --sequence-parallel
    --use-distributed-optimizer
    --overlap-grad-reduce
    --overlap-param-gather
    --tp-comm-overlap
)

TRAINING_ARGS=(
    --micro-batch-size 1
    --global-batch-size 128
    --train-iters 100
    --bf16 --fp8-format hybrid --fp8-recipe delayed --fp8-amax-history-len 1024
    --lr 1.5e-4 --min-lr 1.5e-5 --lr-decay-style cosine --lr-warmup-iters 10
    --weight-decay 0.1 --clip-grad 1.0 --adam-beta1 0.9 --adam-beta2 0.95
    --init-method-std 0.008
)

DATA_ARGS=(
    --mock-data
    --tokenizer-type NullTokenizer
    --vocab-size 128256
    --split 99,1,0
)

LOGGING_ARGS=(
    --log-interval 1
    --log-throughput
    --eval-iters 0
    --save "$CHECKPOINT_DIR" --save-interval 1000
    --tensorboard-dir "$CHECKPOINT_DIR/tensorboard"
)

torchrun "${DISTRIBUTED_ARGS[@]}" pretrain_gpt.py \
    "${MODEL_ARGS[@]}" \
    "${PARALLEL_ARGS[@]}" \
    "${TRAINING_ARGS[@]}" \
    "${DATA_ARGS[@]}" \
    "${LOGGING_ARGS[@]}"
