#!/bin/sh
# One warden callback with nothing but POSIX sh and curl (docs/rules/workflow.md W9),
# for CI systems where `warden callback` cannot be installed (GitLab CI,
# Buildkite, Jenkins). The same contract as `warden callback`:
#
#   callback.sh step vm_starting|ssh_configuring|tls_provisioning|app_deploying
#   callback.sh deployed CONNECTION.json   (the callback's "connection" object)
#   callback.sh failed "REASON"
#   callback.sh destroyed | null | rebooted
#
# Environment: WARDEN_CALLBACK_URL, WARDEN_MARQUEE_ID, WARDEN_GENERATION,
# WARDEN_CALLBACK_TOKEN (the run's credential: passed to curl on its stdin,
# never on a command line), WARDEN_RUN_ID (the CI's run: GitLab's
# $CI_PIPELINE_ID, Buildkite's $BUILDKITE_BUILD_ID), WARDEN_RETRY_FOR
# (seconds to keep retrying, default 120).
#
# Every try of one callback carries one delivery id (Webhook-Id), derived
# from the run, the verb and the step, so warden applies it once (M20).
# Network errors, 429, 502, 503 and 504 are retried with doubling waits (1 s
# to 30 s, plus jitter, Retry-After honoured); any other answer is final.
# Exit status: 0 accepted; 3 stale or locked (this run is obsolete: stop
# quietly); 4 refused; 5 no answer in time; 2 usage.
set -eu

verb=${1:-}
arg=${2:-}
usage() { echo "callback.sh: $1" >&2; exit 2; }
[ -n "${WARDEN_CALLBACK_URL:-}" ] || usage "WARDEN_CALLBACK_URL is not set"
[ -n "${WARDEN_CALLBACK_TOKEN:-}" ] || usage "WARDEN_CALLBACK_TOKEN is not set"
[ -n "${WARDEN_RUN_ID:-}" ] || usage "WARDEN_RUN_ID is not set (your CI's pipeline or build id)"
case ${WARDEN_MARQUEE_ID:-} in '' | *[!a-z0-9-]*) usage "WARDEN_MARQUEE_ID must be a marquee id" ;; esac
case ${WARDEN_GENERATION:-} in '' | *[!0-9]*) usage "WARDEN_GENERATION must be a number" ;; esac

extra=""
case $verb in
step)
	case $arg in vm_starting | ssh_configuring | tls_provisioning | app_deploying) ;; *) usage "step: unknown step '$arg'" ;; esac
	extra=",\"step\":\"$arg\""
	;;
deployed)
	[ -f "$arg" ] || usage "deployed needs the connection JSON file"
	extra=",\"connection\":$(cat "$arg")"
	;;
failed)
	# The reason as a JSON string: backslashes and quotes escaped, control
	# characters dropped, at most 2000 bytes.
	reason=$(printf '%s' "$arg" | tr -d '\000-\037' | head -c 2000 | sed 's/\\/\\\\/g; s/"/\\"/g')
	extra=",\"reason\":\"$reason\""
	;;
destroyed | null | rebooted) ;;
*) usage "unknown verb '$verb'" ;;
esac

# One id for every try: the run, the verb, the step (printable, bounded).
run=$(printf '%s' "$WARDEN_RUN_ID" | tr -c 'A-Za-z0-9._-' '-' | cut -c1-100)
delivery="ci-$run-$verb${arg:+-$(printf '%s' "$arg" | tr -c 'a-z0-9_' '-' | cut -c1-40)}"
[ "$verb" = deployed ] && delivery="ci-$run-deployed"
[ "$verb" = failed ] && delivery="ci-$run-failed"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '{"marquee_id":"%s","verb":"%s","generation":%s%s}' "$WARDEN_MARQUEE_ID" "$verb" "$WARDEN_GENERATION" "$extra" >"$tmp/body"

deadline=$(($(date +%s) + ${WARDEN_RETRY_FOR:-120}))
wait=1
while :; do
	code=$(printf 'header = "Authorization: Bearer %s"\n' "$WARDEN_CALLBACK_TOKEN" |
		curl --config - -sS --max-time 30 -o "$tmp/answer" -D "$tmp/headers" -w '%{http_code}' \
			-H 'Content-Type: application/json' -H "Webhook-Id: $delivery" \
			--data-binary "@$tmp/body" "$WARDEN_CALLBACK_URL") || code=000
	case $code in
	200)
		cat "$tmp/answer"
		echo
		if grep -q '"result":"\(stale\|locked\)"' "$tmp/answer"; then exit 3; fi
		exit 0
		;;
	000 | 429 | 502 | 503 | 504)
		retry_after=$(tr -d '\r' <"$tmp/headers" 2>/dev/null | sed -n 's/^[Rr]etry-[Aa]fter: *\([0-9][0-9]*\)$/\1/p' | head -n1)
		pause=$wait
		if [ -n "$retry_after" ] && [ "$retry_after" -gt "$pause" ]; then pause=$retry_after; fi
		jitter=$(awk 'BEGIN { srand(); print int(rand() * 2) }')
		pause=$((pause + jitter))
		if [ $(($(date +%s) + pause)) -gt "$deadline" ]; then
			echo "callback.sh: no answer within ${WARDEN_RETRY_FOR:-120}s (last: $code)" >&2
			exit 5
		fi
		echo "callback.sh: $code; trying again in ${pause}s" >&2
		sleep "$pause"
		wait=$((wait * 2))
		[ "$wait" -gt 30 ] && wait=30
		;;
	*)
		cat "$tmp/answer" >&2
		echo >&2
		echo "callback.sh: refused with $code; not retried" >&2
		exit 4
		;;
	esac
done
