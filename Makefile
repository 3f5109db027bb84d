# monarch: `make run` runs the getting-started example on the embedded
# default (no config, no server to start); `make test` runs every test.
GO  ?= go
BIN := bin

.PHONY: all build run test vet lint bench generate clean

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
	$(GO) test -run '^$$' -bench . -benchtime 1x -count 1 -timeout 30m ./... | tee $(BIN)/bench.txt
	@echo "== summary"
	@grep '^BENCH' $(BIN)/bench.txt

generate:
	$(GO) generate ./...

clean:
	rm -rf $(BIN)
