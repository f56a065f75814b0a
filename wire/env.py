"""The environment a worker (and so the user's kernel code) runs with: an allowlist.

Kernel code — the user's and any LLM's — only ever runs in a worker, and nothing secret reaches
it: a variable passes only if its name is on the allowlist below AND matches no deny pattern.
The deny patterns win, so e.g. ``JAX_SOME_TOKEN`` or ``PALLASITE_GEMINI_API_KEY`` never pass even
though their prefixes are allowed. Stdlib only: the worker applies the same filter to itself at
start-up (which also covers `ssh host pallasite worker`, where the login shell sets the env).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

# Exact names that pass.
ALLOWED_NAMES = frozenset(
    {
        # the shell basics programs expect
        "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "TZ", "LANG", "LANGUAGE",
        "TMPDIR", "TMP", "TEMP", "PWD",
        # the Python environment the user chose
        "PYTHONPATH", "PYTHONHASHSEED", "PYTHONWARNINGS", "PYTHONDONTWRITEBYTECODE",
        "PYTHONUNBUFFERED", "PYTHONIOENCODING", "PYTHONUTF8", "PYTHONFAULTHANDLER", "VIRTUAL_ENV",
        "CONDA_PREFIX", "CONDA_DEFAULT_ENV", "LD_LIBRARY_PATH",
        # thread counts of numerical libraries
        "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
        # libtpu/XLA logging verbosity and multi-process loading
        "TF_CPP_MIN_LOG_LEVEL", "TF_CPP_MAX_VLOG_LEVEL", "TF_CPP_VMODULE",
        "ALLOW_MULTIPLE_LIBTPU_LOAD",
        "NO_COLOR",
    }
)

# Prefixes that pass: locale, XDG folders, and the JAX / XLA / TPU / pallasite settings.
ALLOWED_PREFIXES = ("LC_", "XDG_", "JAX_", "XLA_", "TPU_", "LIBTPU_", "PALLASITE_")

# Deny patterns, matched against the upper-cased name anywhere in it; they override the allowlist.
DENIED_PATTERNS = (
    r"KEY", r"TOKEN", r"SECRET", r"PASSW", r"CREDENTIAL", r"AUTH", r"COOKIE", r"SESSION",
    r"PRIVATE", r"CERT",
    r"^GOOGLE_", r"^GCLOUD", r"^CLOUDSDK_", r"^GCE_", r"^AWS_", r"^AZURE_", r"^OPENAI_",
    r"^GEMINI_", r"^ANTHROPIC_", r"^HF_", r"^HUGGING", r"^GITHUB_", r"^GH_", r"^SSH_",
    r"^GPG_", r"^KUBE", r"^DOCKER_", r"^VERTEX",
)
_DENIED = re.compile("|".join(DENIED_PATTERNS))

# Set for every worker: libtpu stays quiet without a TPU, and several workers (a pool, or another
# program) may load libtpu at once (without this, the second one fails on /tmp/libtpu_lockfile).
QUIET_LIBTPU = {
    "TPU_WORKER_HOSTNAMES": "localhost",
    "TPU_SKIP_MDS_QUERY": "1",
    "ALLOW_MULTIPLE_LIBTPU_LOAD": "1",
}


def is_denied(name: str) -> bool:
    """Whether the name looks like a secret or a cloud credential (never passes, even if asked)."""
    return bool(_DENIED.search(name.upper()))


def is_allowed(name: str) -> bool:
    """Whether a variable of this name may reach kernel code."""
    upper = name.upper()
    if is_denied(upper):
        return False
    return upper in ALLOWED_NAMES or upper.startswith(ALLOWED_PREFIXES)


def filter_environment(env: Mapping[str, str]) -> dict[str, str]:
    """The allowed subset of ``env``."""
    return {k: v for k, v in env.items() if is_allowed(k)}


def worker_environment(
    base: Mapping[str, str],
    *,
    platforms: str | None = "cpu",
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment to start a worker with.

    ``platforms`` becomes JAX_PLATFORMS ("cpu" for check workers: they must never hold TPU
    chips; None leaves the user's setting, for workers that time kernels on a TPU host).
    ``extra`` (variables the user named in settings) is added last: any name may be given
    there, except one matching the deny patterns.
    """
    env = filter_environment(base)
    env.update(QUIET_LIBTPU)
    env.setdefault("PYTHONUNBUFFERED", "1")
    # numpy's BLAS on one thread (the user's setting wins): the judge's interpreter of Mosaic kernels runs many
    # small matmuls, which BLAS threads slow by 50x on a busy machine (a (8,128)x(128,2048) product: 30 ms vs 0.6)
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    # A fatal signal (a segfaulting extension, an abort) prints the Python traceback on stderr, so
    # a crash while importing the user's file is placed at the line it was running (engine/findings/reply_failures.py).
    env.setdefault("PYTHONFAULTHANDLER", "1")
    if platforms is not None:
        env["JAX_PLATFORMS"] = platforms
    if extra:
        env.update({k: v for k, v in extra.items() if not is_denied(k)})
    return env

