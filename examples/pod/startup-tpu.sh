#!/bin/bash
# A bare TPU VM's startup script for `harness pod run`: installs the real torch_xla stack.
#
#   harness pod provision --name my-tpu --zone us-central2-b --type v4-64 \
#       --runtime-version tpu-ubuntu2204-base --startup-script examples/pod/startup-tpu.sh
#   harness pod run --tpu my-tpu --zone us-central2-b --python /opt/harness/venv/bin/python
#
# Every worker runs it as root when it boots (the startup-script metadata; a team that
# provisions with Terraform puts the same text in its node's metadata). It is idempotent:
# a reboot finds the marker and changes nothing. Its log is /var/log/harness-setup.log;
# until it has finished, `harness pod run` names every worker whose Python lacks a package.
#
# TORCH_VERSION picks the pair (torch and torch_xla are released together; 2.9.0 is the
# release the harness's shim follows). EXTRA_REQUIREMENTS names your own packages.
set -euo pipefail
TORCH_VERSION="${TORCH_VERSION:-2.9.0}"
EXTRA_REQUIREMENTS="${EXTRA_REQUIREMENTS:-}"
PREFIX=/opt/harness
VENV="$PREFIX/venv"
MARKER="$VENV/.harness-ready-torch-$TORCH_VERSION"
LIBTPU_INDEX=https://storage.googleapis.com/libtpu-releases/index.html
exec >>/var/log/harness-setup.log 2>&1
echo "harness setup: $(date -u +%FT%TZ), torch $TORCH_VERSION"

if [ -e "$MARKER" ]; then
  echo "harness setup: already done"
  exit 0
fi

# A fresh VM's automatic updates hold the dpkg lock for minutes ("Could not get lock
# /var/lib/dpkg/lock-frontend"): wait for them, up to 20 minutes.
for _ in $(seq 1 240); do
  if ! fuser /var/lib/dpkg/lock-frontend /var/lib/dpkg/lock /var/lib/apt/lists/lock \
      >/dev/null 2>&1; then
    break
  fi
  sleep 5
done

if ! python3 -m venv --help >/dev/null 2>&1 || ! python3 -c 'import ensurepip' 2>/dev/null; then
  apt-get update -y
  apt-get install -y python3-venv git
fi
mkdir -p "$PREFIX"
python3 -m venv "$VENV"

# pip's downloads fail now and then on a fresh network: try three times.
for attempt in 1 2 3; do
  if "$VENV/bin/pip" install --upgrade pip \
      && "$VENV/bin/pip" install "torch==$TORCH_VERSION" "torch_xla[tpu]==$TORCH_VERSION" \
           -f "$LIBTPU_INDEX" pyyaml pydantic numpy click rich coolname $EXTRA_REQUIREMENTS; then
    break
  fi
  if [ "$attempt" = 3 ]; then
    echo "harness setup: pip failed three times"
    exit 1
  fi
  sleep 30
done

PJRT_DEVICE=TPU "$VENV/bin/python" -c 'import torch_xla, torch_xla.runtime' \
  || { echo "harness setup: torch_xla does not import"; exit 1; }
chmod -R a+rX "$PREFIX"
touch "$MARKER"
echo "harness setup: done"
