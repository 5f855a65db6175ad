#!/usr/bin/env bash
# The Kubernetes manifests of deploy/k8s run by a real engine: Debian's podman (`podman
# kube play`), as root. CI runs it in the `container` stage of scripts/run-tests.sh,
# after docker/smoke.sh built the image; by hand: tests/deploy/kube_test.sh.
#
#   1. renders the kustomize base (`kubectl kustomize` where kubectl is installed, else the
#      resources kustomization.yaml lists, which need none of its transforms) and gives
#      podman what it plays: the Deployment, with the ConfigMap through --configmap. The
#      Service, PodDisruptionBudget and HorizontalPodAutoscaler are not kinds podman 4.3
#      plays. podman publishes each pod's containerPort on the host's same port, so of
#      three replicas only one could start: the Deployment is played without its `ports`,
#      and the pods are reached at their own addresses, as a Service reaches them;
#   2. checks the three pods: running as uid 65534 with no capability and a read-only
#      root, 1 P (the CPU limit of 1), the GORO_* settings of the ConfigMap in their
#      environment, healthy (podman runs the liveness probe as the container's
#      healthcheck), /healthz, /readyz and /plaintext answering at their addresses;
#   3. stops them as the kubelet does (SIGTERM, up to terminationGracePeriodSeconds:
#      `podman stop -t 30` of the app container, then its pod; podman 4.3's `kube down`
#      would SIGKILL them at once):
#      while they drain, /readyz answers 503 and /plaintext still 200; each exits 0
#      after the drain, having answered every request it took; `podman kube down` then
#      removes them;
#   4. GORO_MAXPROCS from the container's CPU limit: `podman run --cpus 0.5` starts on
#      1 P, `--cpus 1.5` on 2 (where the host has 2 CPUs or more), `--cpuset-cpus 0` on
#      1, and GORO_MAXPROCS=3 wins over the limit.
# Exit status 0 = pass; the last line says PASSED or FAILED.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
export CONTAINERS_CONF=$root/docker/containers.conf
export PATH=$PATH:/usr/sbin:/sbin
image=localhost/goro-demo:latest
py=/usr/bin/python3
start=$SECONDS

for tool in podman runc catatonit curl; do
  if ! command -v "$tool" >/dev/null 2>&1 && [ ! -x "/usr/libexec/podman/$tool" ]; then
    echo "kube: installing the test group of scripts/deps.sh ($tool is missing)"
    bash "$root/scripts/deps.sh" test
    break
  fi
done
# Cached layers when docker/smoke.sh built the image from the same tree (CI's container
# stage); GORO_KUBE_IMAGE_BUILT=1 uses the image as it is.
if [ "${GORO_KUBE_IMAGE_BUILT:-0}" != 1 ]; then
  GORO_IMAGE=$image "$root/docker/build-image.sh" >"${TMPDIR:-/tmp}/goro-kube-build.log" 2>&1 || {
    tail -n 30 "${TMPDIR:-/tmp}/goro-kube-build.log"
    echo "kube: FAILED: the image did not build"
    exit 1
  }
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/goro-kube.XXXXXX")
played=""
cleanup() {
  [ -n "$played" ] && podman kube down "$tmp/deployment.yaml" >/dev/null 2>&1
  for c in $(podman ps -aq --filter label=goro-kube-test=1 2>/dev/null); do podman rm -f "$c" >/dev/null 2>&1; done
  rm -rf "$tmp"
}
trap cleanup EXIT
# A command that fails outside a check ends the script under set -e: say where.
trap 'echo "kube: FAILED: line $LINENO: $BASH_COMMAND exited $?" >&2' ERR

fail=0
failed() {
  echo "kube: FAILED: $*" >&2
  fail=1
}

# ---- 1. the manifests, as podman takes them --------------------------------------
if command -v kubectl >/dev/null 2>&1; then
  echo "== kubectl kustomize deploy/k8s"
  kubectl kustomize "$root/deploy/k8s" >"$tmp/all.yaml"
else
  echo "== deploy/k8s: the resources of kustomization.yaml (no kubectl here)"
  $py - "$root/deploy/k8s" >"$tmp/all.yaml" <<'EOF'
