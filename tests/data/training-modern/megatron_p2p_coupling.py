#!/usr/bin/env python3
"""What Megatron-LM's coupled pipeline calls cost an interleaved step (docs/validation.md, MegaScale Table 2).

Megatron-LM at commit 285068c8 (the commit of MegaScale Table 2's baseline) runs the interleaved 1F1B
schedule of megatron/schedules.py (forward_backward_pipelining_with_interleaving): warm-up forwards, each
followed by one pipeline call (send this output, receive the next input); the steady state, one forward and
one backward followed by one call with up to four transfers; cool-down backwards, each followed by one call.
Every call is megatron/p2p_communication.py `_communicate`: one torch.distributed.batch_isend_irecv of its
sends and receives, req.wait() on all of them, then torch.cuda.synchronize(). So a call ends only when every
peer it exchanges with has reached its own matching call: a receive is posted only at the call, never ahead.

This script runs that program on p ranks as an event model with deterministic durations, twice:
  coupled  -- as the commit runs it: each transfer starts when both calls are posted;
  ahead    -- every receive posted ahead (a transfer starts when its send is posted), as fabricsim's trace
              posts them; the compute still waits for its own sends.
and prints both step times for several micro-batch counts m, and the least-squares lines t = a m + b.

Durations (defaults: the MegaScale Table 2 shape, 175B, TP 8, PP 8, VP 6, sequence 2048): a forward of one
chunk is a third and its backward two thirds of the per-micro-batch compute + exposed TP time divided over
the v chunks (default 0.2013 s: 35.60 + 3.04 s over 192 micro-batches, the 256-GPU row of the generated
megascale-table2-terms table); the last chunk of the last stage also runs the output layer, V / (24 h + 4 s)
of a layer's FLOPs per layer of the chunk (its GEMM 2 s h V against a layer's 24 s h^2 + 4 s^2 h); one
transfer takes bytes / bandwidth (s h / t fp16 elements, sequence parallel, over one 200 Gb/s HDR port).

Usage: python3 tests/data/training-modern/megatron_p2p_coupling.py [--per-mb S] [--transfer-s S]
"""
import argparse
from collections import defaultdict


def program(p, v, m, r):
    """Rank r's items in order: ("C", fwd, chunk) computes, ("P", [(send?, peer, direction)]) calls."""
    total = m * v

    def chunk(k, fwd):  # get_model_chunk_id
        c = (k % (p * v)) // p
        return c if fwd else v - 1 - c

    first = lambda c: r == 0 and c == 0
    last = lambda c: r == p - 1 and c == v - 1
    nxt, prv = (r + 1) % p, (r - 1) % p
    warm = total if m == p else min((p - r - 1) * 2 + (v - 1) * p, total)
    rem = total - warm
    items = []
    if r != 0:
        items.append(("P", [(False, prv, "f")]))  # recv_forward before the warm-up
    for k in range(warm):
        c = chunk(k, True)
        items.append(("C", True, c))
        ops = []
        if not last(c):
            ops.append((True, nxt, "f"))
        if not (r == 0 and chunk(k + 1, True) == 0) and k != total - 1:
            ops.append((False, prv, "f"))
        if k == warm - 1 and rem > 0 and r != p - 1:
            ops.append((False, nxt, "b"))
        items.append(("P", ops))
    for k in range(rem):
        fk, bk = k + warm, k
        fc, bc = chunk(fk, True), chunk(bk, False)
        items += [("C", True, fc), ("C", False, bc)]
        ops = []
        if not last(fc):
            ops.append((True, nxt, "f"))
        if not first(bc):
            ops.append((True, prv, "b"))
        recv_prev = not (r == 0 and chunk(fk - (p - 1), True) == v - 1) and k != rem - 1
        recv_next = not (r == p - 1 and chunk(bk - (p - 1), False) == 0)
        if recv_prev:
            ops.append((False, prv, "f"))
        if recv_next:
            ops.append((False, nxt, "b"))
        items.append(("P", ops))
    for k in range(rem, total):
        bc = chunk(k, False)
        items.append(("C", False, bc))
        ops = []
        if not first(bc):
            ops.append((True, prv, "b"))
        if not (r == p - 1 and chunk(k + 1, False) == v - 1) and k != total - 1:
            ops.append((False, nxt, "b"))
        items.append(("P", ops))
    return items


