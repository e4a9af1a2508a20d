#!/usr/bin/env bash
# Installs lavapipe, Mesa's software Vulkan device (Debian's mesa-vulkan-drivers and the
# Vulkan loader), when no lavapipe driver is installed; needs root and apt. Used by .ci/run and
# tools/wgpu-smoke.sh.
set -euo pipefail
if ! ls /usr/share/vulkan/icd.d/lvp_icd*.json >/dev/null 2>&1; then
    echo "installing mesa-vulkan-drivers (lavapipe) and libvulkan1 (Debian packages)" >&2
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        mesa-vulkan-drivers libvulkan1 >&2
fi
