# harness for: sglang-jax:python/sgl_jax/srt/kernels/speculative/build_eagle_tree_structure_kernel.py
# ruff: noqa
# Appended to the kernel file by benchmarks/bench_mutations_public.py --corpus v3:
# build_eagle_tree_structure_pallas_call (FULL_MASK, topk 3, 4 draft steps, 9 draft tokens) for 3 requests of verified lengths 5, 11, 2 (max context 12),
# on a parent list / sorted top-score indices made by a simulated EAGLE beam search (distinct scores, so every
# selected token's parent is selected). Outputs are integers, compared exactly. The reference is a plain-Python
# transcription of sglang's CUDA build_tree_efficient (sgl-kernel eagle_utils.cu) over a tree mask that is 1 up
# to its used size and 0 after it, as the kernel initialises it; positions 0 and retrive_* -1 where unset.
import jax
import jax.numpy as jnp
import numpy as np

_TOPK = 3
_STEPS = 4
_DRAFT = 9
_MAX_CONTEXT = 12
_SEQ_LENS = (5, 11, 2)
PALLASITE_ENTRY = "harness_build_eagle_tree"
TOLERANCE = {"atol": 0, "rtol": 0}


def harness_build_eagle_tree(parent_list, selected_index, verified_seq_len, seq_lens_sum):
    return build_eagle_tree_structure_pallas_call(
        parent_list, selected_index, verified_seq_len, seq_lens_sum,
        draft_token_num=selected_index.shape[1] + 1, topk=_TOPK, max_context_len=_MAX_CONTEXT, tree_mask_mode=0)


def _beam_search(rng, topk, steps, draft):
    # flat token list: step 0 has topk tokens (indices 0..topk-1); step s >= 1 has topk*topk tokens, token
    # base + b*topk + c being child c of step s-1's beam b (base = topk + (s-1)*topk*topk).
    scores = list(np.sort(rng.uniform(0.05, 0.95, topk))[::-1])
    beams = [(i, scores[i]) for i in range(topk)]
    parents = [-1] + list(range(topk))
    for s in range(1, steps):
        base = topk + (s - 1) * topk * topk
        children = []
        for b, (_, score_b) in enumerate(beams):
            p = rng.uniform(0.05, 0.95, topk)
            for c in range(topk):
                children.append((base + b * topk + c, score_b * p[c]))
        scores.extend(score for _, score in children)
        beams = sorted(children, key=lambda t: -t[1])[:topk]
        if s < steps - 1:
            parents.extend(idx for idx, _ in beams)
    scores = np.asarray(scores)
    assert len(set(scores.tolist())) == scores.size
    selected = np.sort(np.argsort(-scores)[: draft - 1])
    return np.asarray(parents, np.int32), selected.astype(np.int32)


def example_inputs():
    rng = np.random.default_rng(7)
    made = [_beam_search(rng, _TOPK, _STEPS, _DRAFT) for _ in _SEQ_LENS]
    parent_list = jnp.asarray(np.stack([p for p, _ in made]), jnp.int32)
    selected_index = jnp.asarray(np.stack([s for _, s in made]), jnp.int32)
    seq_lens = jnp.asarray(_SEQ_LENS, jnp.int32)
    return (parent_list, selected_index, seq_lens, jnp.asarray(sum(_SEQ_LENS), jnp.int32))


def reference(parent_list, selected_index, verified_seq_len, seq_lens_sum):
    parent_list, selected_index = np.asarray(parent_list), np.asarray(selected_index)
    seq_lens = np.asarray(verified_seq_len)
    bs, draft = selected_index.shape[0], selected_index.shape[1] + 1
    capacity = _MAX_CONTEXT * draft * bs + draft * draft * bs
    size = int(seq_lens_sum) * draft + draft * draft * bs
    tree_mask = np.zeros(capacity, np.int32)
    tree_mask[:size] = 1
    positions = np.zeros(bs * draft, np.int32)
    retrive_index = np.full((bs, draft), -1, np.int32)
    next_token = np.full((bs, draft), -1, np.int32)
    next_sibling = np.full((bs, draft), -1, np.int32)
    for bid in range(bs):
        seq_len = int(seq_lens[bid])
        seq_tree_idx = draft * draft * bid + int(seq_lens[:bid].sum()) * draft
        sel = selected_index[bid]
        for tid in range(draft):
            token_tree_idx = seq_tree_idx + (seq_len + draft) * tid + seq_len + 1
            tree_mask[token_tree_idx - 1] = 1
            tree_mask[token_tree_idx:token_tree_idx + draft - 1] = 0
            if tid == 0:
                positions[bid * draft] = seq_len
                for i in range(draft - 1, 0, -1):
                    retrive_index[bid, i] = bid * draft + i
                    parent_tb_idx = sel[i - 1] // _TOPK
                    parent_position = 0
                    if parent_tb_idx > 0:
                        parent_token_idx = parent_list[bid, parent_tb_idx]
                        parent_position = int(np.nonzero(sel == parent_token_idx)[0][0]) + 1
                    if next_token[bid, parent_position] != -1:
                        next_sibling[bid, i] = next_token[bid, parent_position]
                    next_token[bid, parent_position] = i
                retrive_index[bid, 0] = bid * draft
            else:
                position, cur = 0, tid - 1
                while True:
                    position += 1
                    tree_mask[token_tree_idx + cur] = 1
                    parent_tb_idx = sel[cur] // _TOPK
                    if parent_tb_idx == 0:
                        break
                    cur = int(np.nonzero(sel == parent_list[bid, parent_tb_idx])[0][0])
                positions[bid * draft + tid] = position + seq_len
                retrive_index[bid, tid] = bid * draft + tid
    return tuple(jnp.asarray(a) for a in (tree_mask, positions, retrive_index, next_token, next_sibling))
