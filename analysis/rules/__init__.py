"""The tier-0 rules, one module per concern, and the runner over them.

Each rule is a plain function of a ``RuleContext`` (``context.py``) yielding findings. Rules report
only what is certain from the source (false positives are the worst failure of a linter): any count,
dim or dtype that did not resolve statically makes a rule say nothing. TPU-only rules skip call sites
whose backend is "gpu". A module's rules are listed in its ``RULES``; ``all_rules`` collects them
(and the installed-jax API rule of ``analysis/rules/apis.py``).
"""

from __future__ import annotations

import warnings

from ..source import Source
from ..types import Finding, KernelSite, KernelTask
from .context import Rule, RuleContext, compiled_for_tpu, finding, replace, tpu_sites  # noqa: F401  (the seam)


def all_rules() -> tuple[Rule, ...]:
    from . import apis
    from . import bounds, coverage, kernel, megacore, reach, sharding, spec_reach, specs, tiling, vmem, writes

    return (*specs.RULES, *tiling.RULES, *kernel.RULES, *bounds.RULES, *reach.RULES, *vmem.RULES, *megacore.RULES,
            *writes.RULES, *spec_reach.RULES, *coverage.RULES, *sharding.RULES,
            apis.check_apis)


def run_rules(source: Source, sites: tuple[KernelSite, ...], *, target: str,
              tasks: tuple[KernelTask, ...] = (), scoped_vmem: int | None = None) -> tuple[Finding, ...]:
    """Every rule's findings, sorted by position, without duplicates."""
    ctx = RuleContext(source=source, sites=sites, tasks=tasks, target=target, scoped_vmem=scoped_vmem)
    found: dict[tuple, Finding] = {}
    for rule in all_rules():
        try:
            for item in rule(ctx):
                found.setdefault((item.code, item.span), item)
        except Exception as err:  # noqa: BLE001 - one broken rule must not silence the others
            warnings.warn(f"pallasite tier-0 rule {rule.__name__} failed ({type(err).__name__}: {err}); "
                          "its findings are skipped for this file", RuntimeWarning, stacklevel=2)
    return tuple(sorted(found.values(), key=lambda f: (f.span, f.code)))
