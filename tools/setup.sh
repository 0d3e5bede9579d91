#!/usr/bin/env bash
# Installs the Debian 12 packages that building and testing memonger need, and only the missing
# ones. Works as root; uses sudo otherwise. CUDA is optional and never installed here: the build
# uses it when a CUDA compiler is present (also looked for at /usr/local/cuda/bin/nvcc).
#
#   tools/setup.sh            build + test dependencies
#   tools/setup.sh --browser  also Chromium (for the HTML rendering test)
set -euo pipefail

packages=(
  build-essential cmake pkg-config python3
  libprotobuf-dev protobuf-compiler
  libabsl-dev
  nlohmann-json3-dev
  libcli11-dev
  libgtest-dev libgmock-dev
  libbenchmark-dev
  libonnx-dev libonnx-testdata zlib1g-dev
  clang libclang-rt-14-dev llvm lld
  # The model zoo test (tests/zoo/): PyTorch exports real models; Debian's /usr/bin/python3.
  python3-torch python3-torchvision python3-onnx python3-numpy
  # The Python package (python/): pybind11 against Debian's interpreter, tested with pytest.
  pybind11-dev python3-dev python3-pytest
)
if [[ "${1:-}" == "--browser" ]]; then
  packages+=(chromium)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi

sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then
  sudo_cmd=(sudo)
fi
echo "setup: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
