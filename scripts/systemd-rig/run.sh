#!/usr/bin/env bash
# systemd-rig: run bxmem's systemd units under a real systemd, as the README says, and check
# that they work.
#
#   scripts/systemd-rig/run.sh [CHECKOUT]        (default CHECKOUT: the repository this script is in)
#
# What it does (idempotent; safe to rerun on a later bxmem):
#   1. builds a minimal Debian rootfs in $SDROOT (debootstrap) if it is missing;
#   2. boots it with systemd-nspawn -b (the host's network shared, so 127.0.0.1 reaches the
#      host's Honcho), as PID 1 of its own PID namespace;
#   3. user kyle (uid 1000, passwordless sudo) runs the README's own commands, read from the
#      README's blocks marked `<!-- systemd-rig: NAME -->` (readme_blocks.py), each in a new
#      login shell in a copy of CHECKOUT: linger, install (pipx), then bxmem init (the server's
#      URL and fresh workspaces sd-<random>-trusted/-untrusted/-fleet in place of the block's
#      example values), bxmem doctor (every line ok but the units' and brokerd's, which the
#      rig keeps down at first), bxmem units install, and doctor again once all runs; before
#      it, the rig puts a key per workspace in the folder the block's --keys names (minted
#      with $SDRIG_ADMIN_JWT on a server with auth on, else random), and after it loopd's and
#      memoryd's part: a minimal Boxmaker home's content (two loopd logs, a memoryd journal);
#   4. if the units as shipped fail, reports which directives fail on their own, and retries
#      with $SDRIG_FIX as a drop-in so the rest of the scenario can still be judged;
#   5. brokerd down, then bxmem's own stub brokerd up as kyle; checks what reaches Honcho;
#      probes each unit's sandbox; times append -> Honcho through the .path units alone and
#      through the timers alone; counts the journal lines an idle minute adds (and, side by
#      side, what the units add with LogLevelMax= lifted); takes Honcho away (a forwarder the
#      rig stops) and checks the outage's start and end reach the journal, and that bxmem doctor
#      then exits 7 naming Honcho; breaks the config and checks the error reaches it; then, one
#      at a time and undone after, checks bxmem doctor fails on a key of another workspace, an
#      altered key (auth on), a key file of mode 644, brokerd stopped, a timer disabled and a
#      clock 10 minutes ahead and behind (faketime); runs bxmem metrics through the host's
#      `promtool check metrics` (Debian's prometheus package) when it has one;
#   6. upgrades as the README says (pipx install --force ., bxmem units install) and checks the
#      new code and units are in place;
#   7. the README's system-unit variant (bxmem units uninstall, then sudo bxmem units install
#      --system: User=kyle, kyle's paths), judged the same way;
#   8. the README's uninstall steps (bxmem units uninstall --system, pipx uninstall), and checks
#      what is left;
#   9. powers the container off (the rootfs stays).
# Prints PASS/FAIL/INFO lines; exit 0 when nothing FAILed. Logs: $SDRIG_DIR/last-$SUITE/.
#
# Where the container differs from a host, and what the script does about it:
#   - no systemd/machined on this host: nspawn runs with --register=no --keep-unit, in cgroups
#     /sys/fs/cgroup/{systemd,unified}/<name> made here (removed at the end);
#   - nspawn overmounts /proc/kmsg with a FIFO: unmounted after boot (see SDRIG_KEEP_KMSG);
#   - nspawn's seccomp filter refuses bpf(): --system-call-filter=bpf, so IPAddressDeny= can work;
#   - with the host's network shared, nspawn drops CAP_NET_ADMIN: PrivateNetwork='s loopback
#     stays down (systemd 252), or PrivateNetwork= is skipped (257; then not judged);
#   - logind may not answer loginctl in the container (Debian 13): linger is then set up the
#     way loginctl would (the linger file, user@1000.service started), and said so;
#   - a host behind a TLS-inspecting proxy: its extra CA certificates are copied into the rootfs.
#
# Environment: SDRIG_SUITE (bookworm; trixie for systemd 257), SDROOT (the rootfs,
#   /var/tmp/bxmem-sdrig/rootfs-$SUITE), SDRIG_DIR (/var/tmp/bxmem-sdrig), HONCHO_URL
#   (http://127.0.0.1:8000, auth off), SDRIG_ADMIN_JWT (a file holding the admin JWT of a
#   server with auth on: the rig mints each workspace's key with it), SDRIG_PREFIX (sd: the
#   run's workspaces are PREFIX-<random>-trusted, -untrusted, -fleet), SDRIG_MIRROR (the Debian archive; default: the one apt
#   uses here), SDRIG_SYSTEM=0 skips the system units, SDRIG_KEEP=1 leaves the container up,
#   SDRIG_FIX (drop-in [Service] lines used when the shipped user units fail),
#   SDRIG_QUIET_S (60: the idle window whose journal lines are counted),
#   SDRIG_KEEP_KMSG=1 keeps nspawn's FIFO over /proc/kmsg, SDRIG_NAME (bxmem-sdrig-$SUITE: the
#   container's name and cgroups; two rigs at once need two names and two SDRIG_DIRs).
#
# Derived from the Boxmaker project's systemd kit (shared/systemd-rig/run.sh), adapted to the
# units' quiet journal (they log nothing about an ordinary run), to EPERM from the system-call
# filter, and to run the README's own blocks.
set -uo pipefail

