#!/usr/bin/env bash
# Runs every benchmark, each scenario in its own process; writes bench/results/*.json and prints
# summaries. Not part of CI. Installs wrk, hey and nginx (Debian packages) when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv.sh
install_tower test
mkdir -p bench/results
for scenario in "baseline" "large" "large --burst"; do
  name=${scenario// --/-}
  echo "== scheduler: $scenario" >&2
  .venv/bin/python bench/scheduler.py $scenario > "bench/results/scheduler-$name.json"
done
echo "== scheduler: large with 5,000 nodes, every pod placed (and the same on quota alone)" >&2
.venv/bin/python bench/scheduler.py large --nodes 5000 > bench/results/scheduler-large-5000-nodes.json
.venv/bin/python bench/scheduler.py large --nodes 5000 --quota-only \
  > bench/results/scheduler-large-5000-nodes-quota-only.json
.venv/bin/python bench/summary.py bench/results/scheduler-{baseline,large,large-burst,large-5000-nodes,large-5000-nodes-quota-only}.json
echo "== scheduler: topology-aware cycles at 5,000 nodes in 4 levels, and the same without" >&2
.venv/bin/python bench/tas_cycle.py > bench/results/scheduler-tas-5000-nodes.json
cat bench/results/scheduler-tas-5000-nodes.json
echo "== scheduler: one cycle in which 30 ClusterQueues each preempt 4 workloads" >&2
.venv/bin/python bench/preemption_cycle.py > bench/results/preemption-cycle.json

echo "== simulator: load and run Kueue's baseline manifest (15,000 Jobs) against a C-loader parse" >&2
.venv/bin/python bench/sim_load.py > bench/results/sim-load-baseline.json
cat bench/results/sim-load-baseline.json

echo "== visibility API: answers at 50,000 pending Workloads, and what keeping the positions costs" >&2
.venv/bin/python bench/visibility.py > bench/results/visibility-50k.json
.venv/bin/python -c "import json; r = json.load(open('bench/results/visibility-50k.json'))
print({k: (v['p50_ms'], v['p99_ms']) for k, v in r['answers'].items()}, r['arrival_us'], r['departure_us'])"

echo "== scheduler extender: 5,000 nodes, 50,000 bound pods, filter + prioritize over loopback" >&2
.venv/bin/python bench/scheduler_extender.py > bench/results/extender-5000-nodes.json
cat bench/results/extender-5000-nodes.json

echo "== controller: a burst of 200 Jobs, 5 ms a write, at 1000 QPS and at the default 50" >&2
.venv/bin/python bench/burst.py > bench/results/burst-1000qps.json
.venv/bin/python bench/burst.py --qps 50 --burst 100 > bench/results/burst-50qps.json
echo "== controller: the same burst through an AdmissionCheck (another controller's; Kueue's ProvisioningRequest)" >&2
for check in none external provisioning; do
  .venv/bin/python bench/burst.py --runs 2 --check "$check" > "bench/results/burst-check-$check.json"
done
echo "== MultiKueue: 1,000 Jobs through a manager to three workers (four doubles, four Towers)" >&2
.venv/bin/python bench/multikueue.py > bench/results/multikueue-1000.json
cat bench/results/multikueue-1000.json
echo "== controller: Kueue's baseline through the API double at 50 QPS (about 6 minutes)" >&2
.venv/bin/python bench/controller.py > bench/results/controller-baseline.json
echo "== controller: the same with Jobs, one fifth of the size (about 4 minutes)" >&2
.venv/bin/python bench/controller.py --jobs --scale 0.2 > bench/results/controller-jobs-0.2.json
echo "== controller: the baseline with 1% of writes answered 503 and one API server restart" >&2
.venv/bin/python bench/controller.py --fail-rate 0.01 --restart-at 150 \
  > bench/results/controller-baseline-faults.json
.venv/bin/python -c "import json
for f in ('baseline', 'jobs-0.2', 'baseline-faults'):
    r = json.load(open(f'bench/results/controller-{f}.json'))
    print(f, {k: r[k] for k in ('wall_s', 'controller_writes_per_workload',
          'avg_time_to_admission_ms', 'controller_cpu_m', 'controller_peak_rss_mib')})"

echo "== controller: memory with 100,000 Jobs and their Workloads (about 3 minutes)" >&2
.venv/bin/python bench/memory.py > bench/results/controller-memory-100k.json
cat bench/results/controller-memory-100k.json

missing=()
for tool in wrk hey nginx; do command -v "$tool" >/dev/null || missing+=("$tool"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "== installing ${missing[*]} (apt-get)" >&2
  apt-get update -qq && apt-get install -y -qq "${missing[@]}" >/dev/null
fi
echo "== webhook: Tower vs bare WSGI vs nginx over TLS" >&2
.venv/bin/python bench/webhook.py > bench/results/webhook.json
.venv/bin/python -c "import json; print(json.dumps(json.load(open('bench/results/webhook.json'))['best'], indent=2))"
echo "== webhook: a pod's path against a Job's, at 500 requests/s" >&2
.venv/bin/python bench/webhook_pods.py > bench/results/webhook-pods.json
cat bench/results/webhook-pods.json
