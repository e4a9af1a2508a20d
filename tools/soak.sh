#!/usr/bin/env bash
# A soak of `normlab serve` on 127.0.0.1 (tools/soak.py): 16 mixed clients for SECONDS
# (default 600) and at most MAX_REQUESTS requests (default 1000000); prints a JSON summary and
# exits 1 on an unexpected error, an RSS drift over 5 % after warm-up, or /metrics counters
# that disagree with the clients' counts.
#   tools/soak.sh RUN [SECONDS] [MAX_REQUESTS]
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: tools/soak.sh RUN [SECONDS] [MAX_REQUESTS]" >&2; exit 2; }
exe=${NORMLAB:-target/release/normlab}
exec python3 tools/soak.py "$exe" "$@"
