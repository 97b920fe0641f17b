#!/usr/bin/env bash
# Installs the given Debian packages when any is missing (idempotent, quiet, non-interactive).
#   install-deps.sh PKG... [--optional PKG...]
# Packages after --optional are installed only where the distribution has them (apt-cache shows a
# candidate after apt-get update); a missing one is a line, not an error.
set -euo pipefail
missing=()
maybe=()
optional=false
for p in "$@"; do
  if [ "$p" = --optional ]; then optional=true; continue; fi
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" && continue
  if $optional; then maybe+=("$p"); else missing+=("$p"); fi
done
[ ${#missing[@]} -eq 0 ] && [ ${#maybe[@]} -eq 0 ] && exit 0
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
# only optional packages missing: a failed update (no network) leaves them out, it is no error
$SUDO apt-get update -qq >/dev/null || [ ${#missing[@]} -eq 0 ]
for p in ${maybe[@]+"${maybe[@]}"}; do
  if apt-cache policy "$p" 2>/dev/null | grep -q 'Candidate: [0-9]'; then missing+=("$p")
  else echo "install-deps.sh: optional package $p is not available here: skipped"; fi
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing: ${missing[*]}"
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
