#!/usr/bin/env bash
# CI for the VS Code extension: exact install, type-check, unit tests, manifest vs. server
# settings, .vsix package. Run from anywhere; PALLASITE_PYTHON (default: the repository's .venv
# python, else python3) must have pallasite installed for the manifest check.
set -euo pipefail
cd "$(dirname "$0")"
repo=$(cd ../.. && pwd)
export PALLASITE_PYTHON=${PALLASITE_PYTHON:-$( [ -x "$repo/.venv/bin/python" ] && echo "$repo/.venv/bin/python" || echo python3 )}
export npm_config_fund=false npm_config_audit=false npm_config_update_notifier=false

npm ci --no-progress
npm run typecheck
npm test
npm run check-manifest
npm run package
# The bundled extension against a real `pallasite serve`, with a stand-in vscode module.
e2e=$(mktemp -d)
cp -r "$repo/tests/data/clients/project" "$e2e/project"
node test/e2e/run-e2e.js server "$PALLASITE_PYTHON" "$e2e/project" "$e2e/project/add_bad_tiling.py" | grep -q '^RESULT '
# The trust question ("ask") answered "Trust", then Check as Script; the trust store goes to a temporary XDG folder.
XDG_CONFIG_HOME="$e2e/config" node test/e2e/run-e2e.js trust "$PALLASITE_PYTHON" "$e2e/project" "$e2e/project/running_total.py" \
  | grep '^RESULT ' | grep -q '"trustedContext":true'
# Step-by-step optimize with the scripted provider: each plan / diff the server shows is approved,
# revised or stopped from the active editor, as its title bar does.
cp "$repo/tests/data/optimize/add.py" "$e2e/project/add.py"
"$PALLASITE_PYTHON" - "$repo/tests/data/optimize/candidates" >"$e2e/replies.json" <<'PY'
import json, pathlib, sys
folder = pathlib.Path(sys.argv[1])
print(json.dumps([reply for name in ("wrong_math", "big_blocks", "bad_tiling")
                  for reply in (f"Try {name}\nbecause.", "```python\n" + (folder / f"{name}.py").read_text() + "```")]))
PY
PALLASITE_E2E_REPLIES="$e2e/replies.json" XDG_CONFIG_HOME="$e2e/config" \
  node test/e2e/run-e2e.js optimize "$PALLASITE_PYTHON" "$e2e/project" "$e2e/project/add.py" \
  | grep '^RESULT ' | grep -q '"written":"[^"]*add.optimized.py"'
rm -rf "$e2e"
ls -l dist/pallasite.vsix
