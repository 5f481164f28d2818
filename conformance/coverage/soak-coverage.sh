#!/usr/bin/env bash
# Coverage of the replication core (impl/src/replication/) under the
# concurrent driver's soak: builds highwater-soak instrumented for coverage
# into its own target directory, runs a fixed set of soaks (spec/coverage.md
# lists them and says why each is there), merges their profiles and reports
# per file, with every region never executed and every branch never taken
# listed by function. Issue 22, item 6; spec/coverage.md has the figures.
set -euo pipefail

usage() {
    cat <<'EOF'
Usage: conformance/coverage/soak-coverage.sh [OPTIONS] OUTDIR

Builds highwater-soak with coverage instrumentation into
target/coverage/<mode> (never touching target/release), runs a fixed set of
soaks of the concurrent driver (every rule set, full rate and paced,
--strand, --overlap-unclean), merges their profiles and writes into OUTDIR:

  summary.txt                 commit, toolchain, every soak with its time and exit status
  report-replication.txt      llvm-cov report for impl/src/replication/ (also printed)
  report-storage.txt          the same for impl/src/storage/
  report-concurrent.txt       the same for impl/src/cluster/concurrent/ (the driver)
  unreached-replication.txt   every region never executed and every branch side
                              never taken in impl/src/replication/, by file and function
  unreached-storage.txt       the same for impl/src/storage/
  unreached-concurrent.txt    the same for impl/src/cluster/concurrent/
  checks.txt                  how often each check issue 22 names was reached (partition-epoch
                              checks, diverging and stale-epoch answers, held fetches, ENOSPC,
                              index and checkpoint writes), and other rules
  show-<area>.txt             the three areas annotated with line counts and branches
  soak.profdata               the merged profile (for llvm-cov show/report of your own)
  logs/<soak>.log             each soak's output
  misfits/                    traces any soak kept (a misfit, a partition that did not heal)

Options:
  --regions-only   Build with the stable toolchain and -C instrument-coverage only
                   (regions, lines, functions). The default builds with nightly and
                   -Zcoverage-options=branch as well, which adds branch counts.
  --quick          One seed of each soak instead of the fixed set (a smoke test; its
                   figures are not the ones spec/coverage.md quotes).
  --keep-profraw   Keep the raw profiles (OUTDIR/profraw) after merging.
  -h, --help       This message.

Environment:
  HW_COV_STABLE    the stable toolchain (default: stable)
  HW_COV_NIGHTLY   the nightly toolchain (default: nightly)

Needs rustup with the llvm-tools component (llvm-profdata, llvm-cov) for a
toolchain whose LLVM major version is the build toolchain's, and python3.
The soaks take about 3 minutes on a 2-core machine, the instrumented build
about 5 more the first time; run it under `nice` on a shared machine. A soak that exits 1 (a trace that does not fit, a
partition that did not heal, a loss under today's rules) is reported in
summary.txt and does not stop the run; one that cannot run at all (exit 2,
a crash) does.
EOF
}

die() {
    echo "soak-coverage: $*" >&2
    exit 2
}

mode=branch
quick=0
keep_profraw=0
out=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        -h | --help)
            usage
            exit 0
            ;;
        --regions-only) mode=regions ;;
        --quick) quick=1 ;;
        --keep-profraw) keep_profraw=1 ;;
        -*)
            echo "soak-coverage: unknown option $1" >&2
            usage >&2
            exit 2
            ;;
        *)
            [[ -z "$out" ]] || die "one OUTDIR only (got '$out' and '$1'); see --help"
            out="$1"
            ;;
    esac
    shift
done
[[ -n "$out" ]] || {
    usage >&2
    echo >&2
    die "OUTDIR is missing"
}

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
[[ -f "$repo/Cargo.toml" && -d "$repo/impl/src/replication" ]] ||
    die "cannot find the workspace (looked in $repo)"

# --- Tools -------------------------------------------------------------------

command -v rustup >/dev/null 2>&1 || die "rustup is missing: install it from https://rustup.rs"
command -v cargo >/dev/null 2>&1 || die "cargo is missing: install a Rust toolchain with rustup"
command -v python3 >/dev/null 2>&1 || die "python3 is missing (it lists the unreached regions): apt-get install python3"

