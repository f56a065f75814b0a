"""Regenerate records.json: the worker's raw error records for every broken file of this folder.

    JAX_PLATFORMS=cpu ALLOW_MULTIPLE_LIBTPU_LOAD=1 python tests/data/compiler/record_errors.py

Runs the worker-side check op in this process (needs jax and libtpu) for each case of
expected.json at its expected tier alone, and stores the results with this folder's absolute path
replaced by ``/home/user/corpus``. tests/test_locate.py replays them, so locating is tested on the
compiler's real words without jax or libtpu.
"""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> int:
    from pallasite.runner.checks import handle_check

    expected = json.load(open(os.path.join(HERE, "expected.json")))
    out = {"_about": "Raw check-op results recorded by record_errors.py (jax/libtpu versions inside).", "cases": {}}
    for name, case in expected["cases"].items():
        path = os.path.join(HERE, f"{name}_broken.py")
        result = handle_check({"path": path, "chip": expected["target"], "tiers": [case["tier"]]})
        text = json.dumps(result).replace(HERE, "/home/user/corpus")
        out["cases"][name] = json.loads(text)
    import jax
    from importlib import metadata

    out["versions"] = {"jax": jax.__version__, "libtpu": _version(metadata, "libtpu")}
    with open(os.path.join(HERE, "records.json"), "w") as f:
        json.dump(out, f, indent=1)
    print(f"recorded {len(out['cases'])} cases")
    return 0


def _version(metadata, name):
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


if __name__ == "__main__":
    sys.exit(main())
