#!/usr/bin/env bash
# deploy/container and deploy/kubernetes, tested.
# Always (no container runtime needed): the YAML parses; every PICKET_*
# variable and --flag the Containerfile, compose.yaml and the manifests use
# is one `picketd --help` or `picket --help` lists; the probes are /healthz
# (liveness) and /readyz (readiness); picketd runs as non-root with a
# read-only root; the worker runs `picket run inventory-sync --ttl 30s --
# ./job.sh` against the Service; the runtime packages exist in Debian 12.
# With podman (and PICKET_TEST_CONTAINER not 0): build the image (base
# images from Docker Hub, or where it cannot be reached, a Debian rootfs
# made by mmdebstrap from Debian's mirror and imported), run it against a
# redis-server on a unix socket mounted in, drive a lock through it with
# curl, run its HEALTHCHECK, run the worker's job.sh under picket run in
# the image, and stop picketd with SIGTERM.
set -u
src=$PICKET_SOURCE_DIR
bin=$PICKET_BIN_DIR
. "$src/tests/harness/harness.sh"
passes=0 skips=0
ok() { echo "ok: $*"; passes=$((passes + 1)); }
skip() { echo "skip: $*"; skips=$((skips + 1)); }
cf=$src/deploy/container/Containerfile
compose=$src/deploy/container/compose.yaml
k8s=$src/deploy/kubernetes

# --- static ----------------------------------------------------------------
python3 - "$compose" "$k8s"/*.yaml > "$H_DIR/yaml.txt" 2>&1 <<'PY' || h_fail "YAML: $(cat "$H_DIR/yaml.txt")"
import sys, yaml
for path in sys.argv[1:]:
    docs = [d for d in yaml.safe_load_all(open(path)) if d]
    assert docs, path + ": no document"
    for d in docs:
        if "services" not in d:
            assert d.get("apiVersion") and d.get("kind") and d.get("metadata", {}).get("name"), path
    print(path, len(docs))
PY
ok "compose.yaml and deploy/kubernetes/*.yaml parse ($(wc -l < "$H_DIR/yaml.txt") files)"

"$bin/picketd" --help > "$H_DIR/picketd.help"
"$bin/picket" --help > "$H_DIR/picket.help"
# picket's own variables: those its --help names ($PICKET_SERVER ...)
client_vars=$(grep -oE '\$PICKET_[A-Z_]+' "$H_DIR/picket.help" | tr -d '$' | sort -u)
for f in "$cf" "$compose" "$k8s"/*.yaml; do
  for v in $(sed 's/-DPICKET_[A-Z_]*//g' "$f" | grep -oE 'PICKET_[A-Z_]+' | sort -u); do
    case $v in PICKET_LOCK | PICKET_FENCE | PICKET_LEASE | PICKET_DEADLINE_MS | PICKET_FENCE_TOKEN) continue ;; esac
    grep -q "\[$v;" "$H_DIR/picketd.help" || grep -qx "$v" <<<"$client_vars" ||
      h_fail "$f: $v is neither a picketd setting nor a picket variable"
  done