stable="${HW_COV_STABLE:-stable}"
nightly="${HW_COV_NIGHTLY:-nightly}"
if [[ $mode == branch ]]; then
    build_tc="$nightly"
    rustflags="-C instrument-coverage -Zcoverage-options=branch"
else
    build_tc="$stable"
    rustflags="-C instrument-coverage"
fi
rustc +"$build_tc" -V >/dev/null 2>&1 || {
    if [[ $mode == branch ]]; then
        die "toolchain '$build_tc' is not installed: rustup toolchain install $build_tc (branch coverage needs nightly's -Zcoverage-options=branch), or run with --regions-only"
    else
        die "toolchain '$build_tc' is not installed: rustup toolchain install $build_tc"
    fi
}

llvm_major() { rustc +"$1" -vV | sed -n 's/^LLVM version: \([0-9]*\).*/\1/p'; }
tools_of() {
    local sysroot host
    sysroot="$(rustc +"$1" --print sysroot)"
    host="$(rustc +"$1" -vV | sed -n 's/^host: //p')"
    echo "$sysroot/lib/rustlib/$host/bin"
}

# llvm-profdata and llvm-cov: the build toolchain's own, else (nightly has
# no llvm-tools here) the stable toolchain's when its LLVM is the same major
# version (the raw profile format follows LLVM's).
tools=""
for tc in "$build_tc" "$stable"; do
    rustc +"$tc" -V >/dev/null 2>&1 || continue
    d="$(tools_of "$tc")"
    if [[ -x "$d/llvm-profdata" && -x "$d/llvm-cov" ]]; then
        if [[ "$(llvm_major "$tc")" == "$(llvm_major "$build_tc")" ]]; then
            tools="$d"
            tools_tc="$tc"
            break
        fi
    fi
done
[[ -n "$tools" ]] ||
    die "llvm-profdata and llvm-cov are missing for LLVM $(llvm_major "$build_tc"): rustup component add llvm-tools --toolchain $build_tc"
profdata="$tools/llvm-profdata"
llvmcov="$tools/llvm-cov"

# --- Output ------------------------------------------------------------------

mkdir -p "$out" || die "cannot create $out"
out="$(cd "$out" && pwd)"
rm -rf "$out/profraw" "$out/logs" "$out/misfits"
mkdir -p "$out/profraw" "$out/logs" "$out/misfits"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

commit="$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)"
dirty=""
if ! git -C "$repo" diff --quiet HEAD -- impl conformance 2>/dev/null; then
    dirty=" (impl/ or conformance/ has uncommitted changes)"
fi
summary="$out/summary.txt"
{
    echo "highwater soak coverage"
    echo "date:      $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "commit:    $commit$dirty"
    echo "build:     cargo +$build_tc ($(rustc +"$build_tc" -V)), RUSTFLAGS=\"$rustflags\""
    echo "tools:     llvm-profdata, llvm-cov of $tools_tc ($("$llvmcov" --version | sed -n 's/.*LLVM version //p' | head -1))"
    echo "machine:   $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
    echo
} >"$summary"

# --- Build -------------------------------------------------------------------

target="$repo/target/coverage/$mode"
bin="$target/release/highwater-soak"
echo "== building highwater-soak with coverage ($mode) into ${target#"$repo"/}"
# Build scripts are instrumented too: their profiles go to the scratch dir.
build_started=$SECONDS
if ! (cd "$repo" && LLVM_PROFILE_FILE="$scratch/build-%p-%m.profraw" \
    CARGO_TARGET_DIR="$target" RUSTFLAGS="$rustflags${RUSTFLAGS:+ $RUSTFLAGS}" \
    cargo +"$build_tc" build --release --locked -p highwater-conformance --bin highwater-soak); then
    die "the instrumented build failed (see above)"
fi
echo "build:     $((SECONDS - build_started)) s" >>"$summary"
[[ -x "$bin" ]] || die "the build left no $bin"

# --- The soaks ---------------------------------------------------------------

