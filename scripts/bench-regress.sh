#!/usr/bin/env bash
# bench-regress.sh holds the network's CPU per request to the build that recorded
# scripts/bench-baseline.json. For each of four loads (2,000 requests, not streamed and
# streamed with the mock's 20 chunks, at concurrency 50 and 1) it runs
# `shareai bench --compare mock`: the same requests straight to a mock OpenAI upstream in the
# process, then through a network in the process (a coordinator and two providers on the
# openai engine, with holds, settlement and receipts as `shareai up` runs them). What the
# network added, in CPU µs per request (this process's CPU in the network run less the
# direct run's: the client's and the mock's), is what is held: more than 25% above the
# reference fails.
#
#   scripts/bench-regress.sh             # check; exit 1 when any load regressed
#   scripts/bench-regress.sh --update    # measure and record this build's figures; commit the file
#
# The reference is measured in the same run. The file names the commit whose build recorded
# its figures ("commit"); the script builds that commit (git archive, so the checkout is left
# alone) and each try runs the load through it and then through this build (--against), so
# that both meet the same machine on the same day. Cloud machines of one class ("AMD EPYC, 2
# CPUs") are of several CPU generations and loads: the baseline's build recorded 885 µs at
# c=1 on one and added 1,890 µs on another, a day later. Only where that commit is not in the clone's history (a
# shallow clone) is the load held to the file's figure for this machine class instead, as
# the file recorded it (none for this class: it says so and passes).
#
# The check holds the added CPU, not the ratio network/direct that the report shows beside
# it: the direct path's 60-180 µs are small and vary more from run to run than the network's
# 600-1,800, so a ratio would move with the client and the mock. Only the processes' own CPU
# is counted, so other programs on a shared machine slow the run but add to it only through
# the caches and the CPU's clock; each load is run up to TRIES times (3), and the try in
# which the network added the least is each build's figure: a busy machine only ever adds. A
# check stops at the first try within the reference; --update runs every try.
#
# Settings (environment): N (2000 requests per path and try), TRIES (3), BASELINE
# (scripts/bench-baseline.json), BIN (a shareai binary to use instead of building one), REF
# (a reference shareai binary to use instead of building the file's commit).
set -euo pipefail

update=()
case "${1:-}" in
--update) update=(--update-baseline) ;;
"") ;;
*)
	echo "usage: scripts/bench-regress.sh [--update]" >&2
	exit 2
	;;
esac
N=${N:-2000}
TRIES=${TRIES:-3}

cd "$(dirname "$0")/.."
BASELINE=${BASELINE:-scripts/bench-baseline.json}
if [ ${#update[@]} -gt 0 ] && [ -z "${BIN:-}" ]; then
	# The file names the commit of the build that recorded it, which a build with changes
	# has not: CI would then hold each load to the figures alone, measured on another day.
	# A file an earlier --update rewrote is about to be rewritten again.
	git checkout -- "$BASELINE" 2>/dev/null || true
	if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
		echo "bench-regress: --update needs a checkout without changes, so that the file names its commit; commit or stash these first:" >&2
		git status --short --untracked-files=no >&2
		exit 2
	fi
fi
if [ -z "${BIN:-}" ]; then
	BIN=$(mktemp -d)/shareai
	vcs=()
	# --update records the commit the binary names: stamp it even where GOFLAGS says not to.
	[ ${#update[@]} -eq 0 ] || vcs=(-buildvcs=true)
	go build "${vcs[@]}" -o "$BIN" ./cmd/shareai
fi
# The network is the one bench starts, not one the environment points at.
unset OPENAI_BASE_URL OPENAI_API_KEY

hold=(--baseline "$BASELINE")
if [ ${#update[@]} -eq 0 ]; then
	commit=$(sed -n 's/^  "commit": "\([0-9a-f]*\)",*$/\1/p' "$BASELINE")
	if [ -z "${REF:-}" ] && [ -n "$commit" ] && git cat-file -e "$commit^{commit}" 2>/dev/null; then
		src=$(mktemp -d)
		git archive "$commit" | tar -x -C "$src"
		echo "== building the reference, commit $commit, that recorded $BASELINE"
		(cd "$src" && go build -o "$src/shareai-ref" ./cmd/shareai)
		REF=$src/shareai-ref
	fi
	if [ -n "${REF:-}" ]; then
		hold=(--against "$REF")
	else
		echo "bench-regress: no reference build (the file names ${commit:-no commit}, not in this clone's history): holding the figures to the file's, as recorded" >&2
	fi
fi

regressed=()
for stream in false true; do
	for c in 50 1; do
		load="stream=$stream c=$c n=$N"
		echo "== $load"
		if ! "$BIN" bench --compare mock -n "$N" -c "$c" --stream="$stream" --tries "$TRIES" "${hold[@]}" "${update[@]}"; then
			regressed+=("$load")
		fi
		echo
	done
done

if [ ${#regressed[@]} -gt 0 ]; then
	echo "bench-regress: FAILED for ${regressed[*]}: the network's CPU per request is more than 25% above the reference's (${hold[*]}; or bench failed: see above)." >&2
	echo "If the cost is wanted, record the new figures with scripts/bench-regress.sh --update and commit $BASELINE." >&2
	exit 1
fi
if [ ${#update[@]} -gt 0 ]; then
	echo "bench-regress: recorded this machine's figures in $BASELINE; commit it." >&2
else
	echo "bench-regress: ok" >&2
fi
