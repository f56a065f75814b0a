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
# The bundled extension against a real `pallasite serve`, with a stand-in vscode module (what the real-VS-Code
# test, tests/test_vscode_real.py, does not walk: the status bar, Select Target, Explain, Check as Script).
e2e=$(mktemp -d)
cp -r "$repo/tests/data/clients/project" "$e2e/project"
node test/e2e/run-e2e.js server "$PALLASITE_PYTHON" "$e2e/project" "$e2e/project/add_bad_tiling.py" | grep -q '^RESULT '
# The trust question ("ask") answered "Trust", then Check as Script; the trust store goes to a temporary XDG folder.
XDG_CONFIG_HOME="$e2e/config" node test/e2e/run-e2e.js trust "$PALLASITE_PYTHON" "$e2e/project" "$e2e/project/running_total.py" \
  | grep '^RESULT ' | grep -q '"trustedContext":true'
rm -rf "$e2e"
ls -l dist/pallasite.vsix
