"""JAXBench 7p (ragged paged attention) judged at a scenario that is an instance of the task, outside CI.

    python benchmarks/bench_jaxbench_7p_consistent.py /path/to/accelerator-agents/JAXBench/benchmark

7p keeps its serving scenario (query and kv lengths) as module constants summing to 4096 tokens, so no size
the judge reduces it to through its CONFIG is an instance of the task: the judge says "not verified"
(runner/judging/instance.py). To check that the exported-program path judges the hand-tuned kernel right when
the inputs are consistent, this script copies the task folder to a scratch folder, scales CONFIG and the
constants to one small consistent scenario (64 tokens in 8 sequence slots, 16 query heads over 2 kv heads, 8
pages of 16 per sequence; the kernel's block sizes cut to fit), then runs ``pallasite eval`` on the copy, and on
the copy with the kernel's softmax scale planted wrong. Prints both verdicts and the wall time; exits 1 unless
the first is "compiled, correct" and the second "compiled, wrong". Nothing of the checkout is kept.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

SCALED = {"'max_num_batched_tokens': 4096": "'max_num_batched_tokens': 64", "'max_num_seqs': 64": "'max_num_seqs': 8",
          "'num_q_heads': 64": "'num_q_heads': 16", "'num_kv_heads': 8": "'num_kv_heads': 2",
          "'pages_per_seq': 256": "'pages_per_seq': 8", "'num_kv_pages_per_block': 64": "'num_kv_pages_per_block': 4",
          "'num_queries_per_block': 64": "'num_queries_per_block': 16"}
Q_LENS = (r"ACTIVE_Q_LENS = \(1,\) \* 48 \+ \(512,\) \* 7 \+ \(464,\)", "ACTIVE_Q_LENS = (1,) * 4 + (24,) * 2 + (12,)")
KV_LENS = (r"ACTIVE_KV_LENS = tuple\(\n\s+257 \+ \(\(i \* 73\) % 240\) \* 16 for i in range\(48\)\n\) \+ "
           r"\(1023, 1535, 2047, 2559, 3071, 3583, 4095, 4095\)", "ACTIVE_KV_LENS = (17, 33, 100, 127, 40, 90, 127)")
PLANTED = ("sm_scale = 1.0 / math.sqrt(CONFIG['head_dim'])", "sm_scale = 2.0 / math.sqrt(CONFIG['head_dim'])")


def scaled(text: str, planted: bool) -> str:
    for old, new in SCALED.items():
        text = text.replace(old, new)
    for pattern, new in (Q_LENS, KV_LENS):
        text, count = re.subn(pattern, new, text)
        if count != 1:
            raise SystemExit(f"the checkout's 7p no longer matches this script ({pattern[:40]}...)")
    if planted:
        if PLANTED[0] not in text:
            raise SystemExit("the checkout's 7p workload no longer states its softmax scale as this script expects")
        text = text.replace(*PLANTED)
    return text


def judged(bench: str, scratch: str, planted: bool) -> str:
    task = os.path.join(scratch, "planted" if planted else "consistent", "7p_Ragged_Paged_Attention")
    os.makedirs(task)
    source = os.path.join(bench, "7p_Ragged_Paged_Attention")
    for name in ("baseline.py", "optimized.py"):
        with open(os.path.join(source, name), encoding="utf-8") as f:
            text = scaled(f.read(), planted and name == "optimized.py")
        with open(os.path.join(task, name), "w", encoding="utf-8") as f:
            f.write(text)
    out = os.path.join(scratch, "planted.json" if planted else "consistent.json")
    subprocess.run([sys.executable, "-m", "pallasite.server.cli", "eval", os.path.dirname(task), "--target", "v6e",
                    "--format", "json", "--output", out], cwd=scratch, capture_output=True, text=True, check=False)
    (row,) = json.load(open(out, encoding="utf-8"))["methods"][0]["per_task"]
    return f"{row['status']}: {'; '.join(row['errors'])[:300] or row['verdict']['test']['why'][:300]}"


def main() -> int:
    if len(sys.argv) != 2 or not os.path.isdir(os.path.join(sys.argv[1], "7p_Ragged_Paged_Attention")):
        print(__doc__)
        return 2
    scratch = tempfile.mkdtemp(prefix="pallasite-7p-")
    try:
        start = time.perf_counter()
        right, wrong = judged(sys.argv[1], scratch, False), judged(sys.argv[1], scratch, True)
        print(f"7p at a consistent small scenario: {right}")
        print(f"7p with the softmax scale planted wrong: {wrong}")
        print(f"wall time {time.perf_counter() - start:.0f} s")
        return 0 if right.startswith("compiled, correct") and wrong.startswith("compiled, wrong") else 1
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
