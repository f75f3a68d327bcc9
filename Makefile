# warden: `make run` starts the supervisor on the embedded default (Pebble in
# ./data, the example workflow standing in for GitHub); `make test` runs the
# whole suite. Only Go and the module proxy are needed.

GO           ?= go
STATICCHECK  := honnef.co/go/tools/cmd/staticcheck@v0.8.2
LISTEN       ?= 127.0.0.1:8080
DATA         ?= ./data
# Development tokens for `make run` only; set your own in the environment.
WARDEN_CALLBACK_TOKEN ?= dev-callback-token
WARDEN_OPERATOR_TOKEN ?= dev-operator-token
WARDEN_PREVIEW_DIR ?= $(DATA)/preview
export WARDEN_CALLBACK_TOKEN WARDEN_OPERATOR_TOKEN WARDEN_PREVIEW_DIR

# With terraform on the PATH, `make run`'s dispatches run the GitHub
# workflow's own scripts (examples/github/scripts: real Terraform on the
# offline examples/terraform/local, `warden callback` at each step); without
# it, the built-in example workflow calls back the same way. `make run`
# says which when it starts.
TERRAFORM := $(shell command -v terraform 2>/dev/null)
ifneq ($(TERRAFORM),)
RUN_WORKFLOW := the workflow scripts in examples/github/scripts, with $(TERRAFORM) on examples/terraform/local
export WARDEN_EXAMPLE_SCRIPTS := $(CURDIR)/examples/github/scripts
export WARDEN_BIN := $(CURDIR)/bin/warden
export WARDEN_TF_WORK := $(abspath $(DATA))/terraform
else
RUN_WORKFLOW := the built-in example workflow (terraform is not on the PATH)
endif

# docs/reference/, written from the code (O21); make test fails when it is
# not what the code says.
reference:
	$(GO) test ./cmd/warden -run 'TestO21TheReferenceIsWhatTheCodeSays' -count=1 -update-reference

.PHONY: reference dist image build test testbin check lint fmtcheck run previews previews-clean cluster cluster-etcd cluster-crash bench crash sim fuzz clean install-check screenshots

# Every binary the Makefile builds says which warden it is (warden
# version, the ready line, verify and backup manifests): the version from
# git describe and the commit, "+modified" when tracked files had changes.
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)$(shell git diff --quiet HEAD 2>/dev/null || echo +modified)
STAMP   = -ldflags "-X github.com/wardenhq/warden/cmd/internal/buildinfo.version=$(VERSION) -X github.com/wardenhq/warden/cmd/internal/buildinfo.commit=$(COMMIT)"

build:
	$(GO) build $(STAMP) -o bin/warden ./cmd/warden
	$(GO) build -o bin/example-workflow ./examples/workflow
	$(GO) build -o bin/example-preview ./examples/preview

# Release artifacts (D3, docs/guides/service.md): static
# binaries for linux/amd64 and linux/arm64, SHA256SUMS and an SPDX SBOM in
# $(DIST); byte-identical for one commit.
DIST    ?= dist
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
dist:
	./scripts/dist.sh $(DIST) $(VERSION)

# The container image (D1): Containerfile on the static binary. PODMAN
# may carry podman's global options.
IMAGE ?= warden:latest
image:
	VERSION=$(VERSION) ./scripts/image.sh $(IMAGE)

lint: fmtcheck
	$(GO) vet ./...
	$(GO) vet -tags benchfloor ./httpapi ./cmd/warden
	$(GO) run $(STATICCHECK) ./...

# make test: every rule's tests, sized to run in minutes. The binaries
# the tests run are built once here and shared by every package
# (WARDEN_TEST_BIN). make check (CI runs it after make test) runs the long
# sizes, and the race detector where the concurrency is (the actors' shell,
# their runtime and cluster, the store, the HTTP layer, and a few of the
# simulator's seeds), under -short: its instrumented builds and fivefold
# slowdown were five of make test's fourteen minutes.
TEST_BIN ?= $(CURDIR)/bin/test

