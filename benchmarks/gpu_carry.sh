#!/usr/bin/env bash
# Makes what benchmarks/gpu_session.sh needs carried to a lent GPU machine, which has Python 3.12,
# PyTorch and much else, and no network: .whl/ (this project's dependencies as wheels for that
# Python, less what its image has) and .official/ (the official SAM 2 and EdgeTAM code, with the
# few pure-Python packages they need that the image lacks). Both are ignored by git (the command
# adds them to .git/info/exclude) and together stay under the 64 MiB a call may carry.
#
#   bash benchmarks/gpu_carry.sh      # then: run `bash benchmarks/gpu_session.sh check`
#                                     #       carrying .whl and .official
set -eu
cd "$(dirname "$0")/.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >>.git/info/exclude
grep -qx '/.official/' .git/info/exclude || echo '/.official/' >>.git/info/exclude
pip=(python3 -m pip --quiet)
target=(--only-binary=:all: --python-version 3.12 --implementation cp)
for platform in manylinux_2_34 manylinux_2_31 manylinux_2_28 manylinux_2_27 manylinux_2_24 \
    manylinux_2_17 manylinux2014 manylinux1; do
    target+=(--platform "${platform}_x86_64")
done
downloads=$(mktemp -d)
trap 'rm -rf "$downloads"' EXIT

# promise (graphene-django's) comes as sources only: a pure-Python wheel is built here
"${pip[@]}" wheel --no-deps -w "$downloads" promise==2.3
# the runtime's and the tests' pins that the image lacks, with what they need
grep -hvE '^(#|-r|torch|numpy|opencv|scikit-image|pillow|markdown|requests|aiohttp|ruff|playwright|hypothesis|py-spy|pytest-xdist|psycopg)' \
    requirements.txt requirements-dev.txt | grep . >"$downloads/requirements.txt"
"${pip[@]}" download "${target[@]}" --find-links "$downloads" -d "$downloads" \
    -r "$downloads/requirements.txt"
rm -rf .whl && mkdir .whl
for wheel in "$downloads"/*.whl; do
    case $(basename "$wheel") in  # in the image already (device/KINDS.md's list), or unused
    numpy-* | attrs-* | pygments-* | python_dateutil-* | six-* | typing_extensions-* | idna-* | \
        msgpack-*) ;;
    websockets-*) ;;  # only the channel admin's tests use it
    *) cp "$wheel" .whl/ ;;
    esac
done

rm -rf .official && mkdir -p .official/deps
"${pip[@]}" download --no-deps -d "$downloads/official" sam2==1.1.0 edgetam-dimos==1.0.1
tar xzf "$downloads"/official/sam2-1.1.0.tar.gz -C .official
rm -rf .official/sam2-1.1.0/training
python3 -m zipfile -e "$downloads"/official/edgetam_dimos-1.0.1-py3-none-any.whl .official/edgetam
"${pip[@]}" install --no-deps --no-compile --target .official/deps hydra-core==1.3.8 \
    omegaconf==2.3.0 antlr4-python3-runtime==4.9.3 iopath==0.1.10
rm -rf .official/deps/bin
du -sh .whl .official
