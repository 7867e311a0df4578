#!/usr/bin/env bash
# The README's install command: the package with every extra, plus what the
# end-to-end tests drive. Idempotent; run from anywhere inside the repository.
#
#   1. pip: this package in editable mode with extras all + dev (into the active Python);
#   2. Debian packages, only when missing: postgresql (the tests start their own
#      throwaway cluster; Debian's default cluster is not created) and chromium
#      (driven headless by Playwright);
#   3. npm: the Node projects from their lockfiles (@ag-ui/client, playwright-core, the
#      OpenID provider the sign-in tests start (oidc-provider), and the CopilotKit example:
#      @copilotkit/react-core, @copilotkit/runtime, esbuild; @langchain/langgraph-sdk, driven
#      as Agent Chat UI and Agent Inbox drive it);
#   4. .venv-aae: a second virtual environment for the AAE bridge (aais_langgraph.aae) with
#      the real aae-protocol, which pins cryptography<46 while the dev extra's langgraph-api
#      needs >=50; tests/test_aae_bridge.py runs tests/aae_bridge inside it. Python >= 3.11.
set -euo pipefail
cd "$(dirname "$0")/.."

python -m pip install -e ".[all,dev]"

as_root=()
if [ "$(id -u)" -ne 0 ]; then as_root=(sudo); fi

have_initdb() {
    if [ -n "${AAIS_PG_BINDIR:-}" ] && [ -x "${AAIS_PG_BINDIR}/initdb" ]; then return 0; fi
    if command -v initdb >/dev/null 2>&1; then return 0; fi
    compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null
}

missing=()
have_initdb || missing+=(postgresql)
[ -x /usr/bin/chromium ] || missing+=(chromium)
command -v curl >/dev/null 2>&1 || missing+=(curl)  # docs/serving.md's test drives curl
if [ "${#missing[@]}" -gt 0 ]; then
    "${as_root[@]}" mkdir -p /etc/postgresql-common/createcluster.d
    echo "create_main_cluster = false" |
        "${as_root[@]}" tee /etc/postgresql-common/createcluster.d/aais-no-main-cluster.conf >/dev/null
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
if ! have_initdb; then
    echo "install: initdb is still missing after installing postgresql" >&2
    exit 1
fi

npm ci --prefix tests/agui_client --no-audit --no-fund
npm ci --prefix tests/demo/browser --no-audit --no-fund
npm ci --prefix tests/oidc_provider --no-audit --no-fund
npm ci --prefix examples/copilotkit --no-audit --no-fund
npm ci --prefix tests/langgraph_ui --no-audit --no-fund

if ! python -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    echo "install: the AAE bridge environment (.venv-aae) needs Python >= 3.11" \
        "(aae-protocol); found $(python -V 2>&1)" >&2
    exit 1
fi
python -m venv .venv-aae
.venv-aae/bin/python -m pip install --quiet --upgrade pip
.venv-aae/bin/python -m pip install -e ".[sqlite,server,aae]" \
    "pytest>=8" "pytest-asyncio>=0.24" "pytest-timeout>=2.3" "hypothesis>=6.100" "httpx>=0.27"
