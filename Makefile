# onceupload: idempotent direct-to-S3 uploads on AWS Lambda.
#   make dev    run the whole system on 127.0.0.1 (API on :3000); Ctrl-C stops it
#   make test   install the pinned local servers, lint, run every test (scripts/test.sh: lint first,
#               then web, tools, the Versity and MinIO passes and fuzz; each phase's wall time printed)
#   make build  build the three Lambda bootstraps (linux/arm64) into .build/
#   make bench  round trips, hot path, load vs a Powertools peer, cold start, large files (vs tusd, a raw
#               probe, first part stored, Chromium); BENCH_FLAGS="--only …" picks sections; builds what it
#               measures (every tool, web/dist, the bootstraps) and fails if a selected section cannot run
#   make chaos  a bounded chaos run (60 s) that must end with 0 duplicates, 0 lost, 0 wedged, 0 misdirected,
#               and every completed upload's event processed exactly once by the example consumer
#   make unit   the quick loop: go test -short, no servers started, nothing to install first
#   also: make lint, test-go (make test's main pass alone), test-minio (the S3 tests again on MinIO),
#         fuzz, web (lint, build, unit tests of web/), uppy (the same for the Uppy plugin, uppy/),
#         web-build (web/dist only), tools
#         (install-tools.sh), dev-tools (install-tools.sh --dev), lint-tools (install-tools.sh
#         --lint), smoke API=… (checks a deployed stack), clean; each is described where it is
#         defined
# SAM calls build-<LogicalId> with ARTIFACTS_DIR (BuildMethod: makefile).

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
GO ?= go
TOOLS := $(CURDIR)/.tools/bin
LAMBDA_ARCH ?= arm64
LAMBDA_FLAGS := -tags lambda.norpc -trimpath -ldflags='-s -w'
FUNCTIONS := PresignFunction FinalizeFunction EventsFunction
dir_PresignFunction := api
dir_FinalizeFunction := finalize
dir_EventsFunction := events

.PHONY: build dev test unit lint tools web uppy bench chaos fuzz clean $(addprefix build-,$(FUNCTIONS))

$(addprefix build-,$(FUNCTIONS)): build-%:
	@test -n "$(ARTIFACTS_DIR)" || { echo "ARTIFACTS_DIR is not set (SAM sets it; try make build)"; exit 1; }
	CGO_ENABLED=0 GOOS=linux GOARCH=$(LAMBDA_ARCH) $(GO) build $(LAMBDA_FLAGS) \
		-o $(ARTIFACTS_DIR)/bootstrap ./functions/$(dir_$*)

