#!/usr/bin/env bash
# Install code-server (a real VS Code served to a browser) for tests/test_vscode_real.py, offline
# apart from npm and Debian: no step downloads a prebuilt binary (code-server's own postinstall and
# @vscode/ripgrep's would). Idempotent: a finished install is left alone, so reruns take a second.
#
#   bash editor_clients/vscode/install_code_server.sh [DIR]
#
# DIR defaults to $PALLASITE_CODE_SERVER_DIR, else ~/.cache/pallasite-code-server. The binary is then
# DIR/node_modules/.bin/code-server. Needs Node 20 (code-server 4.99.4 = VS Code 1.99.3), a C++
# toolchain and the Node headers (Debian/NodeSource's nodejs ships them in /usr/include/node), and
# Debian's ripgrep; as root with apt-get it installs the Debian packages it needs.
set -euo pipefail
version=4.99.4
dir=${1:-${PALLASITE_CODE_SERVER_DIR:-$HOME/.cache/pallasite-code-server}}
stamp="$dir/.installed-$version"
export npm_config_fund=false npm_config_audit=false npm_config_update_notifier=false npm_config_progress=false

if [ -f "$stamp" ] && [ -x "$dir/node_modules/.bin/code-server" ]; then
    echo "code-server $version already installed in $dir"
    exit 0
fi

node_major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$node_major" != 20 ]; then
    echo "code-server $version needs Node 20; this is Node $(node --version)" >&2
    exit 1
fi

# Debian packages: headers the native modules build against, a compiler, and ripgrep (VS Code's
# search runs it; @vscode/ripgrep would download its own copy).
need=""
for pkg in libkrb5-dev libsecret-1-dev libxkbfile-dev build-essential ripgrep; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need="$need $pkg"
done
if [ -n "$need" ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "apt-get install$need"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $need >/dev/null
    else
        echo "missing Debian packages:$need (apt-get install them as root)" >&2
        exit 1
    fi
fi

nodedir=$(dirname "$(dirname "$(command -v node)")")
[ -f "$nodedir/include/node/node.h" ] || { echo "no Node headers in $nodedir/include/node" >&2; exit 1; }
npm_root=$(npm root -g)
gyp="$npm_root/npm/node_modules/node-gyp/bin/node-gyp.js"
[ -f "$gyp" ] || { echo "npm's node-gyp not found at $gyp" >&2; exit 1; }

mkdir -p "$dir"
cd "$dir"
t0=$SECONDS
[ -f package.json ] || echo '{"private": true}' >package.json
npm install --ignore-scripts "code-server@$version"
echo "npm install code-server: $((SECONDS - t0)) s"

# What code-server's postinstall.sh does, without the scripts of its dependencies.
cd node_modules/code-server/lib/vscode
npm install --omit=dev --ignore-scripts
for gypfile in $(find node_modules -name binding.gyp -not -path '*/test/*' | sort); do
    module=$(dirname "$gypfile")
    case "$module" in
        */@vscode/ripgrep | */windows-*) continue ;;  # a downloaded binary / Windows only
    esac
    echo "node-gyp rebuild $module"
    (cd "$module" && node "$gyp" rebuild --nodedir="$nodedir" -j 2 --loglevel=error >/dev/null)
done
mkdir -p node_modules/@vscode/ripgrep/bin
cp "$(command -v rg)" node_modules/@vscode/ripgrep/bin/rg
rm -rf node_modules.asar && ln -s node_modules node_modules.asar
(cd bin/remote-cli && rm -f code-server && ln -s code-linux.sh code-server)
(cd bin/helpers && rm -f browser.sh && ln -s browser-linux.sh browser.sh)
(cd extensions && npm install --omit=dev --ignore-scripts)
echo "vscode dependencies and native modules: $((SECONDS - t0)) s"

cd "$dir"
npm rebuild argon2
XDG_CONFIG_HOME="$dir/.config" "$dir/node_modules/.bin/code-server" --version
touch "$stamp"
echo "code-server $version installed in $dir in $((SECONDS - t0)) s"