done
python3 - "$k8s"/*.yaml "$compose" > "$H_DIR/flags.txt" <<'PY' || h_fail "manifests: $(cat "$H_DIR/flags.txt")"
# the --flags of every command: picket's for `picket ...`, picketd's otherwise
import sys, yaml
def commands(d):
    if isinstance(d, dict):
        for k, v in d.items():
            if k in ("command", "args") and isinstance(v, list):
                yield v
            else:
                yield from commands(v)
    elif isinstance(d, list):
        for x in d:
            yield from commands(x)
for path in sys.argv[1:]:
    for d in yaml.safe_load_all(open(path)):
        for cmd in commands(d or {}):
            prog = "picket" if cmd and cmd[0] == "picket" else "picketd" if cmd and cmd[0] == "picketd" else None
            if prog:
                flags = [a.split("=")[0] for a in cmd[: cmd.index("--") if "--" in cmd else len(cmd)] if a.startswith("--")]
                print(prog, " ".join(flags))
PY
while read -r prog flags; do
  for fl in $flags; do
    grep -qE -- "(^|[ [])$fl( |=|$)" "$H_DIR/$prog.help" || h_fail "$fl is not a flag of $prog --help"
  done
done < "$H_DIR/flags.txt"
ok "every PICKET_* variable and --flag in the Containerfile, compose.yaml and manifests is one picketd or picket lists"

python3 - "$k8s" > "$H_DIR/k8s.txt" 2>&1 <<'PY' || h_fail "manifests: $(cat "$H_DIR/k8s.txt")"
import sys, yaml, glob
objs = [d for p in sorted(glob.glob(sys.argv[1] + "/*.yaml")) for d in yaml.safe_load_all(open(p)) if d]
by = {(o["kind"], o["metadata"]["name"]): o for o in objs}
dep = by[("Deployment", "picketd")]["spec"]["template"]["spec"]
c = dep["containers"][0]
assert c["livenessProbe"]["httpGet"]["path"] == "/healthz", "liveness is not /healthz"
assert c["readinessProbe"]["httpGet"]["path"] == "/readyz", "readiness is not /readyz"
assert c["resources"]["requests"] and c["resources"]["limits"], "no resources"
env = {e["name"]: e.get("value") for e in c["env"]}
assert env["PICKET_LISTEN"].startswith("0.0.0.0:"), env
port = int(env["PICKET_LISTEN"].rsplit(":", 1)[1])
assert c["ports"][0]["containerPort"] == port
svc = by[("Service", "picketd")]["spec"]
assert svc["selector"] == by[("Deployment", "picketd")]["spec"]["template"]["metadata"]["labels"], "Service selects no picketd"
for pod in (dep, by[("Pod", "inventory-sync")]["spec"]):
    assert pod["securityContext"]["runAsNonRoot"] is True
    for ct in pod["containers"]:
        sc = ct["securityContext"]
        assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False, ct["name"]
w = by[("Pod", "inventory-sync")]["spec"]["containers"][0]
assert w["command"][:2] == ["picket", "run"] and "inventory-sync" in w["command"], w["command"]
assert w["command"][w["command"].index("--ttl") + 1] == "30s"
assert w["command"][-2:] == ["--", "./job.sh"], w["command"]
wenv = {e["name"]: e.get("value") for e in w["env"]}
assert wenv["PICKET_SERVER"] == "http://picketd:%d" % svc["ports"][0]["port"], wenv
redis = by[("StatefulSet", "picket-redis")]
assert env["PICKET_REDIS"] == "redis://picket-redis:6379", env
print("ok")
PY
ok "probes /healthz and /readyz, non-root and read-only root, the Service selects picketd, the worker runs picket run inventory-sync --ttl 30s -- ./job.sh at http://picketd:7070"

grep -qx 'EXPOSE 7070' "$cf" || h_fail "Containerfile: no EXPOSE 7070"
grep -q 'PICKET_LISTEN=0.0.0.0:7070' "$cf" || h_fail "Containerfile: picketd does not listen on 0.0.0.0:7070"
grep -qE '^USER [1-9][0-9]*' "$cf" || h_fail "Containerfile: no numeric non-root USER"
grep -A1 '^HEALTHCHECK' "$cf" | grep -q '/healthz' || h_fail "Containerfile: HEALTHCHECK is not /healthz"
grep -q -- '-DPICKET_WERROR=ON' "$cf" || h_fail "Containerfile: not built with -DPICKET_WERROR=ON"
# the runtime stage's packages: each one Debian 12 has
runtime_pkgs=$(awk '/^FROM \$\{RUNTIME_IMAGE\}/ {on = 1} on && /apt-get install/ {grab = 1; next}
  grab { if ($0 ~ /^ *&&/) exit; gsub(/\\/, ""); print }' "$cf" | tr ' ' '\n' | grep -v '^$')
[ "$(wc -l <<<"$runtime_pkgs")" -ge 6 ] || h_fail "runtime packages not found in the Containerfile: $runtime_pkgs"
if apt-cache policy libc6 2>/dev/null | grep -q 'Candidate: [0-9]'; then
  for p in $runtime_pkgs; do
    apt-cache policy "$p" 2>/dev/null | grep -q 'Candidate: [0-9]' || h_fail "runtime package $p is not in this machine's Debian"
  done
  ok "the runtime stage's packages exist in Debian: $(echo $runtime_pkgs)"
else
  skip "apt-cache has no package lists here: the runtime packages are not looked up"
fi

# --- with podman -------------------------------------------------------------
if [ "${PICKET_TEST_CONTAINER:-1}" = 0 ]; then
  skip "PICKET_TEST_CONTAINER=0: no image built"
elif ! command -v podman >/dev/null 2>&1; then
  skip "no podman here (scripts/deps installs it): no image built or run"
else
  # A runtime setup that works here: the defaults first; on a host with
  # cgroups v1+v2 (crun refuses) or no CAP_SYS_RESOURCE (setrlimit refused),
  # runc with cgroupfs and lower rlimits.
  pm() { podman "$@" 2> >(grep -v 'CNI config\|systemd connection' >&2); }
  base_ok=
  probe_img=
  if timeout 60 podman pull -q docker.io/library/debian:bookworm-slim > /dev/null 2>&1 &&
     timeout 120 podman pull -q docker.io/library/debian:bookworm > /dev/null 2>&1; then
    build_img=docker.io/library/debian:bookworm runtime_img=docker.io/library/debian:bookworm-slim
    echo "base images from Docker Hub"
  else
    build_img=localhost/picket-test-base:bookworm runtime_img=$build_img
    if ! podman image exists "$build_img"; then
      command -v mmdebstrap >/dev/null || h_fail "Docker Hub unreachable and no mmdebstrap to make a base image"
      # no mirror given: mmdebstrap uses this machine's apt sources
      mmdebstrap --quiet --variant=minbase --include=ca-certificates bookworm "$H_DIR/base.tar" \
        > "$H_DIR/mmdebstrap.log" 2>&1 || h_fail "mmdebstrap: $(tail -5 "$H_DIR/mmdebstrap.log")"
      pm import -q "$H_DIR/base.tar" "$build_img" > /dev/null || h_fail "podman import of the Debian rootfs failed"
      rm -f "$H_DIR/base.tar"
    fi
    echo "Docker Hub unreachable: base image $build_img, a Debian 12 minbase from mmdebstrap"
  fi
  if ! pm run --rm --network none "$runtime_img" true > "$H_DIR/probe.log" 2>&1; then
    echo "podman's defaults fail here ($(grep -o 'crun: .*' "$H_DIR/probe.log" | head -1)); trying runc and cgroupfs"
    printf '[containers]\ndefault_ulimits = ["nofile=8192:8192", "nproc=4096:4096"]\n[engine]\nruntime = "runc"\ncgroup_manager = "cgroupfs"\n' \
      > "$H_DIR/containers.conf"
    export CONTAINERS_CONF=$H_DIR/containers.conf
    pm run --rm --network none "$runtime_img" true > "$H_DIR/probe.log" 2>&1 ||
      h_fail "podman cannot run a container here: $(cat "$H_DIR/probe.log")"
  fi
  img=localhost/picket-test:$$
  start=$(date +%s)
  # --network host: the build's apt-get reaches Debian's mirror without a
  # bridge (no netavark or iptables needed)
  pm build --network host --format docker -q --build-arg BUILD_IMAGE="$build_img" \
    --build-arg RUNTIME_IMAGE="$runtime_img" -f "$cf" -t "$img" "$src" > "$H_DIR/build.log" 2>&1 ||
    h_fail "podman build: $(tail -20 "$H_DIR/build.log")"
  ok "podman build of deploy/container/Containerfile ($(($(date +%s) - start)) s)"
  cleanup_ctr() { podman rm -f "picket-test-$$" > /dev/null 2>&1; podman rmi -f "$img" > /dev/null 2>&1; }
  trap 'cleanup_ctr; h_cleanup' EXIT

  [ "$(podman image inspect "$img" --format '{{.Config.User}}')" = 10001:10001 ] || h_fail "image user is not 10001"
  podman image inspect "$img" --format '{{json .Config.Healthcheck}}' | grep -q healthz || h_fail "image has no HEALTHCHECK"

  mkdir -m 777 "$H_DIR/redis"
  redis-server --port 0 --unixsocket "$H_DIR/redis/redis.sock" --unixsocketperm 777 --dir "$H_DIR" \
    --appendonly yes --save '' > "$H_DIR/redis.log" 2>&1 &
  H_PIDS="$H_PIDS $!"
  REDIS_SOCK=$H_DIR/redis/redis.sock
  for _ in $(seq 1 250); do [ "$(h_redis ping 2>/dev/null)" = PONG ] && break; sleep 0.02; done
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  url=http://127.0.0.1:$port
  # host network, so the listen address is a free loopback port; the image's
  # default (0.0.0.0:7070) was checked above
  pm run -d --name "picket-test-$$" --network host --read-only --cap-drop ALL \
    -v "$H_DIR/redis:/run/redis" -e PICKET_LISTEN=127.0.0.1:$port \
    -e PICKET_REDIS=unix:///run/redis/redis.sock "$img" > /dev/null 2>&1 || h_fail "podman run picketd failed"
  for _ in $(seq 1 250); do curl -fs "$url/readyz" > /dev/null 2>&1 && break; sleep 0.02; done
  curl -fs "$url/readyz" > /dev/null || h_fail "picketd in the container is not ready: $(podman logs "picket-test-$$" 2>&1 | tail -5)"
  pm healthcheck run "picket-test-$$" > /dev/null 2>&1 || h_fail "the image's HEALTHCHECK failed"
  grant=$(curl -fs -X POST "$url/v1/locks/ctr-test/acquire" -H 'Content-Type: application/json' -d '{"ttl_ms":30000,"owner":"ctr"}') ||
    h_fail "acquire through the container failed"
  lease=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["lease"])' <<<"$grant")
  code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$url/v1/locks/ctr-test/acquire" -H 'Content-Type: application/json' -d '{"ttl_ms":30000}')
  [ "$code" = 409 ] || h_fail "a second acquire through the container: $code, not 409"
  curl -fs -X POST "$url/v1/locks/ctr-test/release" -H 'Content-Type: application/json' -d "{\"lease\":\"$lease\"}" | grep -q '"released":true' ||
    h_fail "release through the container failed"
  ok "picketd in the image (user 10001, read-only root): HEALTHCHECK passes, acquire 200, a second 409, release"

  # the worker Pod's job, as its manifest says, in the same image
  mkdir -p "$H_DIR/job"
  python3 -c 'import sys, yaml
cm = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d["kind"] == "ConfigMap"][0]
print(cm["data"]["job.sh"], end="")' "$k8s/worker.yaml" | sed 's/sleep [0-9][0-9]*/sleep 1/' > "$H_DIR/job/job.sh"
  chmod 755 "$H_DIR/job" "$H_DIR/job/job.sh"
  out=$(podman run --rm --network host --read-only -v "$H_DIR/job:/job:ro" -w /job \
    -e PICKET_SERVER="$url" --entrypoint picket "$img" run inventory-sync --ttl 30s -- ./job.sh 2>&1) ||
    h_fail "picket run in the image: $out"
  grep -q 'holding inventory-sync with fence [0-9]' <<<"$out" || h_fail "the job did not see its lock: $out"
  [ "$(curl -fs "$url/v1/locks/inventory-sync" | python3 -c 'import json,sys; print(json.load(sys.stdin)["held"])')" = False ] ||
    h_fail "picket run did not release inventory-sync"
  ok "the worker's job.sh ran under picket run inventory-sync --ttl 30s in the image, and the lock was released"

  start=$(date +%s%N)
  podman stop -t 20 "picket-test-$$" > /dev/null 2>&1
  rc=$(podman inspect "picket-test-$$" --format '{{.State.ExitCode}}' 2>/dev/null)
  [ "$rc" = 0 ] || h_fail "picketd in the container exited $rc on SIGTERM"
  ok "podman stop: picketd exits 0 on SIGTERM ($((($(date +%s%N) - start) / 1000000)) ms)"
fi
echo "$passes passed, 0 failed, $skips skipped"
