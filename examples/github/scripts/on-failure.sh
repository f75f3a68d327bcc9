#!/bin/sh
# Reports a failed run to warden (docs/rules/workflow.md W4): the workflow's
# `if: failure()` step, and the local runner after provision.sh failed. The
# reason names the stage provision.sh was in; logs stay with the run.
set -u
warden=${WARDEN_BIN:-warden}
work=${WARDEN_TF_WORK:-${RUNNER_TEMP:-/tmp}/warden-tf}/${WARDEN_MARQUEE_ID:-unknown}
stage="an unknown step"
if [ -f "$work/stage" ]; then
	stage=$(head -c 200 "$work/stage")
fi
reason="workflow failed during $stage"
if [ -n "${GITHUB_RUN_ID:-}" ]; then
	reason="$reason (run ${GITHUB_SERVER_URL:-https://github.com}/${GITHUB_REPOSITORY:-}/actions/runs/$GITHUB_RUN_ID)"
fi
"$warden" callback --verb failed --reason "$reason"
rc=$?
# An obsolete run's failure is nobody's business: warden answered stale.
[ "$rc" -eq 3 ] && rc=0
exit "$rc"
