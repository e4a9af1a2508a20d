#!/bin/sh
# Sets up the LLVM that `cargo build --features cuda` links, offline, from Debian's LLVM 22.
#
# burn's CUDA runtime (cubecl-cuda) depends on cubecl-llvm, whose build script downloads
# tracel's LLVM 23 bundle from GitHub into `$XDG_DATA_HOME/tracel/tracel-llvm-23.1.0-4` (or
# `~/.local/share/...`) unless that directory already holds the sentinel file
# `.tracel-llvm-installed`. With internet access nothing here is needed. Without it, this
# script installs Debian's LLVM 22 (run as root, or with the packages already installed) and
# makes that directory point at it:
#   lib, include, share -> /usr/lib/llvm-22/...
#   bin/llvm-config     -> a wrapper around Debian's llvm-config that gives system libraries
#                          as `-l` flags (the bundler would turn `/usr/lib/.../libz3.so` into
#                          `-llibz3`, which does not link)
# Usage: tools/cuda-llvm.sh && cargo build --release --features cuda
set -eu

version=23.1.0-4
llvm=/usr/lib/llvm-22
dir="${XDG_DATA_HOME:-$HOME/.local/share}/tracel/tracel-llvm-$version"

if [ ! -x "$llvm/bin/llvm-config" ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "error: $llvm/bin/llvm-config is missing: run this script as root, or first" \
            "apt-get install llvm-22-dev libpolly-22-dev libz3-dev libzstd-dev libxml2-dev" >&2
        exit 2
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        llvm-22-dev libpolly-22-dev libz3-dev libzstd-dev libxml2-dev >/dev/null
fi

if [ -e "$dir" ] && [ ! -e "$dir/.normlab-debian-llvm" ]; then
    if [ -e "$dir/.tracel-llvm-installed" ]; then
        echo "tracel's LLVM bundle is already installed in $dir: nothing to do"
        exit 0
    fi
    echo "error: $dir exists and was not made by this script: remove it and run again" >&2
    exit 2
fi

mkdir -p "$dir/bin"
for sub in lib include share; do
    ln -sfn "$llvm/$sub" "$dir/$sub"
done
cat >"$dir/bin/llvm-config" <<WRAP
#!/bin/sh
# Debian's llvm-config, with system libraries given as paths rewritten into -l flags.
$llvm/bin/llvm-config "\$@" | awk '{ for (i = 1; i <= NF; i++) if (\$i ~ /^\/.*\/lib[^\/]+\.(so|a)\$/) { sub(/^.*\/lib/, "-l", \$i); sub(/\.(so|a)\$/, "", \$i) } print }'
WRAP
chmod +x "$dir/bin/llvm-config"
touch "$dir/.normlab-debian-llvm" "$dir/.tracel-llvm-installed"
echo "LLVM for the cuda feature: $dir -> $llvm ($("$dir/bin/llvm-config" --version))"
