#!/usr/bin/env bash
# Brings Ray to the GPU machine of the device tool (no network there; its Python is 3.12 and has
# Ray's other needs: pandas, pyarrow, aiohttp, ...). Ray's wheel (about 76 MiB) is over what one
# call may carry (64 MiB), so it is cut in two halves, carried by two calls of one warm machine:
#
#   here, once:   bash bench/ray_gpu_wheels.sh   (writes .raywheel/1 and .raywheel/2, git-ignored)
#                 mkdir -p .device && cp -r ../shared/device/* .device/   (see shared/device)
#   call 1:       carry [".raywheel/1"], kind nvidia-h200-x2:
#                 mkdir -p /tmp/raywheel && cp .raywheel/1/* /tmp/raywheel/
#   call 2:       carry [".device", ".raywheel/2"], kind nvidia-h200-x2:
#                 bash bench/ray_gpu_wheels.sh --install && bash .device/setup.sh &&
#                 PYTHONPATH=. PYTHONUNBUFFERED=1 python3 bench/ray_scaling.py --gpu --rows 65536
#
# (The second call must find the machine still warm: /tmp/raywheel is gone on a fresh one.)
set -euo pipefail
cd "$(dirname "$0")/.."
RAY_VERSION=${RAY_VERSION:-2.60.0}

if [ "${1:-}" = "--install" ]; then
    cp .raywheel/2/* /tmp/raywheel/
    wheel=/tmp/raywheel/ray-$RAY_VERSION-cp312-cp312-manylinux2014_x86_64.whl
    cat /tmp/raywheel/ray.whl.part-* > "$wheel"
    (cd /tmp/raywheel && sha256sum -c ray.whl.sha256)
    python3 -m pip install -q --no-index --no-deps --no-compile "$wheel"
    python3 -c "import ray, ray.data; print('ray', ray.__version__)"
    exit 0
fi

rm -rf .raywheel && mkdir -p .raywheel/download .raywheel/1 .raywheel/2
echo '*' > .raywheel/.gitignore     # git ignores the folder, so only a carry takes it along
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux2014_x86_64 -d .raywheel/download "ray==$RAY_VERSION"
wheel=$(ls .raywheel/download/ray-*.whl)
(cd .raywheel/download && sha256sum "$(basename "$wheel")" \
    | sed "s/ .*/  ray-$RAY_VERSION-cp312-cp312-manylinux2014_x86_64.whl/" > ../1/ray.whl.sha256)
split -b 40M -d "$wheel" .raywheel/download/ray.whl.part-
mv .raywheel/download/ray.whl.part-00 .raywheel/1/
mv .raywheel/download/ray.whl.part-01 .raywheel/2/
if [ -e .raywheel/download/ray.whl.part-02 ]; then
    echo "ray's wheel is over 80 MiB: cut it in three" >&2
    exit 1
fi
rm -rf .raywheel/download
du -sh .raywheel/1 .raywheel/2