# fmtcheck is the one lint make test keeps: instant, and go test runs vet's
# high-confidence checks itself; vet and staticcheck in full are make check's.
fmtcheck:
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || { gofmt -l .; echo "gofmt needed"; exit 1; }

testbin:
	@mkdir -p $(TEST_BIN)
	$(GO) build $(STAMP) -o $(TEST_BIN)/warden ./cmd/warden

# The pure machines (marquee, environment, admission) start no goroutine:
# the race detector has nothing to find there.
RACE_PKGS := ./actors ./actors/runtime ./internal/cluster ./persistence ./httpapi
# -parallel 4: the tests marked t.Parallel (cmd/warden's longest) mostly
# wait on processes and timers, so four overlap on two cores.
test: fmtcheck testbin
	WARDEN_TEST_BIN=$(TEST_BIN) $(GO) test -count=1 -parallel 4 -timeout 20m ./...

# make check: the heaviest checks, at full size (WARDEN_CHECK=1): the
# release built twice and compared byte for byte (D3), the crash run's 50
# kills, the cluster's convergence at a second lease TTL, the simulator's
# CI batches (200 single-node seeds, 40 cluster seeds), the cluster at
# scale's small run (D10); then the race detector's runs, and the
# benchmark's floors (-tags benchfloor, built only for make bench).
CHECK_TESTS := TestO18DryRunIsTheRealStepOnSimulatorStates|TestD3DistIsReproducible|TestCrashFiftyKills|TestC5ConvergesAtEachLeaseTTL|TestSeedsWithDeterminism|TestC11ClusterSeedsWithDeterminism|TestD10TheClusterAtScaleBenchRuns|TestE21P21AKillAtEachSleepAndWakeBoundaryEndsAsObserved
check: lint testbin
	WARDEN_CHECK=1 WARDEN_TEST_BIN=$(TEST_BIN) $(GO) test -count=1 -timeout 25m -run '^($(CHECK_TESTS))$$' \
		./cmd/internal/sbom ./cmd/warden-crash ./cmd/warden-cluster-crash ./sim ./cmd/warden-bench ./cmd/warden-previews
	$(GO) test -race -short -count=1 -timeout 15m $(RACE_PKGS)
	$(GO) test -race -short -count=1 -timeout 15m -run 'TestSeedsWithDeterminism|TestC11ClusterSeedsWithDeterminism' ./sim
	$(GO) test -count=1 -tags benchfloor -run 'Bench' ./httpapi

# warden's exit statuses are in docs/guides/failures.md; make
# run restarts nothing, it says why warden stopped. RUN_FLAGS adds flags
# (e.g. RUN_FLAGS="--log-level debug"). Standard Webhooks are on under make
# run with a development secret written on the first start to
# WEBHOOK_SECRETS (docs/guides/workflow.md, callback modes), as warden writes its
# development keys. Ctrl-C is passed to warden as SIGTERM and waited for,
# so a clean stop is a clean exit (make would otherwise print "Interrupt");
# then the preview applications it started stop too (the next make run
# finds them gone and starts them again, as drift).
RUN_FLAGS ?=
WEBHOOK_SECRETS ?= $(DATA)/webhook.secrets
run: build
	@echo "make run: dispatches go to $(RUN_WORKFLOW)"
	@umask 077; mkdir -p $(DATA); test -s $(WEBHOOK_SECRETS) || { \
		printf 'whsec_%s\n' "$$(head -c 32 /dev/urandom | base64)" > $(WEBHOOK_SECRETS) && \
		echo "make run: wrote a development Standard Webhooks secret to $(WEBHOOK_SECRETS) (0600)"; }
	@./bin/warden serve --listen $(LISTEN) --data $(DATA) --webhook-secrets-file $(WEBHOOK_SECRETS) \
		--dispatch exec --dispatch-command ./bin/example-workflow \
		--bootstrap exec --bootstrap-command "./bin/example-workflow bootstrap" \
		--env-driver-command ./bin/example-preview --env-reconcile-every 10s \
		--driver-env WARDEN_PREVIEW_DIR,WARDEN_EXAMPLE_SCRIPTS,WARDEN_BIN,WARDEN_TF_WORK,TF_CLI_CONFIG_FILE $(RUN_FLAGS) & \
	pid=$$!; stopped=; trap 'stopped=1; kill -TERM $$pid 2>/dev/null' INT TERM; \
	wait $$pid; st=$$?; \
	if [ -n "$$stopped" ]; then wait $$pid; st=$$?; fi; \
	./bin/example-preview stop; \
	case $$st in \
		0) ;; \
		74) echo "make run: warden stopped because its disk failed (status 74, see its last ERROR line); fix the disk or free space under $(DATA), then make run again";; \
		65) echo "make run: warden refused a damaged store under $(DATA) (status 65); see docs/guides/failures.md";; \
		*) echo "make run: warden exited with status $$st";; \
	esac; exit $$st