# name | highwater-soak arguments (spec/coverage.md says what each is for).
# Seeds are chosen per rule set; every soak runs its seeds for 2 s each.
soaks=(
    "today|--rules today --seeds 4"
    "today-paced|--rules today --seeds 3 --paced"
    "historical|--rules acks1,min-isr1,unclean,hw-truncation --seeds 2"
    "unfenced|--rules unfenced --seeds 8"
    "truncation-paced|--rules hw-truncation,unfenced --seeds 4 --paced"
    "strand|--rules today,acks1,min-isr1,unclean,hw-truncation,unfenced --seeds 1 --strand"
    "strand-paced|--rules today,unfenced --seeds 1 --strand --paced"
    "overlap-unclean|--rules today,unclean,unfenced --seeds 2 --overlap-unclean"
)
seconds=2

{
    echo
    echo "soaks (each seed runs $seconds s, then settles and is validated):"
} >>"$summary"
soak_started=$SECONDS
for s in "${soaks[@]}"; do
    name="${s%%|*}"
    args="${s#*|}"
    if [[ $quick == 1 ]]; then
        args="$(sed -E 's/--seeds [0-9]+/--seeds 1/' <<<"$args")"
    fi
    log="$out/logs/$name.log"
    echo "== soak $name: highwater-soak $args --seconds $seconds"
    started=$SECONDS
    status=0
    # shellcheck disable=SC2086 # the arguments are words
    LLVM_PROFILE_FILE="$out/profraw/$name-%p-%m.profraw" \
        "$bin" $args --seconds "$seconds" --keep-traces "$out/misfits" >"$log" 2>&1 || status=$?
    took=$((SECONDS - started))
    verdict=ok
    case $status in
        0) ;;
        1) verdict="exit 1: a finding (misfit, unhealed partition or loss under today's rules; see logs/$name.log)" ;;
        *)
            echo "    exit $status after $took s; the last lines of $log:" >&2
            tail -n 20 "$log" >&2
            die "soak $name could not run (exit $status)"
            ;;
    esac
    echo "    $took s, $verdict"
    printf '  %-18s %4d s  %s\n      highwater-soak %s --seconds %s\n' \
        "$name" "$took" "$verdict" "$args" "$seconds" >>"$summary"
done
echo "soaks:     $((SECONDS - soak_started)) s in all" >>"$summary"

# --- Merge and report --------------------------------------------------------

shopt -s nullglob
raws=("$out"/profraw/*.profraw)
shopt -u nullglob
[[ ${#raws[@]} -gt 0 ]] || die "no raw profiles were written to $out/profraw"
"$profdata" merge -sparse "${raws[@]}" -o "$out/soak.profdata" ||
    die "llvm-profdata could not merge the profiles"
[[ $keep_profraw == 1 ]] || rm -rf "$out/profraw"

cov_args=(-instr-profile="$out/soak.profdata" "$bin")
for area in replication storage cluster/concurrent; do
    name="${area##*/}"
    src="$repo/impl/src/$area/"
    "$llvmcov" report "${cov_args[@]}" "$src" >"$out/report-$name.txt" ||
        die "llvm-cov report failed for $area"
    "$llvmcov" export -format=text "${cov_args[@]}" "$src" >"$scratch/$name.json" ||
        die "llvm-cov export failed for $area"
done
for area in replication storage cluster/concurrent; do
    name="${area##*/}"
    "$llvmcov" show "${cov_args[@]}" -show-line-counts-or-regions -show-branches=count \
        -show-instantiations=false "$repo/impl/src/$area/" >"$out/show-$name.txt" ||
        die "llvm-cov show failed for $area"
done