build:
	@for fn in $(FUNCTIONS); do $(MAKE) --no-print-directory build-$$fn ARTIFACTS_DIR=$(CURDIR)/.build/$(LAMBDA_ARCH)/$$fn; done
	@ls -l .build/$(LAMBDA_ARCH)/*/bootstrap

# Everything make test and make bench need.
tools:
	@bash scripts/install-tools.sh

# What make dev needs, and no more: no linters, no test browser, no tusd,
# and no MinIO unless DEV_S3=minio.
dev-tools:
	@bash scripts/install-tools.sh --dev

# web/'s npm packages, installed again only when its package files change
# (make lint, web and web-build each need them; one npm ci serves all three).
WEB_DEPS := web/node_modules/.installed
$(WEB_DEPS): web/package.json web/package-lock.json
	cd web && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

# uppy/'s npm packages (the Uppy plugin, @onceupload/uppy): its lockfile
# links ../web, so that the plugin builds against the client as it is here.
UPPY_DEPS := uppy/node_modules/.installed
$(UPPY_DEPS): uppy/package.json uppy/package-lock.json
	cd uppy && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

# The browser demo (web/dist) without the lint and unit tests of make web.
web-build: $(WEB_DEPS)
	cd web && npm run build

.PHONY: dev-tools lint-tools web-build test-go test-minio smoke

# A deployed stack checked end to end (cmd/smoke; docs/deploy-smoke.md):
# make smoke API=<the stack's ApiUrl> [ORIGIN=<a browser origin>]
# [SMOKE_FLAGS='--timeout 300s']. A JWT deployment's token comes from
# ONCEUPLOAD_TOKEN and is never printed.
smoke:
	@test -n "$(API)" || { echo "usage: make smoke API=<the stack's ApiUrl> [ORIGIN=<a browser origin>] [SMOKE_FLAGS=...]"; exit 2; }
	$(GO) run ./cmd/smoke --api "$(API)" $(if $(ORIGIN),--origin "$(ORIGIN)") $(SMOKE_FLAGS)

# The local stack, on Linux and macOS. DEV_RIE=true (Linux only) runs the
# real bootstraps (built here for this machine's architecture) under the
# Lambda Runtime Interface Emulator; elsewhere .build/dev refuses it.
dev: dev-tools
	@[ -f web/dist/index.html ] || $(MAKE) --no-print-directory web-build
	$(GO) build -o .build/dev ./cmd/dev
	@if [ "$${DEV_RIE:-false}" = true ] && [ "$$(uname -s)" = Linux ]; then $(MAKE) --no-print-directory build LAMBDA_ARCH=$$($(GO) env GOARCH); fi
	BOOTSTRAP_DIR=$(CURDIR)/.build/$$($(GO) env GOARCH) .build/dev

GOTOOL := $(GO) tool -modfile=tools/go.mod

# What make lint runs beyond the go tool: redocly (install-tools.sh --lint:
# the npm tools only, no Go builds), web/'s npm packages (npm run gen), and
# cfn-lint, which comes from pip (CI installs it; see .github/workflows).
lint-tools:
	@bash scripts/install-tools.sh --lint

lint: lint-tools $(WEB_DEPS)
	@out=$$(gofmt -l $$(git ls-files '*.go')); [ -z "$$out" ] || { echo "gofmt needed: $$out"; exit 1; }
	@out=$$($(GOTOOL) goimports -local github.com/onceupload/onceupload -l $$(git ls-files '*.go')); \
		[ -z "$$out" ] || { echo "goimports -local github.com/onceupload/onceupload needed: $$out"; exit 1; }
	$(GO) vet ./...
	$(GOTOOL) staticcheck ./...
	$(GO) test -count=1 ./internal/checks/mdlinks/
	@$(GO) mod tidy -diff || { echo "go mod tidy would change go.mod/go.sum"; exit 1; }
	@# with-onceupload.yaml nests template.yaml: cfn-lint transforms it and checks the
	@# parameters it passes against the nested template (E3043).
	cfn-lint template.yaml examples/*/template.yaml examples/upload-events/with-onceupload.yaml
	@# The GitHub workflows; no shellcheck (the project installs none), so run: scripts are not linted.
	$(GOTOOL) actionlint -shellcheck= .github/workflows/*.yml
	REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true $(TOOLS)/redocly lint --format=stylish openapi.yaml
	@# The browser client's wire types are generated from openapi.yaml and tracked.
	@cd web && npm run --silent gen -- --check || { echo "web/src/openapi.gen.ts is not what openapi.yaml generates: run cd web && npm run gen"; exit 1; }

# Unit and integration tests. Integration tests start the servers they need
# (dynoxide, dynalite, Versity Gateway, MinIO, Redis) on free ports and stop
# them; REQUIRE_INTEGRATION=1 makes a missing server a failure, not a skip.
# Then test-minio's tests and the fuzz targets.
#
# go test runs two test binaries at a time, taking packages in the order
# given: the longest (the browser's, about three minutes; the Uppy plugin's
# Chromium test, ./uppy/, about 40 s) go first, so that the rest run beside
# them instead of after. (MinIO's tests and fuzzing
# beside the main pass as well saved nothing: on two cores they slowed it by
# as much, and timing-bound tests began to fail.)
#
# scripts/test.sh runs the phases one after the other: the npm packages,
# lint (which needs no more, so that it fails early), web, tools, test-go,
# test-minio and fuzz; it prints each phase's wall time.
#
# GOTEST_FLAGS go to every go test of test-go, test-minio and fuzz. make
# test sets -vet=off there: go test's own vet checks are a subset of those
# of go vet ./... (test files included), which make lint has run by then.
LONG_PACKAGES := ./web/ ./internal/tooling/devstack/ ./pkg/client/ ./uppy/
GOTEST_FLAGS ?=
test:
	@MAKE="$(MAKE)" bash scripts/test.sh

# make test's main pass alone, on what make tools and make web installed
# and built (it installs nothing itself).
test-go:
	REQUIRE_INTEGRATION=1 $(GO) test $(GOTEST_FLAGS) -count=1 -race $(LONG_PACKAGES) ./...

# The S3 behaviours the product relies on, again on a second S3 server,
# MinIO (TEST_S3=minio; its differences are skipped with the reason
# printed): the upload service's integration tests whole, and the
# end-to-end flows named in MINIO_FLOWS, of the local stack, the Go client
# and the CLI. Everything else runs on Versity Gateway only.
MINIO_FLOWS := TestWalkthrough|TestUploadEvents|TestMultipartRoutes|TestMultipartEventIsTranslated|TestCORSPreflights
MINIO_FLOWS := $(MINIO_FLOWS)|TestBucketPreflightForTheListedHeaders|TestNarrowedOriginsKeepTheDemo|TestRestartOnSamePorts
MINIO_FLOWS := $(MINIO_FLOWS)|Test.*AgainstTheLocalStack|TestLostPutResponse|TestLostCompleteAnswer
MINIO_FLOWS := $(MINIO_FLOWS)|TestExpiredURLIsRefreshed|TestExpiredPartURLsAreSignedAgain|TestCLIEndToEnd
MINIO_FLOWS := $(MINIO_FLOWS)|TestOutageMatrix|TestCLIKilledAtEachStep|TestSmokeLocalStack
# With -race as above, so that make test reuses the packages it compiled.
# (The two go test runs side by side saved 15 s of 50, and a stack's MinIO
# then answered 404 to its first CreateBucket: one after the other.)
define minio_tests
REQUIRE_INTEGRATION=1 TEST_S3=minio $(GO) test $(GOTEST_FLAGS) -count=1 -race ./internal/upload/
REQUIRE_INTEGRATION=1 TEST_S3=minio $(GO) test $(GOTEST_FLAGS) -count=1 -race -run '^($(MINIO_FLOWS))$$' ./internal/tooling/devstack/ ./pkg/client/ ./cmd/upload/ ./cmd/smoke/
endef
test-minio: tools
	$(minio_tests)

# Every fuzz target, for FUZZTIME each: a duration, or an execution count
# such as 5000x. make test uses a count, because a short time limit can end
# inside the minimizer, which go test reports as a failure. For a longer
# search: make fuzz FUZZTIME=10m. A crasher lands in the package's
# testdata/fuzz/ and runs as an ordinary test from then on. FUZZ_JOBS=2
# (make test's) runs two targets at a time, each target's output printed
# whole when it ends: with 5000x most of a target's time is its build and
# link, not fuzzing.
FUZZTIME ?= 30s
FUZZ_JOBS ?= 1
FUZZ_TARGETS := \
	./pkg/api/:FuzzParseIdempotencyKey ./pkg/idempotency/keyheader/:FuzzParse ./internal/upload/:FuzzDecodeCreateRequest \
	./internal/upload/:FuzzParseUploadID ./internal/upload/:FuzzFinalizeObjectKey ./pkg/api/:FuzzDecodeSignPartsRequest ./pkg/api/:FuzzDecodeCompleteRequest \
	./internal/handlers/httpapi/:FuzzHandle ./internal/handlers/finalize/:FuzzHandleS3Event \
	./internal/tooling/devstack/:FuzzEncodeS3EventKey ./internal/tooling/devstack/:FuzzTranslateS3Event
fuzz:
	@if [ "$(FUZZ_JOBS)" = 1 ]; then \
		for t in $(FUZZ_TARGETS); do \
			echo "fuzz $${t##*:} for $(FUZZTIME)"; \
			$(GO) test $(GOTEST_FLAGS) -run '^$$' -fuzz "^$${t##*:}$$" -fuzztime $(FUZZTIME) $${t%%:*} || exit 1; \
		done; \
	else \
		printf '%s\n' $(FUZZ_TARGETS) | xargs -P $(FUZZ_JOBS) -I{} bash -c \
			't={}; out=$$($(GO) test $(GOTEST_FLAGS) -run "^$$" -fuzz "^$${t##*:}$$" -fuzztime $(FUZZTIME) $${t%%:*} 2>&1) && s=0 || s=$$?; \
			printf "fuzz %s for %s\n%s\n" "$${t##*:}" "$(FUZZTIME)" "$$out"; exit $$s'; \
	fi

# Browser client and demo (web/): pinned npm tools, build web/dist, unit
# tests. go test ./web then drives Chromium against the local stack.
web: $(WEB_DEPS)
	cd web && npm run lint && npm run build && npm test

# The Uppy plugin (uppy/): lint, build, unit tests (the real @uppy/core, a
# fake client). It builds against web/dist/lib, built first if missing.
# go test ./uppy then packs both packages, installs them into a scratch
# application and drives it in Chromium against the local stack.
uppy: $(UPPY_DEPS)
	@[ -f web/dist/lib/index.d.ts ] || $(MAKE) --no-print-directory web-build
	cd uppy && npm run lint && npm run build && npm test

# Benchmarks: a Markdown report on stdout, JSON in .build/bench/report.json.
# Numbers only; no test asserts a timing. It builds what it measures: the
# Chromium sections upload through web/dist, built here from the sources
# as they are (not a stale build), and the cold-start section sizes the
# bootstraps make build makes, for both architectures, and starts this
# machine's beside the smallest Go function (the hello baseline). A
# selected section that cannot run fails the run, named with its cause,
# instead of showing a zero.
bench: tools web-build
	cd bench/peer && npm ci --no-audit --no-fund --loglevel=error
	@for arch in arm64 amd64; do $(MAKE) --no-print-directory build LAMBDA_ARCH=$$arch; done
	CGO_ENABLED=0 GOOS=linux $(GO) build $(LAMBDA_FLAGS) -o .build/bench/hello/bootstrap ./internal/tooling/bench/testdata/hello
	$(GO) run ./cmd/bench --bootstraps .build $(BENCH_FLAGS)

# Chaos: clients upload through the local stack while faults are injected;
# prints "chaos: R requests, F faults, U uploads, D duplicate objects,
# L lost uploads, W wedged keys, M misdirected answers" and fails unless D,
# L, W and M are 0.
# Longer: make chaos CHAOS_FLAGS="--duration 5m". On MinIO: CHAOS_S3=minio make chaos.
chaos: tools
	$(GO) run ./cmd/chaos $(CHAOS_FLAGS)

# Fast tests only, and nothing to install first: go test -short, under
# which every test that needs a local server or a tool from make tools skips
# (testenv.SkipShort), whether or not .tools exists. ONCEUPLOAD_NO_SERVERS=1
# makes one that would start a server anyway fail, saying so.
unit:
	ONCEUPLOAD_NO_SERVERS=1 $(GO) test -short -count=1 ./...

clean:
	rm -rf .build web/dist web/.test-build web/test-results uppy/dist uppy/.test-build uppy/test-results
