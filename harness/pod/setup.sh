# harness pod setup, on one worker (POSIX sh: a TPU VM's /bin/sh is dash). See setup.py.
# Its plan comes in HARNESS_SETUP_* variables. Its own words go to stdout, which the
# controller writes to the worker's log; so do pip's. Its last line is
#   HARNESS-SETUP {"state": "installed"|"unchanged", "key": ..., "seconds": ...}
# or HARNESS-SETUP-FAILED <why, naming the fix>.
set -u
cd "$HOME" || exit 1
PY=$HARNESS_SETUP_PY
ROOT=$HARNESS_SETUP_ROOT
REQUIREMENTS=$HARNESS_SETUP_REQUIREMENTS
START=$(date +%s)
say() { echo "harness setup: $*"; }
fail() { echo "HARNESS-SETUP-FAILED $*"; exit 1; }
elapsed() { echo $(( $(date +%s) - START )); }
oneline() { tail -n "$1" | tr '\n' ' ' | cut -c1-400; }

command -v "$PY" >/dev/null 2>&1 \
  || fail "there is no $PY on this worker: install Python 3.10 or newer (or pass --python)"
PYV=$("$PY" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])' 2>&1) \
  || fail "$PY does not run: $(echo "$PYV" | oneline 2)"
case "$PYV" in
  3.1[0-9].*|3.[2-9][0-9].*) ;;
  *) fail "$PY is Python $PYV; the harness needs 3.10 or newer (pass --python)";;
esac
KEY="$HARNESS_SETUP_KEY-py$PYV"
VENV="$ROOT/venvs/$KEY"
mkdir -p "$ROOT/venvs" "$ROOT/setup"

# one setup at a time on a worker
if command -v flock >/dev/null 2>&1; then
  exec 9>"$ROOT/setup.lock"
  flock -w 3600 9 || fail "another setup of this worker held $ROOT/setup.lock for an hour"
fi

point() {
  ln -sfn "venvs/$KEY" "$ROOT/env.new" && mv -Tf "$ROOT/env.new" "$ROOT/env" \
    || fail "cannot point $ROOT/env at $VENV"
}
works() {
  [ -e "$VENV/.complete" ] && "$VENV/bin/python" -c "$HARNESS_SETUP_CHECK" >/dev/null 2>&1
}

if works; then
  point
  echo "HARNESS-SETUP {\"state\": \"unchanged\", \"key\": \"$KEY\", \"seconds\": $(elapsed)}"
  exit 0
fi

# A fresh VM's automatic updates hold apt's lock for minutes ("Could not get lock
# /var/lib/dpkg/lock-frontend") and may replace the Python a virtualenv is made from.
WAITED=0
while :; do
  HOLDERS=$(pgrep -x -l "$HARNESS_SETUP_APT" 2>/dev/null | tr '\n' ' ')
  [ -z "$HOLDERS" ] && break
  [ "$WAITED" -ge "$HARNESS_SETUP_LOCK_WAIT" ] \
    && fail "apt/dpkg still busy after $WAITED s ($HOLDERS): a fresh VM's automatic updates; run harness pod setup again later"
  [ $((WAITED % 30)) -eq 0 ] && say "waiting for apt/dpkg to finish ($HOLDERS)"
  sleep 1
  WAITED=$((WAITED + 1))
done

say "making $VENV with $PY (Python $PYV)"
rm -rf "$VENV"
if ! OUT=$("$PY" -m venv "$VENV" 2>&1); then
  case "$OUT" in
    *ensurepip*)
      PKG="python$(echo "$PYV" | cut -d. -f1,2)-venv"
      sudo -n true 2>/dev/null \
        || fail "$PY cannot make a virtualenv (ensurepip is missing) and sudo asks for a password: run 'sudo apt-get install -y $PKG' on it"
      say "its Python lacks ensurepip: installing $PKG with apt"
      sudo -n apt-get install -y "$PKG" \
        || { sudo -n apt-get update && sudo -n apt-get install -y "$PKG"; } \
        || fail "apt-get install $PKG failed"
      rm -rf "$VENV"
      OUT=$("$PY" -m venv "$VENV" 2>&1) \
        || fail "$PY -m venv failed: $(echo "$OUT" | oneline 3)";;
    *) fail "$PY -m venv failed: $(echo "$OUT" | oneline 3)";;
  esac
fi

TRY=1
while :; do
  say "pip install -r $REQUIREMENTS (try $TRY of $HARNESS_SETUP_TRIES)"
  if "$VENV/bin/python" -m pip install --disable-pip-version-check --no-input \
      --progress-bar off -r "$REQUIREMENTS" >"$ROOT/setup/pip.log" 2>&1; then
    cat "$ROOT/setup/pip.log"
    break
  fi
  cat "$ROOT/setup/pip.log"
  [ "$TRY" -ge "$HARNESS_SETUP_TRIES" ] \
    && fail "pip failed $TRY times; it said: $(grep -E 'ERROR|Error' "$ROOT/setup/pip.log" | oneline 2)"
  sleep $((TRY * HARNESS_SETUP_RETRY))
  TRY=$((TRY + 1))
done

CHECK=$("$VENV/bin/python" -c "$HARNESS_SETUP_CHECK" 2>&1) \
  || fail "installed, but it does not import: $(echo "$CHECK" | oneline 1)"
touch "$VENV/.complete"
point
# a worker keeps one environment: torch alone is most of a GB
for OLD in "$ROOT"/venvs/*; do
  [ "$OLD" = "$VENV" ] || rm -rf "$OLD"
done
echo "HARNESS-SETUP {\"state\": \"installed\", \"key\": \"$KEY\", \"seconds\": $(elapsed), \"waited_s\": $WAITED}"
