#!/usr/bin/env bash
# Installs the real MCP server peers used by the agentd-tests crate
# (tests/src/peers.rs) from the package registries:
#
#   <dir>/venv/        python venv: mcp 2.3.0 + uvicorn, standardwebhooks   (pins: tests/peers/requirements.txt)
#   <dir>/everything/  npm prefix:  @modelcontextprotocol/server-everything 2026.8.31
#                                   (pins: tests/peers/everything/package{,-lock}.json)
#   <dir>/node22/      npm prefix:  node 22.23.3, the npm registry's node binary package
#                                   (pins: tests/peers/node22/package{,-lock}.json)
#   <dir>/conformance/ npm prefix:  @modelcontextprotocol/conformance 0.1.16
#                                   (pins: tests/peers/conformance/package{,-lock}.json)
#   <dir>/conformance-alpha/        @modelcontextprotocol/conformance 0.2.0-alpha.12
#                                   (pins: tests/peers/conformance-alpha/package{,-lock}.json)
#
# The conformance suite needs node >= 22 (tests/tests/conformance.rs runs it with <dir>/node22);
# npm itself runs on the node found on PATH.
#
# The lock files hold no registry URLs ("resolved"): npm fetches from whatever registry it is
# configured with and checks the pinned integrity. To regenerate one after changing a pin:
#   (cd tests/peers/<name> && npm install --package-lock-only --ignore-scripts \
#        --omit-lockfile-registry-resolved)
#
# Usage: tests/peers/install.sh [DIR]     DIR defaults to <repo>/target/peers
#
# Idempotent: each part writes a stamp (a copy of its pin files) when it is
# complete and is skipped while the stamp matches the pins; a missing or
# different stamp (a failed or older install) makes that part start over.
# Needs python3 (with the venv module), node and npm on PATH.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
dir="${1:-$repo/target/peers}"

say() { printf 'peers: %s\n' "$*"; }
die() {
    printf 'peers: ERROR: %s\n' "$*" >&2
    exit 1
}

mkdir -p "$dir" || die "cannot create $dir"
dir="$(cd "$dir" && pwd)"
say "install dir: $dir"

# One install at a time per directory.
if command -v flock >/dev/null 2>&1; then
    exec 9>"$dir/.install.lock"
    flock 9
fi

stamp_name=".agentd-peer-stamp"

# ---------------------------------------------------------------- python peer
py_pins="$here/requirements.txt"
venv="$dir/venv"
py_ok() {
    cmp -s "$py_pins" "$venv/$stamp_name" &&
        "$venv/bin/python" -c 'import mcp.server.mcpserver, uvicorn, standardwebhooks' >/dev/null 2>&1
}
if py_ok; then
    say "python peer: up to date in $venv, skipping"
else
    command -v python3 >/dev/null 2>&1 || die "python3 not found on PATH"
    say "python peer: creating venv $venv with $(python3 --version 2>&1)"
    rm -rf "$venv"
    python3 -m venv "$venv" ||
        die "python3 -m venv failed (on Debian: apt-get install python3-venv)"
    say "python peer: pip install -r $py_pins"
    "$venv/bin/python" -m pip install --disable-pip-version-check --no-input --progress-bar off -r "$py_pins" ||
        die "pip install of the python peer failed (see above)"
    "$venv/bin/python" -c 'import mcp.server.mcpserver, uvicorn, standardwebhooks' ||
        die "the python peer venv was installed but does not import mcp/uvicorn/standardwebhooks"
    cp "$py_pins" "$venv/$stamp_name"
fi
say "python peer: $("$venv/bin/python" -c 'import importlib.metadata as m, sys
print(" ".join(f"{p}=={m.version(p)}" for p in ("mcp", "uvicorn")), f"(python {sys.version.split()[0]})")')"

# ------------------------------------------------------------ everything peer
ev_src="$here/everything"
ev="$dir/everything"
ev_main="$ev/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
ev_ok() {
    cat "$ev_src/package.json" "$ev_src/package-lock.json" | cmp -s - "$ev/$stamp_name" &&
        [ -f "$ev_main" ]
}
if ev_ok; then
    say "everything peer: up to date in $ev, skipping"