# The unreached regions and branches, by file and function. Regions are
# merged over a generic function's instantiations (a region counts as
# reached if any instantiation reached it); a region inside one already
# listed is not listed again. Functions are named from the source (the
# `fn` line a function's first region starts on; a closure by the function
# around it), so no demangler is needed.
unreached() {
    python3 - "$1" "$2" "$3" <<'PY'
import bisect, json, re, sys
from collections import defaultdict

export, root, area = sys.argv[1], sys.argv[2], sys.argv[3]
data = json.load(open(export))["data"][0]
sources = {}

def lines_of(path):
    if path not in sources:
        with open(path, encoding="utf-8") as f:
            sources[path] = f.read().split("\n")
    return sources[path]

def indent(s):
    return len(s) - len(s.lstrip())

FN = re.compile(r"\bfn\s+([A-Za-z_][A-Za-z0-9_]*)")

def owner_of(path, at):
    """The impl or trait the `fn` on line index `at` is in, if any."""
    src = lines_of(path)
    ind = indent(src[at])
    k = at
    while k > 0 and ind > 0:
        k -= 1
        t = src[k]
        if t.strip() and indent(t) < ind:
            ind = indent(t)
            im = re.match(r"\s*impl\b(?:<[^>]*>)?\s*(?:[\w:<>, ]+\s+for\s+)?([A-Za-z_]\w*)", t)
            tm = re.match(r"\s*(?:pub(?:\([^)]*\))?\s+)?trait\s+([A-Za-z_]\w*)", t)
            if im or tm:
                return (im or tm).group(1)
    return None

def fn_name(path, line):
    """`Type::name` of the `fn` on `line`, or None when the line has none
    (a closure's body starts there)."""
    m = FN.search(lines_of(path)[line - 1])
    if m is None:
        return None
    owner = owner_of(path, line - 1)
    return f"{owner}::{m.group(1)}" if owner else m.group(1)

# Every function record (a generic function has one per instantiation, a
# closure one of its own), keyed by its body (its first region): whether it
# ever ran, and its regions and branches, merged over instantiations.
bodies = {}        # body key -> max call count
extent = {}        # body key -> (path, l1, c1, l2, c2) of the whole function
region_count = {}  # region key -> max count
region_body = {}   # region key -> body key
branches = {}      # branch key -> (max true count, max false count)
for f in data["functions"]:
    regions = [r for r in f["regions"] if r[7] == 0 and r[5] == 0]
    if not regions or not f["filenames"][0].startswith(root):
        continue
    path = f["filenames"][0]
    b = regions[0]
    body = (path, b[0], b[1], b[2], b[3])
    bodies[body] = max(bodies.get(body, 0), f["count"])
    # Its extent: from its first region to the end of its last.
    end = max((r[2], r[3]) for r in regions)
    extent[body] = (path, b[0], b[1], end[0], end[1])
    for r in regions:
        k = (path, r[0], r[1], r[2], r[3])
        region_count[k] = max(region_count.get(k, 0), r[4])
        region_body.setdefault(k, body)
    for br in f.get("branches", []):
        if br[6] != 0:
            continue
        k = (path, br[0], br[1], br[2], br[3])
        t, e = branches.get(k, (0, 0))
        branches[k] = (max(t, br[4]), max(e, br[5]))
        region_body.setdefault(("branch",) + k, body)

def contains(outer, inner):
    return outer[0] == inner[0] and (outer[1], outer[2]) <= (inner[1], inner[2]) and (inner[3], inner[4]) <= (outer[3], outer[4])

# Names: a function's from its `fn` line; a closure's from the smallest
# function body around it.
names = {}
for body in bodies:
    names[body] = fn_name(body[0], body[1])
for body in bodies:
    if names[body] is None:
        around = [o for o in bodies
                  if o != body and o[0] == body[0] and names[o] and contains(extent[o], extent[body])]
        around.sort(key=lambda o: (extent[o][3] - extent[o][1], extent[o][4]))
        names[body] = (names[around[0]] if around else f"line {body[1]}") + "::{closure}"

def snippet(path, l1, c1):
    t = lines_of(path)[l1 - 1][c1 - 1:].strip()
    return (t[:60] + "...") if len(t) > 60 else t

# Reached regions' starts, per file: a span of unreached regions is merged
# only where no reached region starts between its parts.
reached_starts = defaultdict(list)
for k, c in region_count.items():
    if c > 0:
        reached_starts[k[0]].append((k[1], k[2]))
for v in reached_starts.values():
    v.sort()

def reached_between(path, after, before):
    v = reached_starts[path]
    i = bisect.bisect_left(v, after)
    return i < len(v) and v[i] < before

zero = sorted(k for k, c in region_count.items() if c == 0)
spans = defaultdict(list)  # body -> [[path, l1, c1, l2, c2], ...]
for k in zero:
    body = region_body[k]
    if bodies[body] == 0:
        continue
    mine = spans[body]
    if mine and contains(mine[-1], k):
        continue
    if mine and not reached_between(k[0], (mine[-1][3], mine[-1][4]), (k[1], k[2])):
        last = mine[-1]
        if (k[3], k[4]) > (last[3], last[4]):
            last[3], last[4] = k[3], k[4]
        continue
    mine.append(list(k))

items = defaultdict(list)
for body, mine in spans.items():
    for k in mine:
        items[body].append(("not executed", tuple(k)))
for k, (t, e) in sorted(branches.items()):
    if t > 0 and e > 0:
        continue
    body = region_body[("branch",) + k]
    if bodies[body] == 0 or any(contains(tuple(o), k) for o in spans[body]):
        continue
    side = "never evaluated" if t == 0 and e == 0 else ("never true" if t == 0 else "never false")
    items[body].append((f"branch {side}", k))

n_zero = len(zero)
n_branch = sum(1 for t, e in branches.values() for x in (t, e) if x == 0)
print(f"# impl/src/{area}/: what the soak never reached, by file and function.")
print(f"# {n_zero} of {len(region_count)} code regions never executed; {n_branch} of")
print(f"# {2 * len(branches)} branch outcomes never taken. Regions are merged over a")
print(f"# generic function's instantiations; unreached regions with no reached one")
print(f"# between them are shown as one span (line:col-line:col, then the source")
print(f"# where it starts); a branch is listed when one of its outcomes (true,")
print(f"# false) never happened, unless it lies in a span already listed.")
files = sorted({b[0] for b in bodies})
for path in files:
    rel = path[len(root):]
    mine = sorted((b for b in bodies if b[0] == path), key=lambda b: (b[1], b[2]))
    never = [b for b in mine if bodies[b] == 0]
    lines = []
    print_ = lines.append
    for b in mine:
        if bodies[b] == 0:
            # A closure inside a function never called says nothing more.
            if any(o != b and contains(extent[o], extent[b]) for o in never):
                continue
            # Nor one inside a span of its function already listed.
            if any(contains(tuple(sp), extent[b]) for v in spans.values() for sp in v):
                continue
            print_(f"  {names[b]} (line {b[1]}): never called")
        elif items[b]:
            print_(f"  {names[b]} (line {b[1]}):")
            for what, k in sorted(items[b], key=lambda x: (x[1][1], x[1][2])):
                loc = f"{k[1]}:{k[2]}-{k[3]}:{k[4]}"
                print_(f"    {loc:<16} {what:<22} {snippet(path, k[1], k[2])}")
    if lines:
        print()
        print(f"== {rel}")
        print("\n".join(lines))
PY
}
for area in replication storage cluster/concurrent; do
    name="${area##*/}"
    unreached "$scratch/$name.json" "$repo/impl/src/$area/" "$area" >"$out/unreached-$name.txt" ||
        die "listing the unreached regions of $area failed"
