#!/usr/bin/env bash
# Makes `import fabricsim` work in python3 after a build: writes a fabricsim.pth naming build/python into the
# user's site-packages of every python3 on the PATH (and /usr/bin/python3), which every interpreter of that
# minor version reads. Run by scripts/setup.sh; usage: scripts/register-python.sh [BUILD_DIR].
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$(cd "${1:-build}" && pwd)/python
if ! ls "$dir"/fabricsim*.so >/dev/null 2>&1; then
  echo "register-python: no Python module in $dir (pybind11-dev or python3-dev missing at build time)" >&2
  exit 0
fi
for py in python3 /usr/bin/python3; do
  command -v "$py" >/dev/null || continue
  site=$("$py" -c 'import site; print(site.getusersitepackages())' 2>/dev/null) || continue
  mkdir -p "$site" && echo "$dir" > "$site/fabricsim.pth"
  echo "register-python: $py imports fabricsim from $dir ($site/fabricsim.pth)" >&2
done