def step_time(p, v, m, tf, tb, last_extra, x, coupled):
    progs = [program(p, v, m, r) for r in range(p)]
    sends, recvs = defaultdict(list), defaultdict(list)  # (src, dst, direction) -> calls, in order
    for r, items in enumerate(progs):
        for i, it in enumerate(items):
            if it[0] == "P":
                for send, peer, d in it[1]:
                    (sends[(r, peer, d)] if send else recvs[(peer, r, d)]).append((r, i))
    partner = {}
    for key, ss in sends.items():
        rs = recvs[key]
        assert len(ss) == len(rs), key
        for a, b in zip(ss, rs):
            partner[(a, key[2], True)] = b
            partner[(b, key[2], False)] = a
    posted, pos, t = {}, [0] * p, [0.0] * p
    moved = True
    while moved:
        moved = False
        for r in range(p):
            while pos[r] < len(progs[r]):
                it = progs[r][pos[r]]
                if it[0] == "C":
                    d = tf if it[1] else tb
                    t[r] += d * (1 + last_extra) if (r == p - 1 and it[2] == v - 1) else d
                    pos[r] += 1
                    moved = True
                    continue
                if (r, pos[r]) not in posted:
                    posted[(r, pos[r])] = t[r]
                    moved = True
                end = t[r]
                for send, peer, d in it[1]:
                    other = posted.get(partner[((r, pos[r]), d, send)])
                    if coupled or not send:
                        if other is None:
                            break
                        end = max(end, (max(t[r], other) if coupled else other) + x)
                    else:
                        end = max(end, t[r] + x)
                else:
                    t[r] = end
                    pos[r] += 1
                    moved = True
                    continue
                break
    assert all(pos[r] == len(progs[r]) for r in range(p)), "deadlock"
    return max(t)


def line(ms, ts):
    n, sx, sy = len(ms), sum(ms), sum(ts)
    sxx, sxy = sum(a * a for a in ms), sum(a * b for a, b in zip(ms, ts))
    a = (n * sxy - sx * sy) / (n * sxx - sx * sx)
    return a, (sy - a * sx) / n


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--per-mb", type=float, default=(35.60 + 3.04) / 192,
                    help="compute + exposed TP seconds per micro-batch on one rank (all its chunks)")
    ap.add_argument("--transfer-s", type=float, default=2048 * 12288 / 8 * 2 / 25e9,
                    help="seconds per pipeline transfer")
    a = ap.parse_args()
    p, v, s, h, V, layers_per_chunk = 8, 6, 2048, 12288, 64000, 2
    chunk = a.per_mb / v
    tf, tb = chunk / 3, 2 * chunk / 3
    last_extra = V / (24 * h + 4 * s) / layers_per_chunk  # the output layer on the last chunk, per chunk
    ms = [32, 48, 64, 96, 128, 192]
    print(f"PP {p}, VP {v}: chunk forward {tf * 1e3:.2f} ms, backward {tb * 1e3:.2f} ms, last chunk "
          f"+{100 * last_extra:.1f} %, transfer {a.transfer_s * 1e3:.3f} ms")
    print("m | coupled calls s | receives ahead s | coupled - ahead s | compute + TP s")
    cs, fs = [], []
    for m in ms:
        c = step_time(p, v, m, tf, tb, last_extra, a.transfer_s, True)
        f = step_time(p, v, m, tf, tb, last_extra, a.transfer_s, False)
        cs.append(c), fs.append(f)
        print(f"{m} | {c:.3f} | {f:.3f} | {c - f:+.3f} | {m * a.per_mb:.3f}")
    (ca, cb), (fa, fb) = line(ms, cs), line(ms, fs)
    print(f"line: coupled calls t = {ca:.4f} s x m + {cb:.3f} s; receives ahead t = {fa:.4f} s x m + {fb:.3f} s")


if __name__ == "__main__":
    main()
