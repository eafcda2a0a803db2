#!/usr/bin/env bash
# Set up, then run a single-node demo cluster whose data lives in ./demo-cluster.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

export CORRAL_ROOT="$PWD/demo-cluster"
G=".venv/bin"
PY=".venv/bin/python"
if [[ -e $CORRAL_ROOT/var/lib/ganeti/config.db ]]; then
  echo "== Destroying the previous demo cluster"
  $PY -m corral.cli.gnt_cluster destroy --yes-do-it || true
fi
mkdir -p "$CORRAL_ROOT"
# A cluster-init hook, to show that hooks run (see demo-cluster/var/log/ganeti/hooks-demo.log).
mkdir -p "$CORRAL_ROOT/etc/ganeti/hooks/cluster-init-post.d"
cat > "$CORRAL_ROOT/etc/ganeti/hooks/cluster-init-post.d/50demo" <<HOOK
#!/bin/sh
env | grep ^GANETI_ | sort > "$CORRAL_ROOT/var/log/ganeti/hooks-demo.log"
HOOK
chmod +x "$CORRAL_ROOT/etc/ganeti/hooks/cluster-init-post.d/50demo"

echo "== gnt-cluster init (node 127.0.0.1, noded port ${CORRAL_DEMO_PORT:-18811})"
$G/gnt-cluster init --node-name node1.demo.corral --node-ip 127.0.0.1 \
  --noded-port "${CORRAL_DEMO_PORT:-18811}" cluster.demo.corral
echo "== The cluster-init hook saw:"; cat "$CORRAL_ROOT/var/log/ganeti/hooks-demo.log"
echo "== gnt-cluster version"; $G/gnt-cluster version
echo "== Submitting jobs"
$G/gnt-debug delay --submit 2
$G/gnt-debug delay --submit --priority high 1
$G/gnt-cluster add-tags --submit demo production
sleep 0.2
echo "== gnt-debug locks"; $G/gnt-debug locks
echo "== gnt-job list"; $G/gnt-job list
echo "== gnt-job watch 2"; $G/gnt-job watch 2
echo "== gnt-cluster verify"; $G/gnt-cluster verify
echo "== gnt-job list (final)"; $G/gnt-job list
echo "== gnt-cluster list-tags"; $G/gnt-cluster list-tags
cat <<TXT

The demo cluster is still running.  Try:
  export CORRAL_ROOT=$CORRAL_ROOT
  $G/gnt-job info 1
  $G/gnt-cluster info
  $G/gnt-cluster destroy --yes-do-it     # stops the daemons and removes the cluster
TXT
