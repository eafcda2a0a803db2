#!/usr/bin/env bash
# Set up, then run a demo cluster whose data lives in ./demo-cluster (the master)
# and ./demo-node2 (a second node, joined with a one-time token: no SSH, no DNS).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

# CORRAL_DEMO_DIR puts the two roots elsewhere (the README's test does).
DEMO_DIR="${CORRAL_DEMO_DIR:-$PWD}"
export CORRAL_ROOT="$DEMO_DIR/demo-cluster"
NODE2_ROOT="$DEMO_DIR/demo-node2"
G=".venv/bin"
for root in "$CORRAL_ROOT" "$NODE2_ROOT"; do
  [[ -e $root ]] || continue
  echo "== Removing the previous demo's $root"
  for daemon in corral-rapi corral-masterd corral-noded; do
    pid_file="$root/var/run/ganeti/$daemon.pid"
    [[ -s $pid_file ]] && kill "$(cat "$pid_file")" 2>/dev/null || true
  done
  sleep 1
  rm -rf "$root"
done
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

# An OS definition (Ganeti's OS interface, API 20): the shipped demo OS writes a
# greeting into the instance's first disk.  Every node has its own copy
# (gnt-cluster verify compares them).
for root in "$CORRAL_ROOT" "$NODE2_ROOT"; do
  .venv/bin/corral-examples install-os demo --root "$root"
done
echo "== gnt-os list"; $G/gnt-os list
echo "== gnt-instance add"
$G/gnt-instance add -t file --disk 0:size=1g -o demo+default -O greeting=bonjour \
  --os-parameters-secret token=never-stored --no-name-check --no-ip-check -n node1.demo.corral \
  web1.demo.corral
$G/gnt-instance add -t diskless -o demo+minimal --no-start --no-name-check --no-ip-check \
  -n node1.demo.corral db1.demo.corral
echo "== gnt-instance list"; $G/gnt-instance list
echo "== gnt-instance info web1.demo.corral"; $G/gnt-instance info web1.demo.corral
echo "== the label the OS wrote into the disk:"
head -c 64 "$CORRAL_ROOT"/srv/ganeti/file-storage/web1.demo.corral/*.disk0 | tr -d '\0'; echo
# The remote API (Ganeti's RAPI v2) on https://127.0.0.1:5080, with a write user.
echo "demo {cleartext}demo-password write" > "$CORRAL_ROOT/var/lib/ganeti/rapi/users"
RAPI="https://127.0.0.1:5080"
rapi() { .venv/bin/python -c '
import json, sys
from corral.rapi.client import RapiClient
c = RapiClient("127.0.0.1", username="demo", password="demo-password", ca_file=sys.argv[1])
print(json.dumps(eval(sys.argv[2]), indent=1)[:600])' "$CORRAL_ROOT/var/lib/ganeti/rapi.pem" "$1"; }
echo "== RAPI: GET /2/instances (corral.rapi.client)"; rapi 'c.get_instances()'
echo "== RAPI: PUT /2/instances/db1.demo.corral/startup, then wait for the job"
rapi 'c.wait_for_job(c.startup_instance("db1.demo.corral"))["status"]'
echo "== RAPI: GET /2/instances/db1.demo.corral: status"; rapi 'c.get_instance("db1.demo.corral")["status"]'
echo "== A second node joins: a one-time token from the master, given to the new node's noded"
# On standard input ("--join-token -"): a token on the command line would show in ps.
$G/gnt-node join-token |
    CORRAL_ROOT="$NODE2_ROOT" $G/corral-noded -b 127.0.0.2 -p "${CORRAL_DEMO_PORT:-18811}" --join-token -
$G/gnt-node add --node-ip 127.0.0.2 node2.demo.corral
echo "== gnt-node list"; $G/gnt-node list
echo "== gnt-instance failover db1 (the fake hypervisor hands it over)"; $G/gnt-instance failover -f db1.demo.corral
echo "== gnt-instance move web1 (its 1 GiB disk streamed from noded to noded over TLS)"
$G/gnt-instance move -f -n node2.demo.corral web1.demo.corral
echo "== gnt-instance list"; $G/gnt-instance list
echo "== gnt-cluster verify"; $G/gnt-cluster verify

cat <<TXT

The demo cluster is still running.  Its dashboard is at $RAPI/ui/ (user demo,
password demo-password; the certificate is $CORRAL_ROOT/var/lib/ganeti/rapi.pem).
The remote API answers curl too:
  curl --cacert $CORRAL_ROOT/var/lib/ganeti/rapi.pem $RAPI/2/info
Try:
  export CORRAL_ROOT=$CORRAL_ROOT
  $G/gnt-job info 1
  $G/gnt-cluster info
  $G/gnt-instance migrate -f -n node1.demo.corral db1.demo.corral
  $G/python -m corral.testbed up --nodes 5 --root /tmp/bed   # 5 nodes; down --root /tmp/bed
  $G/gnt-instance remove -f web1.demo.corral; $G/gnt-instance remove -f db1.demo.corral
  $G/gnt-node remove node2.demo.corral   # node2 waits to join again
  $G/gnt-cluster destroy --yes-do-it     # stops the daemons and removes the cluster
TXT
