#!/usr/bin/env bash
# Installs fabricsim's build and test dependencies from Debian packages (bookworm). Idempotent.
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config
      libsimgrid-dev libboost-graph-dev nlohmann-json3-dev doctest-dev
      libprotobuf-dev protobuf-compiler libyaml-cpp-dev libtomlplusplus-dev
      openmpi-bin libopenmpi-dev python3 python3-dev pybind11-dev python3-matplotlib)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${FABRICSIM_BROWSER_TESTS:-1}" = 1 ]; then
  for p in chromium; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
fi
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "install-deps: installing ${missing[*]}" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi
