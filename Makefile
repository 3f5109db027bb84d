# monarch: `make run` runs the getting-started example on the embedded
# default (no config, no server to start); `make test` runs every test.
GO  ?= go
BIN := bin

.PHONY: all build run test vet lint bench bench-scale bench-soak fuzz generate docs-dashboard clean

all: build

build:
	$(GO) build -o $(BIN)/monarch .
	$(GO) build -o $(BIN)/getting_started ./examples/getting_started

run: build
	$(BIN)/getting_started

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }

lint: vet
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

test: vet
	$(GO) test -race -count=1 -timeout 40m ./...

# Benchmarks print one `BENCH name ours= floor= ratio= target..` line each,
# gathered at the end.
bench:
	@mkdir -p $(BIN)
	$(GO) test -run '^$$' -bench . -skip '^Benchmark(Scale(InProcess)?|ProcKillSoak)$$' -benchtime 1x -count 1 -timeout 30m ./... | tee $(BIN)/bench.txt
	@echo "== summary"
	@grep '^BENCH' $(BIN)/bench.txt

# The scale benchmark: the scale program on 1, 4, 16, 32 and 64 simulated
# hosts x 4 procs x 4 actors (MONARCH_SCALE_SIZES=1,4 for fewer), a line
# of figures per size; then 4 x 8 and 256 x 8 simulated hosts x procs
# in one process (actorrt/actortest; MONARCH_INPROC_SCALE_SIZES=4x8,1024x8
# for others: 1,024 x 8 does not start here yet, its memory no longer the
# procs' but the leaves' interest in one another, see docs/scale.md).
bench-scale:
	$(GO) test -run '^$$' -bench '^BenchmarkScale$$' -benchtime 1x -count 1 -timeout 60m ./systest/
	$(GO) test -run '^$$' -bench '^BenchmarkScaleInProcess$$' -benchtime 1x -count 1 -timeout 60m ./actorrt/actortest/

# The soak of proc kills: 200 SIGKILLs over 10 minutes of a 4 x 4 job
# with two restartable meshes and a stream of calls (MONARCH_SOAK=1m for
# a shorter run, with as many kills in proportion).
bench-soak:
	$(GO) test -run '^$$' -bench '^BenchmarkProcKillSoak$$' -benchtime 1x -count 1 -timeout 30m ./actorrt/

# Every Fuzz* target of every package, found by `go test -list`, for
# FUZZTIME each; not part of test, which already runs their seed corpora.
FUZZTIME ?= 30s
fuzz:
	@mkdir -p $(BIN)
	$(GO) test -list '^Fuzz' ./... > $(BIN)/fuzz-list.txt
	@awk '/^Fuzz/ { t[++n] = $$1; next } /^ok/ { for (i = 1; i <= n; i++) print $$2, t[i]; n = 0 }' \
		$(BIN)/fuzz-list.txt > $(BIN)/fuzz-targets.txt
	@test -s $(BIN)/fuzz-targets.txt || { echo "no fuzz targets found"; exit 1; }
	@while read pkg target; do \
		echo "== $$pkg $$target ($(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$$target$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	done < $(BIN)/fuzz-targets.txt

# docs/observability.md's picture of the dashboard: the screenshot systest's TestDashboardBrowser
# takes of a real local job in headless Chromium (testdata/browser/setup.sh
# installs it; without it this fails), written to docs/dashboard.png.
docs-dashboard:
	MONARCH_REQUIRE_CLUSTER=1 MONARCH_DASHBOARD_SCREENSHOT=$(CURDIR)/docs/dashboard.png \
		$(GO) test -count=1 -run '^TestDashboardBrowser$$' -v ./systest/

generate:
	$(GO) generate ./...

clean:
	rm -rf $(BIN)