import os, re, sys
base = sys.argv[1]
text = open(os.path.join(base, "kustomization.yaml")).read()
block = re.search(r"^resources:\n((?:  - .*\n)+)", text, re.M).group(1)
files = re.findall(r"^  - (\S+)", block, re.M)
print("\n---\n".join(open(os.path.join(base, f)).read().strip() for f in files))
EOF
fi
$py - "$tmp" <<'EOF'
import re, sys
tmp = sys.argv[1]
docs = [d for d in open(f"{tmp}/all.yaml").read().split("\n---\n") if d.strip()]
kinds = []
for d in docs:
    kind = re.search(r"^kind: (\S+)", d, re.M).group(1)
    kinds.append(kind)
    if kind == "ConfigMap":
        open(f"{tmp}/configmap.yaml", "w").write(d + "\n")
    elif kind == "Deployment":
        # Without the container's ports (see the top of this file).
        d = re.sub(r"\n( +)ports:\n(?:\1[ -].*\n)+", "\n", d + "\n")
        open(f"{tmp}/deployment.yaml", "w").write(d)
print("kinds:", " ".join(kinds), "| podman plays: Deployment, ConfigMap")
EOF
grep -q "replicas: 3" "$tmp/deployment.yaml" || failed "the Deployment does not ask for 3 replicas"
grep -q "containerPort" "$tmp/deployment.yaml" && failed "the ports were not taken out"

# ---- 2. the pods ---------------------------------------------------------------------
echo "== podman kube play --configmap configmap.yaml deployment.yaml"
podman kube play --configmap "$tmp/configmap.yaml" "$tmp/deployment.yaml"
played=1
mapfile -t pods < <(podman pod ps --filter name=goro-demo-pod --format '{{.Name}}' | sort)
echo "pods: ${pods[*]}"
[ "${#pods[@]}" = 3 ] || failed "${#pods[@]} pods, not the Deployment's 3 replicas"