# Previews on a real platform (docs/guides/previews.md):
# a throwaway PostgreSQL cluster and Caddy under $(DATA)/previews, podman
# for images and containers, warden on them; Ctrl-C stops all of it.
PREVIEW_LISTEN ?= 127.0.0.1:8088
CADDY_ADMIN ?= 127.0.0.1:2019
previews: build
	$(GO) build $(STAMP) -o bin/warden-previews ./cmd/warden-previews
	@./bin/warden-previews --listen $(LISTEN) --preview-listen $(PREVIEW_LISTEN) --caddy-admin $(CADDY_ADMIN) --data $(DATA) -- \
		--dispatch exec --dispatch-command ./bin/example-workflow \
		--bootstrap exec --bootstrap-command "./bin/example-workflow bootstrap" $(RUN_FLAGS)

# What make previews leaves after a clean stop, for its next start to
# reuse: its stopped containers, their images, the PostgreSQL cluster.
previews-clean:
	$(GO) build -o bin/warden-previews ./cmd/warden-previews
	@./bin/warden-previews --clean --data $(DATA)

# Three nodes on this machine, each embedding an etcd member (see docs/guides/cluster.md,
# "Running several nodes"); Ctrl-C stops all three.
cluster: build
	@echo "make cluster: dispatches go to $(RUN_WORKFLOW)"
	./scripts/cluster.sh

# The cluster's three etcd members alone, without the nodes: what migrate
# copies a store into or out of (docs/guides/cluster.md, Moving to a cluster).
cluster-etcd: build
	./scripts/cluster.sh --etcd-only

# The cluster's fault-injection run for as long as asked:
# make cluster-crash DURATION=10m
DURATION ?= 5m
cluster-crash:
	$(GO) run ./cmd/warden-cluster-crash -duration $(DURATION)

# The PostgreSQL baseline needs Debian's postgresql package; the bench
# installs it where it can and otherwise skips that row with a note.
bench:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { sudo=; [ "$$(id -u)" = 0 ] || sudo=sudo; \
		$$sudo apt-get install -y -qq postgresql >/dev/null 2>&1 || echo "bench: postgresql not installed; the PostgreSQL row will be skipped"; }
	$(GO) run ./cmd/warden-bench -out BENCHMARKS.md
	$(GO) run ./cmd/warden-bench -scale -out BENCHMARKS.md
	$(GO) run ./cmd/warden-bench -lists -out BENCHMARKS.md
	$(GO) run ./cmd/warden-bench -verify 100000 -out BENCHMARKS.md
	$(GO) run ./cmd/warden-bench -cluster-scale 100000 -steady 10m -out BENCHMARKS.md
	$(GO) run ./cmd/warden-bench -cluster-scale 100000 -steady 10m -compaction 2m -out BENCHMARKS.md
	$(GO) run ./cmd/warden-bench -cluster -out BENCHMARKS.md
	$(GO) test ./persistence -run '^$$' -bench 'BenchmarkC8Transition|BenchmarkC15' -benchtime 3s -count 3
	$(GO) test ./internal/driver/local -run '^$$' -bench BenchmarkP20 -benchtime 5x -count 3
	$(GO) test ./cmd/warden-previews -run '^$$' -bench 'BenchmarkP21|BenchmarkP20' -benchtime 1x -count 2