done

# The checks issue 22 names, and the other rules worth a figure: how often
# each was reached. Each is found by text (file, the function it is in, the
# line), so that it survives line moves; one not found says so.
checks() {
    python3 - "$repo/impl/src/" "$out" <<'PY'
import re, sys
root, out = sys.argv[1], sys.argv[2]
CHECKS = [
    # (heading, name, file under impl/src, anchor (the fn), needle (the line))
    ("Partition-epoch and ISR-update checks (leader.rs)", None, None, None, None),
    ("", "IsrUpdate no newer than the leader's ISR ignored (partition epoch)", "replication/leader.rs", "fn on_isr_update", "partition_epoch <= l.partition_epoch"),
    ("", "IsrUpdate ignored while the leader's AlterPartition is in flight", "replication/leader.rs", "fn on_isr_update", "if l.pending_isr.is_some()"),
    ("", "IsrUpdate of another leader epoch ignored", "replication/leader.rs", "fn on_isr_update", "if self.leader_epoch != Some(leader_epoch)"),
    ("", "IsrUpdate whose ISR leaves the leader out ignored", "replication/leader.rs", "fn on_isr_update", "|| !isr.contains(&self.id)"),
    ("", "AlterPartition answer of another epoch or change ignored", "replication/leader.rs", "fn on_alter_partition_response", "if epoch != Some(resp.leader_epoch)"),
    ("", "AlterPartition answer taken (Ok: the controller's ISR)", "replication/leader.rs", "fn on_alter_partition_response", "if let Ok(isr) = &resp.result"),
    ("", "controller: AlterPartition from another leader or epoch fenced", "replication/controller.rs", "pub fn alter_partition", "if self.leader != Some(req.leader) || self.epoch != Some(req.leader_epoch)"),
    ("", "controller: AlterPartition naming a fenced broker refused (KIP-841)", "replication/controller.rs", "pub fn alter_partition", "if !isr.is_subset(&self.unfenced())"),
    ("Stale-epoch answers (KIP-320 fencing; late answers)", None, None, None, None),
    ("", "fetch from an older epoch: FENCED_LEADER_EPOCH", "replication/partition.rs", "fn fence(", "std::cmp::Ordering::Less =>"),
    ("", "fetch from a newer epoch: UNKNOWN_LEADER_EPOCH", "replication/partition.rs", "fn fence(", "std::cmp::Ordering::Greater =>"),
    ("", "fetch to a replica that does not lead: NOT_LEADER_OR_FOLLOWER", "replication/leader.rs", "fn on_fetch(", "let error = if !self.is_leader()"),
    ("", "fetch answer not for the fetch in flight dropped (late, other epoch)", "replication/follower.rs", "fn on_fetch_response", "if !self.answers(Phase::Fetching"),
    ("", "fetch answered with an error: follower backs off", "replication/follower.rs", "Some(_) => {", "self.fetch_answered();"),
    ("", "stale LeaderAndIsr refused", "replication/partition.rs", "fn on_leader_and_isr", "return Err(Error::StaleLeaderAndIsr"),
    ("Diverging answers (truncation on fetch, KIP-320)", None, None, None, None),
    ("", "leader answers a diverging epoch", "replication/leader.rs", "fn on_fetch(", "Ok(d) => response.diverging_epoch = Some(d)"),
    ("", "leader: last fetched epoch unknown, OFFSET_OUT_OF_RANGE", "replication/leader.rs", "fn check_last_fetched_epoch", "return Some(Err(ApiError::OffsetOutOfRange))"),
    ("", "follower takes a diverging epoch", "replication/follower.rs", "fn on_fetch_response", "if let Some(d) = resp.diverging_epoch"),
    ("", "... and cuts its log", "replication/follower.rs", "fn on_fetch_response", "if offset < leo {"),
    ("", "follower ahead of its leader: OFFSET_OUT_OF_RANGE cut", "replication/follower.rs", "fn on_fetch_response", "Some(ApiError::OffsetOutOfRange) if leo > resp.log_end_offset"),
    ("OffsetsForLeaderEpoch (KIP-101, KIP-279; rule set unfenced)", None, None, None, None),
    ("", "leader answers OffsetsForLeaderEpoch", "replication/leader.rs", "fn answer_offsets_for_leader_epoch", "let RoleState::Leader(l) = &self.role else"),
    ("", "OffsetsForLeaderEpoch fenced (KIP-320 with epoch truncation)", "replication/leader.rs", "fn answer_offsets_for_leader_epoch", "if let Some(e) = self.fence(req.current_leader_epoch)"),
    ("", "leader knows an end for the epoch (else UNDEFINED)", "replication/leader.rs", "fn answer_offsets_for_leader_epoch", "if let Some(a) = leader_end_offset("),
    ("", "answer late or unexpected, ignored", "replication/follower.rs", "fn on_offsets_for_leader_epoch_response", "if !self.answers(Phase::Truncating"),
    ("", "answer is an error: ask again", "replication/follower.rs", "fn on_offsets_for_leader_epoch_response", "if resp.error.is_some()"),
    ("", "KIP-279: another round (follower lacks the leader's epoch)", "replication/follower.rs", "fn on_offsets_for_leader_epoch_response", "TruncationStep::Continue(o) => (o, o >= leo)"),
    ("", "the exchange truncates", "replication/follower.rs", "fn on_offsets_for_leader_epoch_response", "if offset < leo {"),
    ("", "hw rule: truncate to the HW before following", "replication/partition.rs", "fn on_leader_and_isr", "let op = StorageOp::Truncate {"),
    ("Held fetches (the driver's DelayedFetch)", None, None, None, None),
    ("", "fetch at the leader's LEO answered empty (the driver holds it)", "replication/leader.rs", "fn on_fetch(", "Ready::Send(vec![self.serve_fetch(req, now, Vec::new())])"),
    ("", "driver: fetch held", "cluster/concurrent/nodes.rs", "fn serve_fetch", "self.parked"),
    ("", "driver: held fetch served again (data came, or it waited)", "cluster/concurrent/nodes.rs", "fn drive", "let served = match self.try_input(now, Input::Fetch(req.clone()))"),
    ("", "driver: held fetch of a follower that crashed since, dropped", "cluster/concurrent/nodes.rs", "fn drive", "if incarnation != self.shared.incarnation(from)"),
    ("", "driver: empty answer applied by a follower (HW only)", "replication/follower.rs", "fn on_fetch_response", "let hw = resp.high_watermark.min(self.log.log_end_offset)"),
    ("Storage failures (ENOSPC: the nemesis's full disk)", None, None, None, None),
    ("", "nemesis disk full: operation refused with ENOSPC", "cluster/concurrent/disk.rs", "fn apply", "return Err(disk_full(self.inner.path()))"),
    ("", "failed operation, the replica unchanged", "replication/replica.rs", "pub fn handle", "Err(e) => {"),
    ("", "leader append failed: KAFKA_STORAGE_ERROR to the producer", "replication/partition.rs", "fn failed(", "Pending::LeaderAppend { request_id, .. } =>"),
    ("", "fetch read failed: KAFKA_STORAGE_ERROR to the follower", "replication/partition.rs", "fn failed(", "Pending::ServeFetch(req) => {"),
    ("", "other operation failed (follower append, truncate, HW, flush, checkpoint)", "replication/partition.rs", "fn failed(", "_ => Ready::none(),"),
    ("", "DiskLog: follower append failed part way, undone", "replication/disk_log.rs", "fn apply(", "if self.log.log_end_offset() > leo"),
    ("", "DiskLog: HW checkpoint write failed, HW set back", "replication/disk_log.rs", "fn apply(", "if let Err(e) = self.checkpoint_hw()"),
    ("", "DiskLog: checkpoint owed after a failed write, paid first", "replication/disk_log.rs", "fn pay_checkpoint_debt", "if self.checkpoint_owed"),
    ("Checkpoint and index writes", None, None, None, None),
    ("", "HW checkpoint (Tick::CheckpointHw, interval policy)", "replication/partition.rs", "fn on_tick", "self.persist(StorageOp::WriteCheckpoints"),
    ("", "HW checkpointed with each change (EveryChange policy)", "replication/disk_log.rs", "fn apply(", "if checkpoint {"),
    ("", "flush, then the recovery-point checkpoint", "replication/disk_log.rs", "fn apply(", "if self.log.recovery_point() != before"),
    ("", "truncation rewrites the checkpoints", "replication/disk_log.rs", "fn apply(", "self.checkpoint_or_owe()?;"),
    ("", "checkpoint file written (atomically)", "storage/checkpoint.rs", "pub fn write_atomically", "pub fn write_atomically"),
    ("", "leader-epoch-checkpoint written", "storage/checkpoint.rs", "pub fn write_epochs", "pub fn write_epochs"),
    ("", "offset and time index entries added (every index.interval.bytes)", "storage/segment.rs", "fn index_batch", "self.offset_index.append(h.last_offset()"),
    ("", "index files written", "storage/segment.rs", "fn write_indexes", "fn write_indexes"),
    ("", "segment rolled (segment full, index full)", "storage/log.rs", "fn maybe_roll", "if must_roll {"),
    ("Leader rules", None, None, None, None),
    ("", "ELR: the HW held while |ISR| < min.insync.replicas", "replication/leader.rs", "pub fn advanced_hw", "if self.config.elr && l.isr.len() < self.config.min_insync_replicas"),
    ("", "acks=all refused NOT_ENOUGH_REPLICAS", "replication/leader.rs", "fn on_produce", "return refuse(ApiError::NotEnoughReplicas)"),
    ("", "acks=all answered NOT_ENOUGH_REPLICAS_AFTER_APPEND", "replication/leader.rs", "fn hw_advanced", "Err(ApiError::NotEnoughReplicasAfterAppend)"),
    ("", "KIP-903: a crashed follower's last fetch marked stale", "replication/leader.rs", "fn on_peer_crashed", "v.stale_fetch = true"),
    ("", "ISR join: caught up, fetch not stale, epoch start reached", "replication/leader.rs", "pub fn is_caught_up_for_isr", "leo >= hw && !v.stale_fetch && epoch_ok"),
    ("", "controller: a leader elected", "replication/controller.rs", "pub fn elect_leader", "let req = self.apply(outcome)"),
    ("", "controller: a last-known-leader election possible (probed by candidate())", "replication/controller.rs", "ElectionType::Online | ElectionType::Unclean =>", "if let Some(r) = pick(Election::LastKnownLeader, &lke)"),
    ("", "controller: an unclean election possible (probed by candidate())", "replication/controller.rs", "ElectionType::Online | ElectionType::Unclean =>", "if let Some(r) = pick(Election::Unclean, &acceptable)"),
]

def parse(show):
    """file -> list of (line, count, source, [(true, false), ...])"""
    files, cur = {}, None
    for raw in open(show, encoding="utf-8", errors="replace"):
        raw = raw.rstrip("\n")
        if raw.startswith("/") and raw.endswith(":"):
            cur = files.setdefault(raw[:-1], [])
            continue
        if cur is None:
            continue
        m = re.match(r"^\s*(\d+)\|\s*([0-9.]+[kMGE]?)?\|(.*)$", raw)
        if m:
            cur.append([int(m.group(1)), m.group(2) or "", m.group(3), []])
            continue
        b = re.match(r"^\s*\|\s*Branch \((\d+):(\d+)\): \[True: ([0-9.]+[kMGE]?), False: ([0-9.]+[kMGE]?)\]", raw)
        if b and cur:
            line = int(b.group(1))
            for row in reversed(cur):
                if row[0] == line:
                    row[3].append((int(b.group(2)), b.group(3), b.group(4)))
                    break
    return files

shows = {}
for area in ("replication", "storage", "concurrent"):
    shows.update(parse(f"{out}/show-{area}.txt"))

print("# The checks named by issue 22 (item 6) and other rules: how often the soak")
print("# reached each (execution count of the line; a branch as true/false counts;")
print("# llvm-cov abbreviates: 9.3k; 0/0: the condition was never evaluated). 0 means")
print("# never reached: spec/coverage.md says why.")
for heading, name, rel, anchor, needle in CHECKS:
    if name is None:
        print(f"\n== {heading}")
        continue
    rows = shows.get(root + rel)
    found = None
    if rows:
        start = next((i for i, r in enumerate(rows) if anchor in r[2]), None)
        if start is not None:
            found = next((r for r in rows[start:] if needle in r[2]), None)
    if found is None:
        print(f"  {name}: not found in {rel} (the code changed: update the check)")
        continue
    line, count, _, brs = found
    where = f"{rel.split('/')[-1]}:{line}"
    if brs:
        # One condition per column (a || b has two); a generic function
        # repeats each per instantiation.
        cols = sorted({b[0] for b in brs})
        parts = []
        for c in cols:
            tf = ", ".join(f"{b[1]}/{b[2]}" for b in brs if b[0] == c)
            parts.append(tf if len(cols) == 1 else f"col {c}: {tf}")
        what = "true/false " + "; ".join(parts)
    else:
        what = f"{count or '-'} times"
    print(f"  {name:<72} {where:<18} {what}")
PY
}
checks >"$out/checks.txt" || die "listing the named checks failed"

{
    echo
    echo "impl/src/replication/ (llvm-cov report):"
    cat "$out/report-replication.txt"
    echo
    echo "impl/src/storage/ (llvm-cov report, TOTAL):"
    grep '^TOTAL' "$out/report-storage.txt"
    echo "impl/src/cluster/concurrent/ (llvm-cov report, TOTAL):"
    grep '^TOTAL' "$out/report-concurrent.txt"
    echo
    cat "$out/checks.txt"
} >>"$summary"

echo
echo "== impl/src/replication/ under the soak ($mode coverage, commit $commit$dirty)"
cat "$out/report-replication.txt"
echo
echo "== impl/src/storage/ (TOTAL)"
grep '^TOTAL' "$out/report-storage.txt"
echo "== impl/src/cluster/concurrent/ (TOTAL)"
grep '^TOTAL' "$out/report-concurrent.txt"
echo
cat "$out/checks.txt"
echo
echo "Never executed, by function: $out/unreached-replication.txt (storage, concurrent: unreached-*.txt)"
echo "Summary: $summary"