HERE=$(dirname "$(realpath "$0")")
CHECKOUT=$(realpath "${1:-$HERE/../..}")
SUITE=${SDRIG_SUITE:-bookworm}
DIR=${SDRIG_DIR:-/var/tmp/bxmem-sdrig}
ROOT=${SDROOT:-$DIR/rootfs-$SUITE}
HONCHO=${HONCHO_URL:-http://127.0.0.1:8000}
FIX=${SDRIG_FIX:-PrivateUsers=yes}
QUIET_S=${SDRIG_QUIET_S:-60}
MIRROR=${SDRIG_MIRROR:-$(sed -n 's/^URIs: *\([^ ]*\).*/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n1)}
[ -n "$MIRROR" ] || MIRROR=$(awk '$1 == "deb" {print $2; exit}' /etc/apt/sources.list 2>/dev/null)
NAME=${SDRIG_NAME:-bxmem-sdrig-$SUITE}
OUT=$DIR/last-$SUITE
PIDFILE=$DIR/$NAME.pid
T_START=$(date +%s)
NPASS=0; NFAIL=0

[ -f "$CHECKOUT/pyproject.toml" ] && [ -d "$CHECKOUT/systemd" ] || { echo "not a bxmem checkout: $CHECKOUT"; exit 2; }
[ "$(id -u)" = 0 ] || { echo "run as root"; exit 2; }
BLOCKS="linger install init doctor units upgrade user-units-off system-units system-units-off uninstall"
ADMIN_JWT=""
if [ -n "${SDRIG_ADMIN_JWT:-}" ]; then
    ADMIN_JWT=$(cat "$SDRIG_ADMIN_JWT") || { echo "cannot read SDRIG_ADMIN_JWT=$SDRIG_ADMIN_JWT"; exit 2; }
fi
# The rig's own reads of Honcho (guest/honcho.py, guest/measure.py) use the admin JWT when auth is on.
export SDRIG_HONCHO_TOKEN=$ADMIN_JWT
for b in $BLOCKS; do
    python3 "$HERE/readme_blocks.py" "$CHECKOUT/README.md" "$b" > /dev/null || exit 2
done

mkdir -p "$OUT"; rm -f "$OUT"/*
exec > >(tee "$OUT/run.log") 2>&1
NSPAWN=""; LEADER=""

say()  { echo "$(date +%T) $*"; }
pass() { NPASS=$((NPASS + 1)); echo "PASS $*"; }
fail() { NFAIL=$((NFAIL + 1)); echo "FAIL $*"; }
info() { echo "INFO $*"; }
die()  { fail "$*"; finish; }
now()  { date +%s.%N; }

# ---------------------------------------------------------------- host tools
if ! command -v systemd-nspawn >/dev/null || ! command -v debootstrap >/dev/null; then
    say "installing systemd-container debootstrap"
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq systemd-container debootstrap >/dev/null \
        || { echo "apt-get install failed"; exit 2; }
fi

# ---------------------------------------------------------------- stop a container left by an earlier run
stop_container() {
    local pid=$1 i
    [ -n "$pid" ] && [ -d "/proc/$pid" ] || return 0
    grep -q "systemd-nspawn" "/proc/$pid/cmdline" 2>/dev/null || return 0
    [ -n "${LEADER:-}" ] && nsenter -t "$LEADER" -a -r -w -- systemctl poweroff >/dev/null 2>&1
    for i in $(seq 1 60); do [ -d "/proc/$pid" ] || return 0; sleep 0.5; done
    kill -TERM "$pid" 2>/dev/null                         # nspawn halts the container on SIGTERM
    for i in $(seq 1 40); do [ -d "/proc/$pid" ] || return 0; sleep 0.5; done
    kill -KILL "$pid" 2>/dev/null
}
if [ -f "$PIDFILE" ]; then
    old=$(cat "$PIDFILE")
    if [ -d "/proc/$old" ] && tr '\0' ' ' < "/proc/$old/cmdline" | grep -q -- "-D $ROOT "; then
        say "stopping the container of an earlier run (nspawn pid $old)"
        LEADER=$(cat "/proc/$old/task/$old/children" 2>/dev/null | awk '{print $1}') stop_container "$old"
    fi
    rm -f "$PIDFILE"
fi

# ---------------------------------------------------------------- rootfs
if [ ! -f "$ROOT/.sdrig-ready" ]; then
    say "building $ROOT (debootstrap $SUITE, about 2-3 min)"
    rm -rf "$ROOT.tmp"; mkdir -p "$(dirname "$ROOT")"
    t=$(date +%s)
    debootstrap --variant=minbase \
        --include=systemd,systemd-sysv,dbus,dbus-user-session,libpam-systemd,python3,python3-venv,python3-pip,pipx,curl,procps,ca-certificates,less,sudo,faketime \
        "$SUITE" "$ROOT.tmp" "$MIRROR" > "$OUT/debootstrap.log" 2>&1 || { echo "debootstrap failed: $OUT/debootstrap.log"; exit 2; }
    echo sdrig > "$ROOT.tmp/etc/hostname"
    printf '127.0.0.1 localhost sdrig\n::1 localhost\n' > "$ROOT.tmp/etc/hosts"
    chroot "$ROOT.tmp" useradd -m -u 1000 -s /bin/bash kyle
    chroot "$ROOT.tmp" passwd -d root >/dev/null
    echo 'kyle ALL=(ALL) NOPASSWD: ALL' > "$ROOT.tmp/etc/sudoers.d/kyle"; chmod 440 "$ROOT.tmp/etc/sudoers.d/kyle"
    mkdir -p "$ROOT.tmp/var/log/journal"      # persistent journal: `journalctl --user` works for kyle
    for u in apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer e2scrub_all.timer fstrim.timer e2scrub_reap.service; do
        ln -sf /dev/null "$ROOT.tmp/etc/systemd/system/$u"
    done
    [ -d "$ROOT" ] && rm -rf "$ROOT"
    mv "$ROOT.tmp" "$ROOT"
    touch "$ROOT/.sdrig-ready"
    info "rootfs built in $(( $(date +%s) - t )) s"
fi
# A host behind a TLS-inspecting proxy: the container needs the host's extra CA certificates too.
cp /usr/local/share/ca-certificates/*.crt "$ROOT/usr/local/share/ca-certificates/" 2>/dev/null \
    && chroot "$ROOT" update-ca-certificates >/dev/null 2>&1

# ---------------------------------------------------------------- reset kyle's state (offline)
H=$ROOT/home/kyle
rm -rf "$H/.local/share/boxmaker" "$H/.config/boxmaker" "$H/src/bxmem" "$H/.config/systemd/user" "$H/.local/state/bxmem" \
       "$H/.local/bin/bxmem" "$H/.local/pipx/venvs/bxmem" "$H/.local/share/pipx/venvs/bxmem"
rm -rf "$ROOT"/etc/systemd/system/bxmem-* "$ROOT"/etc/systemd/system/*.wants/bxmem-* "$ROOT/var/lib/bxmem"
rm -rf "$ROOT"/etc/systemd/system/sdrig-* "$ROOT"/var/lib/systemd/linger/kyle
rm -rf "$ROOT/opt/sdrig"; mkdir -p "$ROOT/opt/sdrig"
cp "$HERE"/guest/*.py "$ROOT/opt/sdrig/"
chmod 755 "$ROOT/opt/sdrig"; chmod 644 "$ROOT"/opt/sdrig/*.py
[ -n "$ADMIN_JWT" ] && printf '%s' "$ADMIN_JWT" > "$ROOT/opt/sdrig/honcho.token" && chmod 644 "$ROOT/opt/sdrig/honcho.token"

# ---------------------------------------------------------------- boot
say "booting $ROOT with systemd-nspawn"
# --register=no: no machined on this host; --keep-unit: nor a host systemd to make a scope.
# --system-call-filter=bpf: nspawn's seccomp filter refuses bpf() (EPERM) by default, and then
# the container's systemd silently applies no IPAddressDeny= at all; a host's systemd can.
for hier in systemd unified; do mkdir -p "/sys/fs/cgroup/$hier/$NAME"; done
# systemd 256+ (trixie) refuses cgroup v1: give it the unified hierarchy alone.
[ "$SUITE" = bookworm ] || export SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=1
sh -c 'for h in systemd unified; do echo $$ > /sys/fs/cgroup/$h/$1/cgroup.procs || exit 97; done
       exec systemd-nspawn -b -D "$0" -M "$1" --register=no --keep-unit --link-journal=no --console=read-only --system-call-filter=bpf' "$ROOT" "$NAME" \
    > "$OUT/console.log" 2>&1 &
NSPAWN=$!
echo "$NSPAWN" > "$PIDFILE"
finish() {
    trap - EXIT
    if [ "${SDRIG_KEEP:-0}" = 1 ]; then
        info "container left running: nspawn pid $NSPAWN, leader $LEADER (nsenter -t $LEADER -a -r -w)"
    else
        say "powering off"
        if [ -n "$NSPAWN" ]; then
            stop_container "$NSPAWN"
            [ -d "/proc/$NSPAWN" ] && fail "container did not stop (nspawn pid $NSPAWN)" || rm -f "$PIDFILE"
            for hier in systemd unified; do  # empty cgroups the container left: remove bottom-up
                find "/sys/fs/cgroup/$hier/$NAME" -depth -type d -exec rmdir {} + 2>/dev/null
            done
        fi
    fi
    echo "SUMMARY: $NPASS passed, $NFAIL failed; $(( $(date +%s) - T_START )) s; logs in $OUT"
    [ "$NFAIL" = 0 ]; exit $?
}
trap finish EXIT
trap 'exit 130' INT TERM

for i in $(seq 1 100); do
    LEADER=$(cat "/proc/$NSPAWN/task/$NSPAWN/children" 2>/dev/null | awk '{print $1}')
    [ -n "$LEADER" ] && break
    [ -d "/proc/$NSPAWN" ] || break
    sleep 0.2
done
[ -n "$LEADER" ] || die "boot: nspawn exited ($(tail -3 "$OUT/console.log" | tr '\n' ' '))"
IN() { nsenter -t "$LEADER" -a -r -w -- "$@"; }
KYLE_ENV="HOME=/home/kyle USER=kyle LOGNAME=kyle XDG_RUNTIME_DIR=/run/user/1000 DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/1000/bus LANG=C.UTF-8"
# A shell line as kyle, with what a login session gives him for systemctl --user.
U() { IN runuser -u kyle -- env -i $KYLE_ENV PATH=/home/kyle/.local/bin:/usr/local/bin:/usr/bin:/bin bash -c "cd ~ && $1"; }
# The README's block NAME, as written, as kyle in a new login shell (PATH from /etc/profile and
# ~/.profile, as a new terminal has it) in the checkout; stops at the first failing command.
# The init block's example values are the owner's to replace: the rig's server and its run's workspaces.
EXAMPLE_URL=http://honcho.example:8000
readme_block() {
    local block
    block=$(python3 "$HERE/readme_blocks.py" "$CHECKOUT/README.md" "$1") || return 1
    if [ "$1" = init ]; then
        case "$block" in *"$EXAMPLE_URL"*"--agent boxmaker0"*) ;;
            *) echo "the README's init block no longer names $EXAMPLE_URL and --agent boxmaker0: update the rig" >&2; return 1;; esac
        block=${block//$EXAMPLE_URL/$HONCHO}
        block=${block//--agent boxmaker0/--agent boxmaker0 --trusted $RUN-trusted --untrusted $RUN-untrusted --fleet $RUN-fleet}
    fi
    printf '%s\n' "$block"
}
readme() {
    local name=$1 block rc
    block=$(readme_block "$name") || return 1
    printf '%s\n' "$block" > "$OUT/readme-$name.sh"
    IN runuser -u kyle -- env -i $KYLE_ENV PATH=/usr/local/bin:/usr/bin:/bin bash -l -c "set -eo pipefail; cd ~/src/bxmem; $block" \
        > "$OUT/readme-$name.log" 2>&1
    rc=$?
    return $rc
}
readme_step() {  # readme_step NAME WHAT: run the block; PASS or FAIL naming it
    local t rc; t=$(date +%s)
    readme "$1"; rc=$?
    if [ $rc = 0 ]; then pass "README '$1' block as kyle ($(( $(date +%s) - t )) s): $2"
    else fail "README '$1' block as kyle exits $rc: $(tail -3 "$OUT/readme-$1.log" | tr '\n' ' ')"; fi
    return $rc
}
for i in $(seq 1 150); do IN test -S /run/systemd/private && break; sleep 0.2; done
state=$(IN timeout 90 systemctl is-system-running --wait 2>&1)
case "$state" in running) pass "boot: systemd $(IN systemctl --version | head -1 | awk '{print $2}') is running in the container";;
    *) fail "boot: system state '$state' ($(IN systemctl --failed --no-legend | tr '\n' ' '))";; esac
SYSTEMD_VERSION=$(IN systemctl --version | head -1 | awk '{print $2}')
if [ "$(IN stat -fc %T /sys/fs/cgroup)" = cgroup2fs ]; then info "cgroups: unified (cgroup2 at /sys/fs/cgroup) in the container"
else info "cgroups: hybrid in the container, as the host (tmpfs /sys/fs/cgroup, v1 controllers, cgroup2 at /sys/fs/cgroup/unified)"; fi
if [ "${SDRIG_KEEP_KMSG:-0}" != 1 ] && IN umount /proc/kmsg 2>/dev/null; then
    info "container: removed nspawn's FIFO over /proc/kmsg (a host's /proc has none)"
fi
IN touch /tmp/.sdrig-marker          # the probe looks for it: seen = PrivateTmp not in effect
IN test -x /usr/bin/sudo || die "the rootfs at $ROOT has no sudo (built by another kit?): remove it, or name another SDROOT"

# ---------------------------------------------------------------- the checkout, as the owner has it
mkdir -p "$H/src/bxmem"
tar -C "$CHECKOUT" --exclude=.git --exclude='.venv*' --exclude=build --exclude='*.egg-info' --exclude=__pycache__ \
    --exclude=.pytest_cache --exclude=.mypy_cache --exclude=.ruff_cache --exclude=.hypothesis --exclude='eval/results' \
    -cf - . | tar -C "$H/src/bxmem" -xf -
IN chown -R kyle:kyle /home/kyle/src

# ---------------------------------------------------------------- README: linger, install
say "README 'linger': $(python3 "$HERE/readme_blocks.py" "$CHECKOUT/README.md" linger | head -1)"
if readme linger; then
    pass "README 'linger' block as kyle: $(IN ls /var/lib/systemd/linger/ 2>/dev/null | tr '\n' ' ')lingers"
else
    info "README 'linger' block: $(tail -1 "$OUT/readme-linger.log") (logind does not answer loginctl in this container);" \
         "doing what it does: /var/lib/systemd/linger/kyle, user@1000.service started"
    IN bash -c 'mkdir -p /var/lib/systemd/linger && touch /var/lib/systemd/linger/kyle && systemctl start user@1000.service'
fi
for i in $(seq 1 100); do IN test -S /run/user/1000/bus && break; sleep 0.2; done
IN test -S /run/user/1000/bus && pass "user manager: lingering user@1000.service runs ($(IN systemctl is-active user@1000.service))" \
    || die "user manager: no /run/user/1000/bus after linger"

say "README 'install': pipx install . as kyle"
readme_step install "pipx install ., pipx ensurepath" || die "install failed"
info "pipx: $(grep -m1 -o 'installed package bxmem.*' "$OUT/readme-install.log")"
grep -q 'is not on your PATH' "$OUT/readme-install.log" && info "pipx said ~/.local/bin is not on PATH; pipx ensurepath ran (README)"
found=$(IN runuser -u kyle -- env -i $KYLE_ENV PATH=/usr/local/bin:/usr/bin:/bin bash -l -c 'command -v bxmem')
[ "$found" = /home/kyle/.local/bin/bxmem ] && pass "install: a new login shell finds bxmem at ~/.local/bin/bxmem, where the units look" \
    || fail "install: a new login shell finds bxmem at '$found', not ~/.local/bin/bxmem"
info "installed: $(U 'bxmem --version')"

RUN=${SDRIG_PREFIX:-sd}-$(head -c4 /dev/urandom | od -An -tx1 | tr -d ' \n')
echo "$RUN" > "$OUT/runid"
info "workspaces: $RUN-trusted, $RUN-untrusted, $RUN-fleet at $HONCHO"
set_url() {  # set_url URL: the configuration init wrote, pointed at another server
    U "sed -i 's|^url = .*|url = \"$1\"|' ~/.config/boxmaker/bxmem.toml"
}
# A key per workspace, where the README's init block says (--keys ~/.config/boxmaker), as the
# owner would have them: minted by the server's admin when auth is on, else random (auth off
# ignores them).
U "mkdir -p ~/.config/boxmaker && chmod 700 ~/.config/boxmaker"
for role in trusted untrusted fleet; do
    if [ -n "$ADMIN_JWT" ]; then
        key=$(curl -s -m 20 -X POST -H "Authorization: Bearer $ADMIN_JWT" "$HONCHO/v3/keys?workspace_id=$RUN-$role" \
              | python3 -c 'import json, sys; print(json.load(sys.stdin)["key"])') || die "could not mint a key for $RUN-$role at $HONCHO"
    else
        key=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
    fi
    printf '%s\n' "$key" > "$H/.config/boxmaker/honcho-$role.key"
    IN chown kyle:kyle "/home/kyle/.config/boxmaker/honcho-$role.key"
    chmod 600 "$H/.config/boxmaker/honcho-$role.key"
done
[ -n "$ADMIN_JWT" ] && info "auth on: a key minted for each of the run's workspaces, in ~kyle/.config/boxmaker (mode 600)" \
    || info "auth off: random keys in ~kyle/.config/boxmaker (the server ignores them)"

honcho_up() {  # the host's Honcho may be restarted by others: wait for it, bounded
    local i; for i in $(seq 1 45); do
        [ "$(curl -s -m 2 -o /dev/null -w '%{http_code}' "$HONCHO/health")" = 200 ] && return 0; sleep 2
    done; return 1
}
honcho_up && info "Honcho answers /health" || info "Honcho not answering /health after 90 s; its checks will fail"

# ---------------------------------------------------------------- unit helpers
SERVICES="bxmem-decide.service bxmem-mirror.service bxmem-send.service"
TIMERS="bxmem-decide.timer bxmem-mirror.timer bxmem-send.timer"
PATHS="bxmem-decide.path bxmem-mirror.path bxmem-send.path"
# SC: "user" for kyle's manager, "system" for the system manager
sysctl_() { if [ "$SC" = user ]; then U "systemctl --user $*"; else IN bash -c "systemctl $*"; fi; }
journal_() { if [ "$SC" = user ]; then IN journalctl --no-pager -o short-precise _UID=1000 "$@"; else IN journalctl --no-pager -o short-precise -u 'bxmem-*' -u 'sdrig-probe-*' "$@"; fi; }
# Every journal entry about the bxmem units since $1 (epoch), until $2 (epoch, optional):
# the manager's lines about them and their own output, one per line ("PRIORITY UNIT MESSAGE").
bxmem_journal() {
    local until=${2:+--until=@$2}
    IN journalctl --no-pager -o json --since "@$1" $until | python3 -c '
import json, sys
for line in sys.stdin:
    e = json.loads(line)
    unit = next((e[k] for k in ("_SYSTEMD_USER_UNIT", "USER_UNIT", "UNIT", "_SYSTEMD_UNIT") if str(e.get(k, "")).startswith("bxmem-")), None)
    if unit:
        print(e.get("PRIORITY", "?"), unit, str(e.get("MESSAGE", "")).replace("\n", " "))'
}
# Judge the three services since $1 (epoch): each ran since then, none failed (a failed run
# leaves lines at notice and above, which the units keep), the last result is success.
judge_runs() {
    local since=$1 label=$2 s res st mono started bad=0 lines
    for s in $SERVICES; do
        res=$(sysctl_ "show $s -p Result --value"); st=$(sysctl_ "show $s -p ExecMainStatus --value")
        mono=$(sysctl_ "show $s -p ExecMainStartTimestampMonotonic --value")
        # CLOCK_MONOTONIC is the host's in the container (no time namespace): seconds after $since
        started=$(python3 -c "import sys, time; m = int(sys.argv[1] or 0); print(round(m / 1e6 + time.time() - time.monotonic() - float(sys.argv[2]), 1) if m else '')" "$mono" "$since")
        lines=$(journal_ --since "@$since" | grep -F "$s" | grep -E 'Failed|status=|killed|Traceback' | grep -v 'Failed with result' | head -3)
        if [ "$res" = success ] && [ -z "$lines" ] && [ -n "$started" ] && [ "${started%.*}" -ge 0 ]; then
            pass "$label: $s ran (last start ${started} s in), no run failed (last exit status $st)"
        else
            bad=1
            fail "$label: $s Result=$res ExecMainStatus=$st last start '${started:-never}' s after the start of the check"
            journal_ --since "@$since" | grep -F -e "$s" | grep -E 'Failed|status=|killed|ignoring|denied|Traceback|Error|error' \
                | sed -E 's/^[A-Z][a-z]{2} [0-9]+ [0-9:.]+ sdrig //' | sort | uniq -c | sort -rn | head -6 | sed 's/^/      /'
        fi
    done
    return $bad
}
count() { grep -c "^$1" "$OUT/step.txt"; }
step() { local rc; "$@" | tee "$OUT/step.txt"; rc=$?; NPASS=$((NPASS + $(count PASS))); NFAIL=$((NFAIL + $(count FAIL))); return $rc; }
probe() {  # probe copies of the three services' sandboxes (same file + drop-ins, ExecStart= the probe)
    local label=$1 dir=$2 runas=$3 s p port
    port=$(echo "$HONCHO" | sed -E 's|.*:([0-9]+).*|\1|')
    for s in decide mirror send; do
        IN bash -c "sed 's|^ExecStart=.*|ExecStart=/usr/bin/python3 /opt/sdrig/probe.py $s $port|' $dir/bxmem-$s.service > $dir/sdrig-probe-$s.service
            rm -rf $dir/sdrig-probe-$s.service.d; [ -d $dir/bxmem-$s.service.d ] && cp -r $dir/bxmem-$s.service.d $dir/sdrig-probe-$s.service.d
            chown -R $runas $dir/sdrig-probe-$s.service*; true"
    done
    sysctl_ "daemon-reload"
    for s in decide mirror send; do
        sysctl_ "start sdrig-probe-$s.service" >/dev/null 2>&1
        if [ "$SC" = user ]; then p=$(U "journalctl --user -o cat -u sdrig-probe-$s.service --no-pager")
        else p=$(IN journalctl -o cat -u "sdrig-probe-$s.service" --no-pager); fi
        p=$(echo "$p" | grep '^SDRIG-PROBE' | tail -1 | cut -d' ' -f2-)
        echo "$label $s $p" >> "$OUT/probes.txt"
        if [ -z "$p" ]; then fail "$label sandbox probe ($s): did not run: $(journal_ --since -10s | grep "sdrig-probe-$s" | grep -E 'Failed|status=' | head -2 | tr '\n' ' ')"; continue; fi
        python3 "$HERE/verdict.py" "$label" "$s" "$p"
    done 2>&1 | tee -a "$OUT/probe-verdicts.txt"
    NPASS=$((NPASS + $(grep -c -F "PASS $label" "$OUT/probe-verdicts.txt"))); NFAIL=$((NFAIL + $(grep -c -F "FAIL $label" "$OUT/probe-verdicts.txt")))
    IN bash -c "rm -f $dir/sdrig-probe-*.service; rm -rf $dir/sdrig-probe-*.service.d"
    sysctl_ "daemon-reload; systemctl $([ "$SC" = user ] && echo --user) reset-failed" >/dev/null 2>&1
}
measure() {  # measure LABEL turn|edit N MAXS: one append, its timings; PASS when in Honcho within MAXS s
    local label=$1 kind=$2 n=$3 maxs=$4 j args
    if [ "$kind" = turn ]; then args="turn $RUN s-clean $n $HONCHO"; else args="edit $RUN $n $HONCHO"; fi
    if [ "$SC" = user ]; then j=$(U "python3 /opt/sdrig/measure.py $args")
    else j=$(IN env SDRIG_SCOPE=system BOXMAKER_HOME=/home/kyle/.local/share/boxmaker python3 /opt/sdrig/measure.py $args); fi
    echo "$label $j" >> "$OUT/timings.txt"
    python3 - "$label" "$maxs" "$j" <<'EOF'
import json, sys
label, maxs, j = sys.argv[1], float(sys.argv[2]), json.loads(sys.argv[3])
f = lambda k: "-" if j.get(k) is None else f"{j[k]:.2f}s"
line = (f"{label} {j['item']}: unit started {f('unit_start')}, decided {f('decided')}, send started {f('send_start')}, "
        f"sent {f('sent')}, in Honcho {f('honcho')} after the append")
if j.get("honcho_errors"):
    line += f" (Honcho errors while polling: {j['honcho_errors']}, {j.get('honcho_error')})"
print(("PASS " if j.get("honcho") is not None and j["honcho"] <= maxs else "FAIL ") + line + f" [bound {maxs:g}s]")
EOF
}
# What an idle window adds to the journal, as shipped and, side by side, with the units as
# they were before (the same files without LogLevelMax= and SyslogLevel=; a drop-in cannot
# unset LogLevelMax=: systemd 257 refuses it empty). Lines a container causes and a host would
# not (PrivateNetwork= without CAP_NET_ADMIN, see the header) are counted apart.
ARTIFACT='Failed to configure loopback network device|PrivateNetwork=yes is configured, but'
quiet_window() {  # quiet_window LABEL UNIT_DIR
    local label=$1 dir=$2 t0 t1 n_shipped n_before n_artifact s before_s=$(( QUIET_S / 3 ))
    sleep 6   # the runs the last step caused are over
    t0=$(now); sleep "$QUIET_S"; t1=$(now)
    bxmem_journal "$t0" "$t1" > "$OUT/quiet-$SC-shipped-all.txt"
    grep -v -E "$ARTIFACT" "$OUT/quiet-$SC-shipped-all.txt" > "$OUT/quiet-$SC-shipped.txt"
    n_shipped=$(wc -l < "$OUT/quiet-$SC-shipped.txt")
    n_artifact=$(grep -c -E "$ARTIFACT" "$OUT/quiet-$SC-shipped-all.txt")
    for s in decide mirror send; do
        IN bash -c "cp -p $dir/bxmem-$s.service /root/bxmem-$s.service.shipped && sed -i '/^LogLevelMax=/d; /^SyslogLevel=/d' $dir/bxmem-$s.service"
    done
    sysctl_ "daemon-reload"
    sleep 6
    t0=$(now); sleep "$before_s"; t1=$(now)
    bxmem_journal "$t0" "$t1" | grep -v -E "$ARTIFACT" > "$OUT/quiet-$SC-before.txt"
    n_before=$(wc -l < "$OUT/quiet-$SC-before.txt")
    for s in decide mirror send; do IN bash -c "mv /root/bxmem-$s.service.shipped $dir/bxmem-$s.service"; done
    sysctl_ "daemon-reload"
    local per_hour=$(( n_shipped * 3600 / QUIET_S )) before_hour=$(( n_before * 3600 / before_s ))
    local msg="$label: an idle ${QUIET_S} s adds $n_shipped journal line(s) about the bxmem units ($per_hour an hour, extrapolated); side by side, without LogLevelMax= and SyslogLevel=: $n_before in ${before_s} s ($before_hour an hour)"
    if [ "$per_hour" -le 60 ] && [ "$n_before" -gt 0 ]; then pass "$msg"; else fail "$msg; first: $(head -1 "$OUT/quiet-$SC-shipped.txt")"; fi
    [ "$n_artifact" = 0 ] || info "$label: and $n_artifact line(s) of PrivateNetwork= in a container (see above), not counted"
    info "$label, without them: $(cut -d' ' -f2- "$OUT/quiet-$SC-before.txt" | sed -E 's/\b[0-9]+(\.[0-9]+)?(ms|s|min)\b/N/g' | sort | uniq -c | sort -rn | head -4 | awk '{$1=$1};1' | tr '\n' ';' | cut -c1-300)"
}
# Honcho goes away (the forwarder the config points at stops) and comes back: the outage's
# start (warning) and end (notice) reach the journal, and nothing else does.
outage_check() {
    local pport t0 t_warn="" t_back="" i lines
    pport=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    local hhost hport
    hhost=$(echo "$HONCHO" | sed -E 's|^https?://([^:/]+).*|\1|'); hport=$(echo "$HONCHO" | sed -E 's|.*:([0-9]+).*|\1|')
    proxy_on() { IN systemd-run --quiet --unit=sdrig-proxy --collect /usr/bin/python3 /opt/sdrig/proxy.py "$pport" "$hhost" "$hport" >/dev/null 2>&1
                 for i in $(seq 1 50); do curl -s -m 1 -o /dev/null "http://127.0.0.1:$pport/health" && return 0; sleep 0.1; done; return 1; }
    proxy_on || { fail "outage: the forwarder on 127.0.0.1:$pport did not come up"; return; }
    set_url "http://127.0.0.1:$pport"
    sleep 8   # every job has seen the new config; the outbox is empty
    t0=$(now)
    IN systemctl stop sdrig-proxy
    U "python3 -c 'import sys; sys.path.insert(0, \"/opt/sdrig\"); import boxhome; boxhome.append_log(\"s-outage\", boxhome.turn(1, \"$RUN during the outage\", \"$RUN it waited\"))'"
    for i in $(seq 1 40); do
        bxmem_journal "$t0" > "$OUT/outage-journal.txt"
        grep -q 'Honcho unreachable at' "$OUT/outage-journal.txt" && { t_warn=$(now); break; }; sleep 0.5
    done
    U "bxmem doctor" > "$OUT/doctor-catch-honcho-down.txt" 2>&1; judge_catch "Honcho down (the forwarder the config names stopped)" $? 7 'Honcho at http://127\.0\.0\.1:'"$pport"': not answering' honcho-down
    sleep 5
    proxy_on
    for i in $(seq 1 120); do
        bxmem_journal "$t0" > "$OUT/outage-journal.txt"
        grep -q 'answers again' "$OUT/outage-journal.txt" && { t_back=$(now); break; }; sleep 0.5
    done
    lines=$(wc -l < "$OUT/outage-journal.txt")
    [ -n "$t_warn" ] && pass "outage: its start is in the journal: $(grep -m1 'Honcho unreachable' "$OUT/outage-journal.txt" | cut -c1-220)" \
        || fail "outage: no 'Honcho unreachable' line in the journal within 20 s of Honcho going away"
    [ -n "$t_back" ] && pass "outage: its end is in the journal: $(grep -m1 'answers again' "$OUT/outage-journal.txt" | cut -c1-200)" \
        || fail "outage: no 'answers again' line within 60 s of Honcho coming back"
    [ "$lines" = 2 ] && pass "outage: those are the only 2 journal lines about the bxmem units while it lasted" \
        || fail "outage: $lines journal lines about the bxmem units while it lasted (want the 2): $(cut -c1-120 "$OUT/outage-journal.txt" | tr '\n' '|')"
    for i in $(seq 1 30); do
        python3 "$HERE/guest/honcho.py" "$HONCHO" "$RUN" 2>/dev/null | grep -q "$RUN during the outage" && break; sleep 1
    done
    python3 "$HERE/guest/honcho.py" "$HONCHO" "$RUN" | grep -q "$RUN during the outage" \
        && pass "outage: the turn written while Honcho was away reached it once Honcho answered" \
        || fail "outage: the turn written while Honcho was away is not in Honcho"
    set_url "$HONCHO"
    IN systemctl stop sdrig-proxy 2>/dev/null
    sleep 6
}
# A configuration bxmem cannot use: the error line (no priority prefix: SyslogLevel=err) and the
# manager's failure lines reach the journal; the next run after the fix succeeds.
config_error_check() {
    local t0 i
    U "cp ~/.config/boxmaker/bxmem.toml ~/.config/boxmaker/bxmem.toml.good && sed -i 's|^url = .*|url = \"notaurl\"|' ~/.config/boxmaker/bxmem.toml"
    t0=$(now)
    for i in $(seq 1 30); do
        bxmem_journal "$t0" > "$OUT/config-error-journal.txt"
        grep -q 'bxmem-decide.service bxmem: error:' "$OUT/config-error-journal.txt" && grep -q "bxmem-decide.service.*Failed with result" "$OUT/config-error-journal.txt" && break
        sleep 0.5
    done
    U "mv ~/.config/boxmaker/bxmem.toml.good ~/.config/boxmaker/bxmem.toml"
    grep -q '^3 bxmem-decide.service bxmem: error: .*honcho.url' "$OUT/config-error-journal.txt" \
        && pass "config error: in the journal at priority err: $(grep -m1 '^3 bxmem-decide.service bxmem: error' "$OUT/config-error-journal.txt" | cut -c1-200)" \
        || fail "config error: bxmem's error line is not in the journal at priority err: $(head -3 "$OUT/config-error-journal.txt" | tr '\n' '|')"
    grep -q "bxmem-decide.service.*Failed with result 'exit-code'" "$OUT/config-error-journal.txt" \
        && pass "config error: systemd's failure line is in the journal too: $(grep -m1 'bxmem-decide.service.*Failed with result' "$OUT/config-error-journal.txt")" \
        || fail "config error: no 'Failed with result' line for bxmem-decide in the journal"
    sysctl_ "reset-failed" >/dev/null 2>&1
}

# Why the shipped user units fail: each hardening directive alone in a transient user unit,
# then the decide unit without the directives that fail, probed (what is then in effect).
diagnose_user_units() {
    local line st failing="" f p
    sed -n '/^# Hardening/,$p' "$H/src/bxmem/systemd/bxmem-decide.service" | grep -E '^[A-Za-z]+=' > "$OUT/directives.txt"
    while read -r line; do
        st=$(U "systemd-run --user --wait --collect -p '$line' /bin/true 2>&1" | grep -o -E 'status=[0-9]+(/[A-Z]+)?' | head -1)
        case "$st" in ""|status=0*) ;; *) failing="$failing|$line"; info "user manager, '$line' alone on /bin/true: $st";; esac
    done < "$OUT/directives.txt"
    [ -n "$failing" ] || { info "user manager: no single directive fails alone"; return; }
    f=${failing#|}
    U "grep -v -x -F -e '$(echo "$f" | sed "s/|/' -e '/g")' ~/src/bxmem/systemd/bxmem-decide.service \
        | sed 's|^ExecStart=.*|ExecStart=/usr/bin/python3 /opt/sdrig/probe.py decide $HPORT|' > ~/.config/systemd/user/sdrig-probe-without.service
        systemctl --user daemon-reload; systemctl --user start sdrig-probe-without.service" >/dev/null 2>&1
    p=$(U "journalctl --user -o cat -u sdrig-probe-without.service --no-pager" | grep '^SDRIG-PROBE' | tail -1 | cut -d' ' -f2-)
    if [ -n "$p" ]; then python3 "$HERE/verdict.py" "user units without ${f//|/ }" decide "$p" info
    else info "decide without ${f//|/ } does not start either"; fi
    U "rm -f ~/.config/systemd/user/sdrig-probe-without.service; systemctl --user daemon-reload; systemctl --user reset-failed" >/dev/null 2>&1
}
# IPAddressDeny= is a BPF program on the unit's cgroup: does the manager apply it?
ipdeny_check() {
    local label=$1 out
    if [ "$SC" = user ]; then
        out=$(U "systemd-run --user --wait --collect --pipe -q -p IPAddressDeny=any /usr/bin/python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", $HPORT), timeout=2); print(\"connected\")' 2>&1")
    else
        out=$(IN systemd-run --wait --collect --pipe -q -p User=kyle -p IPAddressDeny=any /usr/bin/python3 -c "import socket; socket.create_connection((\"127.0.0.1\", $HPORT), timeout=2); print(\"connected\")" 2>&1)
    fi
    case "$out" in *connected*) info "$label: IPAddressDeny=any is NOT applied (a TCP connection to 127.0.0.1:$HPORT got through)";;
        *) info "$label: IPAddressDeny=any is applied (the connection did not get through: $(echo "$out" | tail -1 | cut -c1-80))";; esac
}
expect() {  # the home's content as Honcho should hold it
    python3 - "$1" "$RUN" <<'EOF'
import json, sys
h, run = json.loads(sys.argv[1]), sys.argv[2]
msgs = lambda role, s: [c for _, c in h.get(role, {}).get("messages", {}).get(s, [])]
checks = [
    ("trusted s-clean: both turns (4 messages)", all(f"{run} {t}" in msgs("trusted", "s-clean") for t in
        ("what did we decide about the backups?", "nightly restic snapshots", "and where do they go?", "to the NAS, then offsite weekly"))),
    ("untrusted s-fetched: the fetched turn (2 messages)", len(msgs("untrusted", "s-fetched")) == 2),
    ("trusted: the identity entry as a conclusion", f"{run} Kyle prefers metric units" in h.get("trusted", {}).get("conclusions", [])),
    ("fleet: the untrusted note as a message", any(f"{run} the vendor page says v2 is deprecated" in msgs("fleet", s) for s in h.get("fleet", {}).get("messages", {}))),
    ("nothing misrouted (no fetched turn in trusted, no clean turn in untrusted)",
        not msgs("trusted", "s-fetched") and not msgs("untrusted", "s-clean")),
]
for name, ok in checks:
    print(("PASS " if ok else "WAIT ") + name)
EOF
}
journal_problems() {  # journal_problems LABEL SINCE
    journal_ --since "@$2" > "$OUT/journal-$SC.txt"
    grep -E 'status=31/SYS|code=killed|Read-only file system|Permission denied|EACCES|EROFS|Traceback|MemoryDenyWriteExecute' "$OUT/journal-$SC.txt" \
        | grep -E 'bxmem\[|\(bxmem\)|bxmem-(decide|mirror|send)\.service' > "$OUT/journal-$SC-problems.txt"
    [ -s "$OUT/journal-$SC-problems.txt" ] && fail "$1: $(wc -l < "$OUT/journal-$SC-problems.txt") problem line(s), first: $(head -1 "$OUT/journal-$SC-problems.txt")" \
        || pass "$1: no SIGSYS, EACCES/EROFS, Traceback or kill in any bxmem run"
}

# judge_catch WHAT RC WANT_RC PATTERN NAME: a `bxmem doctor` run with one fault in place (its
# output in doctor-catch-NAME.txt) exits WANT_RC with a failed line matching PATTERN.
judge_catch() {
    local what=$1 rc=$2 want=$3 pat=$4 f="$OUT/doctor-catch-$5.txt" line others
    line=$(grep -m1 -E "^failed: $pat" "$f")
    others=$(grep '^failed: ' "$f" | grep -v -F -x -e "$line" | cut -c1-100 | tr '\n' '|')
    if [ "$rc" = "$want" ] && [ -n "$line" ]; then
        pass "doctor catches $what: exit $rc: $(echo "$line" | cut -c1-300)${others:+ [other failed lines: $others]}"
    else
        fail "doctor does not catch $what: exit $rc (want $want and a failed line like '$pat'): $(grep -E '^(failed|not checked): ' "$f" | cut -c1-160 | tr '\n' '|')"
    fi
}
doctor_catch() {  # doctor_catch NAME WHAT WANT_RC PATTERN [COMMAND]: bxmem doctor as kyle (or COMMAND), judged
    U "${5:-bxmem doctor}" > "$OUT/doctor-catch-$1.txt" 2>&1
    judge_catch "$2" $? "$3" "$4" "$1"
}
# Each fault an owner can meet, one at a time, with everything else working; each undone after.
doctor_catches() {
    local ws=$RUN-trusted kf=/home/kyle/.config/boxmaker/honcho-trusted.key
    U "cp -p $kf $kf.good"
    if [ -n "$ADMIN_JWT" ]; then
        U "cat ~/.config/boxmaker/honcho-fleet.key > $kf"
        doctor_catch key-of-fleet "a key of another workspace (fleet's key in trusted's file)" 4 \
            "key for $ws on Honcho: refused \(HTTP 40[13]\): the key was minted for workspace $RUN-fleet"
        # a character of the signature's middle (its last one may carry only padding bits)
        U "python3 -c 'import sys; k = open(sys.argv[1]).read().strip(); i = len(k) - 10; print(k[:i] + (\"B\" if k[i] == \"A\" else \"A\") + k[i + 1:])' $kf.good > $kf"
        doctor_catch key-altered "an altered key (trusted's, a character of its signature changed)" 4 \
            "key for $ws on Honcho: refused \(HTTP 40[13]\): the key is wrong or expired"
        U "cp -p $kf.good $kf"
    else
        info "doctor catches a wrong key: not judged (auth off: Honcho takes any key; doctor says so)"
    fi
    U "chmod 644 $kf"
    doctor_catch key-mode "a key file of mode 644" 4 "key file for $ws: .*has mode 0644"
    U "chmod 600 $kf; rm -f $kf.good"
    U "systemctl --user stop sdrig-brokerd.service"
    doctor_catch brokerd-down "brokerd down (the stub brokerd stopped)" 4 "brokerd: cannot answer"
    U "systemctl --user start sdrig-brokerd.service"
    for i in $(seq 1 50); do IN test -S /home/kyle/.local/share/boxmaker/run/memory-broker/state.sock && break; sleep 0.2; done
    U "systemctl --user disable --now bxmem-mirror.timer" > /dev/null 2>&1
    doctor_catch unit-disabled "a unit not enabled (systemctl --user disable --now bxmem-mirror.timer)" 4 \
        "units of mirror \(user manager\): bxmem-mirror.timer is not enabled"
    U "systemctl --user enable --now bxmem-mirror.timer" > /dev/null 2>&1
    if IN test -x /usr/bin/faketime; then
        doctor_catch clock-ahead "a clock 10 minutes ahead (faketime -f +10m)" 4 \
            "clock against Honcho's: this host's is (59[0-9]|60[0-9]) s ahead of Honcho's" "faketime -f +10m bxmem doctor"
        doctor_catch clock-behind "a clock 10 minutes behind (faketime -f -10m)" 4 \
            "clock against Honcho's: this host's is (59[0-9]|60[0-9]) s behind Honcho's" "faketime -f -10m bxmem doctor"
    else
        fail "doctor catches a clock 10 minutes off: no faketime in the container"
    fi
    sleep 3
    U 'bxmem doctor' > "$OUT/doctor-undone.txt" 2>&1; rc=$?
    [ $rc = 0 ] && pass "bxmem doctor once each fault is undone: $(tail -1 "$OUT/doctor-undone.txt")" \
        || fail "bxmem doctor exits $rc once each fault is undone: $(grep -E '^(failed|warning|not checked)' "$OUT/doctor-undone.txt" | cut -c1-160 | tr '\n' '|')"
}
# bxmem metrics as kyle, through promtool check metrics (the host's: Debian's prometheus package).
metrics_check() {
    local rc
    U 'bxmem metrics' > "$OUT/metrics.prom" 2> "$OUT/metrics.err"; rc=$?
    [ $rc = 0 ] || { fail "bxmem metrics exits $rc: $(tail -2 "$OUT/metrics.err" | tr '\n' ' ')"; return; }
    if ! command -v promtool > /dev/null; then info "bxmem metrics: $(grep -c -v '^#' "$OUT/metrics.prom") samples; no promtool on this host (apt-get install prometheus), not checked"; return; fi
    promtool check metrics < "$OUT/metrics.prom" > "$OUT/promtool.txt" 2>&1; rc=$?
    [ $rc = 0 ] && [ ! -s "$OUT/promtool.txt" ] \
        && pass "bxmem metrics ($(grep -c -v '^#' "$OUT/metrics.prom") samples, $(grep -c '^# TYPE' "$OUT/metrics.prom") families): promtool check metrics exits 0, no problem named ($(promtool --version 2>&1 | head -1 | cut -d' ' -f1-3))" \
        || fail "bxmem metrics: promtool check metrics exits $rc: $(head -3 "$OUT/promtool.txt" | tr '\n' '|')"
}

HPORT=$(echo "$HONCHO" | sed -E 's|.*:([0-9]+).*|\1|')
# ---------------------------------------------------------------- 1. init, doctor, units install (README 'init', 'doctor', 'units')
SC=user
say "README 'init', 'doctor', 'units': bxmem init, bxmem doctor, bxmem units install"
readme_block init > "$OUT/init-as-run.sh" && info "init block as run: $(tr '\n' ';' < "$OUT/init-as-run.sh")"
readme_step init "bxmem init" || die "init failed"
readme doctor; rc=$?
failed=$(grep '^failed: ' "$OUT/readme-doctor.log" | grep -v -e '^failed: units of ' -e '^failed: brokerd: ')
accepted=$(grep -c '^ok: key for .* on Honcho: accepted' "$OUT/readme-doctor.log")
if [ $rc = 4 ] && [ -z "$failed" ] && [ "$accepted" = 3 ] && ! grep -q '^not checked: ' "$OUT/readme-doctor.log"; then
    pass "README 'doctor' block as kyle, before the units: $(tail -1 "$OUT/readme-doctor.log"); every key accepted by its workspace, only the units (not installed yet) and brokerd (down) fail"
else
    fail "README 'doctor' block as kyle exits $rc: $(grep -E '^(failed|not checked): ' "$OUT/readme-doctor.log" | cut -c1-160 | tr '\n' '|')"
fi
if [ -n "$ADMIN_JWT" ]; then  # the keys are checked against a server that refuses requests without one
    grep -q "^ok: Honcho's auth: on" "$OUT/readme-doctor.log" && pass "auth on, as doctor sees it: $(grep -m1 "^ok: Honcho's auth" "$OUT/readme-doctor.log" | cut -c1-120)" \
        || fail "auth: doctor does not see Honcho's auth on: $(grep "Honcho's auth" "$OUT/readme-doctor.log" | cut -c1-160)"
fi
T1=$(now)
readme_step units "bxmem units install" || die "units install failed"
modes=$(IN stat -c '%a %n' /home/kyle/.local/share/boxmaker /home/kyle/.local/share/boxmaker/memory \
        /home/kyle/.local/share/boxmaker/memory/bxmem /home/kyle/.config/boxmaker/bxmem.toml | tr '\n' ';')
[ "$modes" = "700 /home/kyle/.local/share/boxmaker;700 /home/kyle/.local/share/boxmaker/memory;700 /home/kyle/.local/share/boxmaker/memory/bxmem;600 /home/kyle/.config/boxmaker/bxmem.toml;" ] \
    && pass "init: made the Boxmaker home, memory/ and memory/bxmem/ mode 700, wrote bxmem.toml mode 600" \
    || fail "init: modes are not what init makes: $modes"
unit=/home/kyle/.config/systemd/user/bxmem-send.service
IN grep -q -x 'ExecStart=/home/kyle/.local/bin/bxmem --quiet send' $unit && IN grep -q -x 'ReadWritePaths=/home/kyle/.local/share/boxmaker' $unit \
    && IN grep -q -x 'PathChanged=/home/kyle/.local/share/boxmaker/memory/honcho.jsonl' /home/kyle/.config/systemd/user/bxmem-send.path \
    && pass "units install: the units name kyle's bxmem and home ($(IN ls /home/kyle/.config/systemd/user | grep -c '^bxmem-') unit files, $(IN grep -c . /home/kyle/.local/state/bxmem/units.json) lines of manifest)" \
    || fail "units install: $unit does not name kyle's bxmem and home: $(IN grep -E '^(ExecStart|ReadWritePaths)=' $unit | tr '\n' ' ')"
U "python3 /opt/sdrig/boxhome.py init $RUN"   # loopd and memoryd write in the home init made
for u in $TIMERS $PATHS; do [ "$(U "systemctl --user is-active $u")" = active ] || fail "user units as shipped: $u is $(U "systemctl --user is-active $u")"; done
sleep 8   # OnActiveSec=5s: every service has run once (brokerd is down: decide should say so and not fail)
VARIANT="as shipped"
if ! step judge_runs "$T1" "user units as shipped"; then
    U "systemctl --user stop $TIMERS $PATHS" >/dev/null 2>&1
    U "systemctl --user reset-failed"
    say "diagnosing the shipped user units"
    diagnose_user_units
    say "the shipped user units fail; retrying with a drop-in for each service: [Service] $FIX"
    for s in decide mirror send; do
        U "mkdir -p ~/.config/systemd/user/bxmem-$s.service.d && printf '[Service]\n%s\n' '$FIX' > ~/.config/systemd/user/bxmem-$s.service.d/sdrig-fix.conf"
    done
    U "systemctl --user daemon-reload; systemctl --user reset-failed"
    T1=$(now)
    U "systemctl --user start $TIMERS $PATHS"
    sleep 8
    VARIANT="with $FIX"
    step judge_runs "$T1" "user units with $FIX"
fi
U 'bxmem sync' > "$OUT/sync-brokerd-down.txt" 2>&1
grep -q 'brokerd as decide recorded: unavailable' "$OUT/sync-brokerd-down.txt" \
    && pass "brokerd down ($VARIANT): decide records brokerd unavailable, turns wait: $(grep 'brokerd as decide' "$OUT/sync-brokerd-down.txt" | cut -d: -f2-)" \
    || fail "brokerd down ($VARIANT): sync does not show decide's brokerd outage: $(grep 'brokerd' "$OUT/sync-brokerd-down.txt" | tr '\n' ' ')"
[ "$(U 'systemctl --user is-failed bxmem-decide.service')" != failed ] \
    && pass "brokerd down ($VARIANT): bxmem-decide.service is not failed (exit status $(U 'systemctl --user show bxmem-decide.service -p ExecMainStatus --value'); SuccessExitStatus=3)" \
    || fail "brokerd down ($VARIANT): bxmem-decide.service failed"
bxmem_journal "$T1" | grep -q '^4 bxmem-decide.service bxmem decide: warning: brokerd cannot answer' \
    && pass "brokerd down ($VARIANT): the journal has decide's warning, at priority warning: $(bxmem_journal "$T1" | grep -m1 'brokerd cannot answer' | cut -c1-160)" \
    || fail "brokerd down ($VARIANT): decide's warning is not in the journal at priority warning: $(bxmem_journal "$T1" | head -3 | tr '\n' '|')"

# ---------------------------------------------------------------- 2. brokerd up: what reaches Honcho
say "starting bxmem's stub brokerd as kyle (a user service)"
T_BROKERD=$(now)
VENV_PY=$(dirname "$(U 'readlink -f ~/.local/bin/bxmem')")/python
U "printf '[Unit]\nDescription=sdrig: bxmem stub brokerd\n[Service]\nExecStart=$VENV_PY /opt/sdrig/brokerd.py\n' > ~/.config/systemd/user/sdrig-brokerd.service
   systemctl --user daemon-reload && systemctl --user start sdrig-brokerd.service" > "$OUT/brokerd-start.txt" 2>&1
for i in $(seq 1 50); do IN test -S /home/kyle/.local/share/boxmaker/run/memory-broker/state.sock && break; sleep 0.2; done
IN test -S /home/kyle/.local/share/boxmaker/run/memory-broker/state.sock && pass "stub brokerd runs as kyle ($VENV_PY, socket in run/memory-broker)" \
    || fail "stub brokerd did not come up: $(cat "$OUT/brokerd-start.txt"; U 'journalctl --user -u sdrig-brokerd -o cat --no-pager | tail -3')"
T2=$(now)
honcho_up
for i in $(seq 1 60); do
    H_JSON=$(python3 "$HERE/guest/honcho.py" "$HONCHO" "$RUN")
    expect "$H_JSON" > "$OUT/expect.txt"
    grep -q '^WAIT' "$OUT/expect.txt" || break
    sleep 1
done
echo "$H_JSON" > "$OUT/honcho-content.json"
info "Honcho content arrived $(python3 -c "import time; print(round(time.time() - $T2, 1))") s after brokerd came up"
while read -r verdict rest; do [ "$verdict" = PASS ] && pass "Honcho ($VARIANT): $rest" || fail "Honcho ($VARIANT): $rest (not there after 60 s)"; done < "$OUT/expect.txt"
bxmem_journal "$T_BROKERD" | grep -q '^5 bxmem-decide.service bxmem decide: notice: brokerd answers again' \
    && pass "brokerd back ($VARIANT): the journal has decide's notice, at priority notice: $(bxmem_journal "$T_BROKERD" | grep -m1 'answers again' | cut -c1-140)" \
    || fail "brokerd back ($VARIANT): no 'brokerd answers again' notice in the journal: $(bxmem_journal "$T_BROKERD" | head -3 | tr '\n' '|')"
U 'timeout 120 bxmem audit' > "$OUT/audit.txt" 2>&1 && pass "bxmem audit: $(tail -1 "$OUT/audit.txt")" || fail "bxmem audit: $(tail -3 "$OUT/audit.txt" | tr '\n' ' ')"
U 'bxmem sync' > "$OUT/sync.txt" 2>&1; rc=$?
[ $rc = 0 ] && pass "bxmem sync exits 0 (nothing needs attention)" || fail "bxmem sync exits $rc: $(grep -i attention "$OUT/sync.txt" | tr '\n' ' ')"
U "journalctl --user -u 'bxmem-*' --no-pager -n 3" > "$OUT/journal-as-kyle.txt" 2>&1 && [ -s "$OUT/journal-as-kyle.txt" ] \
    && pass "journalctl --user -u 'bxmem-*' works for kyle (README): $(tail -1 "$OUT/journal-as-kyle.txt" | cut -c1-120)" \
    || fail "journalctl --user -u 'bxmem-*' as kyle: $(head -2 "$OUT/journal-as-kyle.txt")"
U 'bxmem doctor' > "$OUT/doctor-after.txt" 2>&1; rc=$?
[ $rc = 0 ] && pass "bxmem doctor once the units have run and brokerd answers: $(tail -1 "$OUT/doctor-after.txt")" \
    || fail "bxmem doctor exits $rc once everything runs: $(grep -E '^(failed|warning|not checked)' "$OUT/doctor-after.txt" | cut -c1-160 | tr '\n' '|')"
U 'bxmem runbook broker-state-unavailable' | grep -q '^# broker-state-unavailable' \
    && pass "the runbook entry the warning names prints after a pipx install: bxmem runbook broker-state-unavailable" \
    || fail "bxmem runbook broker-state-unavailable does not print the entry"

# ---------------------------------------------------------------- 3. sandbox probes (user)
say "probing the user units' sandboxes"
probe "user ($VARIANT)" /home/kyle/.config/systemd/user kyle:kyle
ipdeny_check "user manager"

# ---------------------------------------------------------------- 4. latency (user)
say "latency: .path units only (timers stopped)"
U "systemctl --user stop $TIMERS"; sleep 1; honcho_up
N=3
for k in 1 2 3; do step measure "user .path ($VARIANT)" turn $N 5; N=$((N + 1)); sleep 1; done
step measure "user .path ($VARIANT)" edit 3 5; E=4
say "latency: timers only (.path units stopped)"
U "systemctl --user stop $PATHS; systemctl --user start $TIMERS"; sleep 6
step measure "user timers ($VARIANT)" turn $N 15; N=$((N + 1))
U "systemctl --user start $PATHS"; sleep 2

# ---------------------------------------------------------------- 5. the journal (user)
say "journal: an idle ${QUIET_S} s as shipped, then without LogLevelMax= and SyslogLevel="
quiet_window "user journal ($VARIANT)" /home/kyle/.config/systemd/user
say "journal: Honcho goes away and comes back"
outage_check
step judge_runs "$T1" "user units ($VARIANT), whole scenario"
journal_problems "user journal" "$T1"
say "journal: a configuration bxmem cannot use"
config_error_check
T_FIXED=$(now); sleep 7
step judge_runs "$T_FIXED" "user units after the config is fixed"

# ---------------------------------------------------------------- 5b. what doctor catches; metrics
say "doctor: a wrong key, a key file of mode 644, brokerd down, a unit not enabled, a clock 10 minutes off"
IN bash -c 'command -v faketime >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq faketime; } >/dev/null 2>&1'
doctor_catches
metrics_check

# ---------------------------------------------------------------- 6. upgrade (README 'upgrade')
say "README 'upgrade': a changed checkout, then the README's upgrade steps"
MARK="upgrade-$RUN"
echo "SDRIG_UPGRADE = \"$MARK\"" >> "$H/src/bxmem/bxmem/__init__.py"
echo "# $MARK" >> "$H/src/bxmem/systemd/bxmem-send.service"
IN chown -R kyle:kyle /home/kyle/src
T3=$(now)
readme_step upgrade "timers and .path units stopped, pipx install --force ., bxmem units install"
got=$(U "cd / && $VENV_PY -c 'import bxmem; print(getattr(bxmem, \"SDRIG_UPGRADE\", \"old\"))'")
[ "$got" = "$MARK" ] && pass "upgrade: the installed bxmem is the changed checkout's" || fail "upgrade: the installed bxmem is not the changed checkout's ($got)"
U "grep -q -F '# $MARK' ~/.config/systemd/user/bxmem-send.service" && pass "upgrade: the changed unit is installed" || fail "upgrade: the old unit is still installed"
sleep 7
step judge_runs "$T3" "user units after the upgrade"

# ---------------------------------------------------------------- 7. system units (README 'user-units-off', 'system-units')
system_round() {  # system_round LABEL : judge, probe, time the system units as they are now installed
    local label=$1 t
    t=$(now)
    sleep 8
    step judge_runs "$t" "system units $label"
    # systemd 257 in this container skips PrivateNetwork= (no CAP_NET_ADMIN: nspawn drops it when the
    # host network is shared); a host's PID 1 has it. Judge that one check as a container artifact.
    if journal_ --since "@$t" | grep -q 'PrivateNetwork=yes is configured, but the kernel does not support or we lack privileges'; then
        export SDRIG_NO_NETNS=1
        info "system units $label: this systemd skips PrivateNetwork= in this container (no CAP_NET_ADMIN with the host's network): not judged"
    fi
    probe "system $label" /etc/systemd/system root:root
    unset SDRIG_NO_NETNS
    ipdeny_check "system manager"
    IN systemctl stop $TIMERS; sleep 1; honcho_up
    for k in 1 2; do step measure "system $label .path" turn $N 5; N=$((N + 1)); sleep 1; done
    step measure "system $label .path" edit $E 5; E=$((E + 1))
    IN systemctl start $TIMERS
    quiet_window "system journal $label" /etc/systemd/system
    step judge_runs "$t" "system units $label, whole round"
    journal_problems "system journal $label" "$t"
    grep -h -o 'Failed to configure loopback network device.*' "$OUT/journal-system.txt" | head -1 | sed 's/^/INFO system units: /;s/$/ (PrivateNetwork=; nspawn drops CAP_NET_ADMIN when sharing the host network: a container artifact)/'
}
if [ "${SDRIG_SYSTEM:-1}" = 1 ]; then
    say "README 'user-units-off', then 'system-units': bxmem units install --system under sudo (User=kyle, kyle's paths)"
    readme_step user-units-off "the user units disabled and removed"
    left=$(U "systemctl --user list-unit-files 'bxmem-*' --no-legend" | wc -l)
    [ "$left" = 0 ] && pass "user-units-off: no bxmem unit left in kyle's manager" || fail "user-units-off: $left bxmem unit(s) left in kyle's manager"
    SC=system
    readme_step system-units "units in /etc/systemd/system, timers and .path units enabled"
    IN grep -q '^User=kyle$' /etc/systemd/system/bxmem-send.service && IN grep -q '^ExecStart=/home/kyle/.local/bin/bxmem --quiet send' /etc/systemd/system/bxmem-send.service \
        && pass "system-units: User=kyle, ExecStart= kyle's bxmem, as units install --system writes them" || fail "system-units: the installed unit has no User=kyle or not kyle's bxmem"
    system_round "as shipped (User=kyle)"
    if [ "$VARIANT" != "as shipped" ]; then  # the user units needed the fix: it must not break the system variant
        say "system units with the same drop-in: [Service] $FIX"
        for s in decide mirror send; do
            mkdir -p "$ROOT/etc/systemd/system/bxmem-$s.service.d"
            printf '[Service]\n%s\n' "$FIX" > "$ROOT/etc/systemd/system/bxmem-$s.service.d/sdrig-fix.conf"
        done
        IN systemctl daemon-reload
        system_round "with $FIX (User=kyle)"
    fi
    say "README 'system-units-off'"
    readme_step system-units-off "the system units disabled and removed"
    left=$(IN bash -c "ls /etc/systemd/system; systemctl list-units 'bxmem-*' --all --no-legend --plain" | grep -c 'bxmem-')
    IN test -e /var/lib/bxmem/units.json && fail "system-units-off: the list of installed units is still there" \
        || pass "system-units-off: the list of installed units is gone with them"
    [ "$left" = 0 ] && pass "system-units-off: no bxmem unit file or loaded unit left" \
        || fail "system-units-off: bxmem units left: $(IN bash -c "systemctl list-units 'bxmem-*' --all --no-legend --plain" | tr '\n' ' ')"
else
    readme_step user-units-off "the user units disabled and removed"
fi

# ---------------------------------------------------------------- 8. uninstall (README 'uninstall')
say "README 'uninstall'"
readme_step uninstall "pipx uninstall bxmem"
IN test -e /home/kyle/.local/bin/bxmem && fail "uninstall: ~/.local/bin/bxmem is still there" || pass "uninstall: ~/.local/bin/bxmem is gone"
IN test -e "$VENV_PY" && fail "uninstall: bxmem's pipx venv is still there" || pass "uninstall: bxmem's pipx venv is gone"
IN test -s /home/kyle/.local/share/boxmaker/memory/honcho.jsonl && IN test -f /home/kyle/.config/boxmaker/bxmem.toml \
    && pass "uninstall: the ledger and the config stay, as the README says" || fail "uninstall: the ledger or the config is gone"
U 'systemctl --user stop sdrig-brokerd' >/dev/null 2>&1
info "systemd $SYSTEMD_VERSION ($SUITE), bxmem from $CHECKOUT"
exit 0