# More seeds than CI runs, with the determinism check, on one node and on
# a cluster of three over the simulated etcd; writes the figures.
SIM_SEEDS ?= 1000
sim:
	$(GO) run ./cmd/warden-sim --seeds $(SIM_SEEDS) --check-determinism --report BENCHMARKS.md
	$(GO) run ./cmd/warden-sim --seeds $(SIM_SEEDS) --nodes 3 --check-determinism --report BENCHMARKS.md
	$(GO) run ./cmd/warden-sim --planted --report BENCHMARKS.md
	$(GO) run ./cmd/warden-sim --regressions sim/testdata/regressions --check-determinism

# The crash test for as long as asked: make crash CRASH_DURATION=30m
CRASH_DURATION ?= 10m
crash:
	$(GO) run ./cmd/warden-crash -duration $(CRASH_DURATION)

# Each target for a count of inputs, not a time: a time budget races Go's
# fuzzing coordinator at its deadline and fails with "context deadline
# exceeded" and no input (golang/go#75804; FuzzDecodeCallback, 2026-12-03).
FUZZ_EXECS ?= 100000
FUZZ_EXECS_LONG ?= 200000
# Every fuzz test, as package:name (TestMakeFuzzRunsEveryFuzzTest holds
# the list to the tests there are); the LONG ones take FUZZ_EXECS_LONG.
FUZZ_TARGETS = \
	./httpapi:FuzzDecodeCallback \
	./httpapi:FuzzSimpleCallbackDecodesAsStrictDoes \
	./httpapi:FuzzDecodeCreate \
	./persistence:FuzzDecode \
	./persistence:FuzzCheckNewestWAL \
	./internal/driver:FuzzDecodeChats \
	./internal/driver:FuzzDecodeExecResult \
	./httpapi:FuzzDecodeDestroy \
	./httpapi:FuzzDecodeEnvCreate \
	./httpapi:FuzzDecodeCursor \
	./httpapi:FuzzDecodeReason \
	./httpapi:FuzzDecodeEnvDryRun \
	./httpapi:FuzzStrictDecode \
	./httpapi:FuzzAuthenticateCallback \
	./httpapi:FuzzCallbackHead \
	./internal/trust:FuzzParseSignatures \
	./internal/trust:FuzzVerifyScoped \
	./internal/trust:FuzzKeyring \
	./persistence:FuzzDecodeDeliveries \
	./actors/record:FuzzLoadStoredRecords \
	./actors/record:FuzzDecodeAgreesWithEncodingJSON \
	./actors/runtime:FuzzDecodeEnvelope \
	./actors:FuzzDecodeRemoteEvents \
	./internal/jsonappend:FuzzStringAsEncodingJSON \
	./sim:FuzzRegressionFile \
	./internal/driver/local:FuzzAccessLogLine
FUZZ_LONG = FuzzDecodeCallback FuzzAuthenticateCallback
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; n=$(FUZZ_EXECS); \
		case " $(FUZZ_LONG) " in *" $$name "*) n=$(FUZZ_EXECS_LONG);; esac; \
		echo "$(GO) test $$pkg -fuzz ^$$name\$$ -fuzztime $${n}x"; \
		$(GO) test $$pkg -run '^$$' -fuzz "^$$name\$$" -fuzztime $${n}x; \
	done

# The README's console pictures, from the browser test (Debian's chromium),
# with the digest of the templates they show; make test says when they are
# stale.
screenshots:
	WARDEN_DOCS_SCREENSHOTS=1 $(GO) test -count=1 ./httpapi -run 'TestO7O8ConsoleInChromium$$'
	WARDEN_DOCS_SCREENSHOTS=1 $(GO) test -count=1 ./cmd/warden-previews -run 'TestP2P12P18MakePreviewsStartsThePlatformAndStopsIt$$'

# go install into an empty GOBIN with a clean module cache (CI runs it).
install-check:
	./scripts/install-check.sh

clean:
	rm -rf bin