else
    command -v node >/dev/null 2>&1 || die "node not found on PATH"
    command -v npm >/dev/null 2>&1 || die "npm not found on PATH"
    say "everything peer: npm install into $ev (node $(node --version), npm $(npm --version))"
    rm -rf "$ev"
    mkdir -p "$ev"
    cp "$ev_src/package.json" "$ev_src/package-lock.json" "$ev/"
    (cd "$ev" && npm install --no-audit --no-fund --no-update-notifier) ||
        die "npm install of @modelcontextprotocol/server-everything failed (see above)"
    [ -f "$ev_main" ] || die "npm install finished but $ev_main is missing"
    cat "$ev_src/package.json" "$ev_src/package-lock.json" >"$ev/$stamp_name"
fi
ev_pkg="$ev/node_modules/@modelcontextprotocol/server-everything/package.json"
sdk_pkg="$ev/node_modules/@modelcontextprotocol/sdk/package.json"
say "everything peer: @modelcontextprotocol/server-everything@$(node -p "require('$ev_pkg').version")" \
    "(@modelcontextprotocol/sdk@$(node -p "require('$sdk_pkg').version"))"

# ------------------------------------------------- node 22 and the conformance suite
# npm_peer LABEL NAME CHECK: installs the pins of tests/peers/NAME into <dir>/NAME unless the
# stamp matches them and the command CHECK succeeds.
npm_peer() {
    local label="$1" src="$here/$2" dst="$dir/$2" check="$3"
    if cat "$src/package.json" "$src/package-lock.json" | cmp -s - "$dst/$stamp_name" &&
        "$check" >/dev/null 2>&1; then
        say "$label: up to date in $dst, skipping"
        return
    fi
    command -v node >/dev/null 2>&1 || die "node not found on PATH"
    command -v npm >/dev/null 2>&1 || die "npm not found on PATH"
    say "$label: npm install into $dst (node $(node --version), npm $(npm --version))"
    rm -rf "$dst"
    mkdir -p "$dst"
    cp "$src/package.json" "$src/package-lock.json" "$dst/"
    (cd "$dst" && npm install --no-audit --no-fund --no-update-notifier \
        --omit-lockfile-registry-resolved) ||
        die "npm install of the $label failed (see above)"
    "$check" >/dev/null || die "npm install finished but the $label does not work (see above)"
    cat "$src/package.json" "$src/package-lock.json" >"$dst/$stamp_name"
}

node22="$dir/node22/node_modules/node/bin/node"
node22_want="v$(sed -n 's/^ *"node": *"\([0-9.]*\)".*/\1/p' "$here/node22/package.json")"
node22_ok() {
    # The package's preinstall script fetches the binary (npm package node-<os>-<arch>).
    [ -x "$node22" ] || {
        echo "peers: $node22 is missing (did npm skip the preinstall script of package node?)" >&2
        return 1
    }
    local got
    got="$("$node22" --version)" || return 1
    [ "$got" = "$node22_want" ] || {
        echo "peers: $node22 is $got, expected $node22_want" >&2
        return 1
    }
}
npm_peer "node 22 runtime" node22 node22_ok
say "node 22 runtime: $node22 $("$node22" --version)"

cf_main() { printf '%s' "$dir/$1/node_modules/@modelcontextprotocol/conformance/dist/index.js"; }
cf_stable_ok() { [ -f "$(cf_main conformance)" ] && "$node22" "$(cf_main conformance)" --version; }
cf_alpha_ok() {
    [ -f "$(cf_main conformance-alpha)" ] && "$node22" "$(cf_main conformance-alpha)" --version
}
npm_peer "conformance suite" conformance cf_stable_ok
npm_peer "conformance suite (alpha)" conformance-alpha cf_alpha_ok
for cf in conformance conformance-alpha; do
    say "$cf: @modelcontextprotocol/conformance@$("$node22" "$(cf_main "$cf")" --version)"
done

say "done"