declare -A ip
for pod in "${pods[@]}"; do
  c=$pod-goro-demo
  podman logs -f "$c" >"$tmp/$c.log" 2>&1 &
  infra=$(podman pod inspect "$pod" --format '{{.InfraContainerID}}')
  ip[$pod]=$(podman inspect "$infra" --format '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}')
  healthy=""
  for _ in $(seq 1 60); do
    if podman healthcheck run "$c" >/dev/null 2>&1; then
      healthy=1
      break
    fi
    sleep 0.25
  done
  [ -n "$healthy" ] || failed "$c never became healthy: $(podman inspect "$c" --format '{{json .State.Health}}' 2>&1 | head -c 400)"
  health=$(podman inspect "$c" --format '{{.State.Health.Status}}')
  uid=$(podman exec "$c" id -u)
  caps=$(podman exec "$c" grep CapEff /proc/1/status | awk '{print $2}')
  if podman exec "$c" touch /rootfs-is-writable 2>/dev/null; then ro=no; else ro=yes; fi
  env=$(podman exec "$c" env | grep -E '^GORO_(DRAIN_DELAY|SHUTDOWN_TIMEOUT)=' | sort | tr '\n' ' ')
  startup=$(head -n 1 "$tmp/$c.log")
  echo "$c: ${ip[$pod]}, $health, uid $uid, CapEff $caps, read-only root $ro, ${env}| $startup"
  [ "$health" = healthy ] || failed "$c health status '$health'"
  [ "$uid" = 65534 ] || failed "$c runs as uid $uid"
  [ "$caps" = 0000000000000000 ] || failed "$c keeps capabilities $caps"
  [ "$ro" = yes ] || failed "$c has a writable root filesystem"
  [ "$env" = "GORO_DRAIN_DELAY=5s GORO_SHUTDOWN_TIMEOUT=10s " ] || failed "$c environment: $env"
  [[ "$startup" == *" on 1 Ps "* ]] || failed "$c: not 1 P under a CPU limit of 1: $startup"
  for path in /healthz /readyz /plaintext; do
    out=$(curl -sS --max-time 5 -w ' %{http_code}' "http://${ip[$pod]}:8080$path" 2>&1) ||
      failed "$c: GET $path: $out"
    case "$path" in
      /plaintext) [ "$out" = "Hello, World! 200" ] || failed "$c: GET $path: $out" ;;
      *) [ "$out" = "ok
 200" ] || failed "$c: GET $path: $out" ;;
    esac
  done
done

# ---- 3. stopped as the kubelet stops them --------------------------------------------
echo "== podman stop -t 30 (SIGTERM, terminationGracePeriodSeconds), pod stop, then kube down"
stop_start=$(date +%s%N)
# All at once, as the kubelets of a rollout would, and in the kubelet's order: the app
# container first, up to its grace period, then the pod's sandbox. podman 4.3's `pod stop`
# stops every container of the pod at once, the infra container too, whose end takes the
# pod's address away while goro-demo still drains. podman's own status is not the test
# (without systemd it complains about healthcheck timers): the exit codes below are.
stoppers=()
for pod in "${pods[@]}"; do
  { podman stop -t 30 "$pod-goro-demo" >/dev/null 2>&1 || true
    podman pod stop -t 30 "$pod" >/dev/null 2>&1 || true; } &
  stoppers+=($!)
done
probe=${pods[0]}
draining="" served="" answer=""
for _ in $(seq 1 40); do
  code=$(curl -s -o /dev/null --max-time 2 -w '%{http_code}' "http://${ip[$probe]}:8080/readyz" || true)
  if [ "$code" = 503 ]; then
    draining=1
    answer=$(curl -sS --max-time 2 -w ' %{http_code}' "http://${ip[$probe]}:8080/plaintext" 2>&1 || true)
    [ "$answer" = "Hello, World! 200" ] && served=1
    break
  fi
  sleep 0.1
done
wait "${stoppers[@]}"
stop_ms=$((($(date +%s%N) - stop_start) / 1000000))
[ -n "$draining" ] || failed "/readyz never answered 503 while the pods stopped"
[ -n "$served" ] || failed "/plaintext was not served while draining: $answer"
# The containers stay until kube down: their state says how each one ended (podman's
# event log may lag or drop a "died" event).
exits="" exited_0=0
for pod in "${pods[@]}"; do
  c=$pod-goro-demo
  state=$(podman inspect "$c" --format '{{.State.Status}} {{.State.ExitCode}}' 2>&1 || true)
  exits+="$c $state;"
  [ "$state" = "exited 0" ] && exited_0=$((exited_0 + 1))
done
echo "stop took ${stop_ms} ms; exits: $exits"
[ "$exited_0" = 3 ] || failed "not every pod exited 0: $exits"
[ "$stop_ms" -ge 5000 ] || failed "the pods stopped in ${stop_ms} ms, before their 5 s drain"
[ "$stop_ms" -lt 20000 ] || failed "the pods took ${stop_ms} ms to stop"
for pod in "${pods[@]}"; do
  line=$(grep -E '^goro-demo: stopped: ' "$tmp/$pod-goro-demo.log" || true)
  grep -q 'SIGTERM: draining for 5 s' "$tmp/$pod-goro-demo.log" || failed "$pod did not drain"
  [[ "$line" == *", 0 cut off" ]] || failed "$pod: '$line'"
done
podman kube down "$tmp/deployment.yaml" >/dev/null
played=""
left=$(podman pod ps --filter name=goro-demo-pod --format '{{.Name}}')
[ -z "$left" ] || failed "kube down left pods: $left"

# ---- 4. GORO_MAXPROCS from the container's CPU limit ---------------------------------
echo "== podman run --cpus / --cpuset-cpus: the Ps of the startup line"
procs_with() {
  local c
  c=$(podman run -d --label goro-kube-test=1 --network none "$@" "$image")
  for _ in $(seq 1 50); do
    line=$(podman logs "$c" 2>&1 | head -n 1)
    [ -n "$line" ] && break
    sleep 0.1
  done
  podman rm -f "$c" >/dev/null
  sed -nE 's/.* on ([0-9]+) Ps .*/\1/p' <<<"$line"
}
cpus=$(nproc)
for case in "--cpus 0.5:1" "--cpus 1.5:2" "--cpuset-cpus 0:1" "--cpus 0.5 -e GORO_MAXPROCS=3:3"; do
  args=${case%:*}
  want=${case##*:}
  [ "$want" -gt "$cpus" ] && [ "$args" = "--cpus 1.5" ] && want=$cpus
  # shellcheck disable=SC2086  # the options, one word each
  got=$(procs_with $args)
  echo "podman run $args: ${got:-?} Ps (want $want)"
  [ "$got" = "$want" ] || failed "podman run $args: ${got:-no startup line} Ps, want $want"
done

echo "== kube: $([ "$fail" = 0 ] && echo PASSED || echo FAILED) in $((SECONDS - start)) s"
exit "$fail"
