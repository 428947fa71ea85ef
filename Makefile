# agentstate — see README.md. `make run` starts a node; `make test` runs the suite.
GO       ?= go
DATA     ?= ./data/agentstate.db
# The .proto files' include root is messages/: each file's directory is its
# package (agentstate/session/v1/session.proto is agentstate.session.v1), as
# every language's generator and Buf expect.
PROTO_ROOT := messages
PROTOS   := $(shell cd $(PROTO_ROOT) && find agentstate -name '*.proto' | sort)
# The race detector needs cgo (which go-sqlite3 needs anyway) and a 64-bit host.
RACE     ?= -race
TESTFLAGS ?=

.PHONY: build run test race bench fuzz lint proto proto-check proto-lint clean python-proto python-proto-check test-python ts-proto ts-proto-check test-typescript test-openai-agents

build:
	$(GO) build -o bin/node ./cmd/node

run: build
	./bin/node serve --data $(DATA)

test:
	$(GO) vet ./...
	$(GO) test $(RACE) -count=1 -timeout 15m $(TESTFLAGS) ./...
	# One package at a time: each benchmark has the machine to itself (the
	# soak's node under every attack runs near its memory bound when another
	# package's benchmarks share the two cores).
	$(GO) test -p 1 -run '^$$' -bench . -benchtime=1x -count=1 -timeout 10m ./...
	# tests/adk is its own module (adk-go's dependencies stay out of go.mod):
	# a tiny run of each of its modes keeps the comparison building and honest.
	cd tests/adk && $(GO) vet ./... && $(GO) test $(RACE) -count=1 -timeout 5m ./...
	# adapters/adk (the ADK session backend) is its own module for the same
	# reason; it runs adk v1's and v2's own session suites and a runner end to end.
	cd adapters/adk && $(GO) vet ./... && $(GO) test $(RACE) -count=1 -timeout 5m ./...
	$(MAKE) test-python
	$(MAKE) test-langgraph
	$(MAKE) test-typescript
	$(MAKE) test-openai-agents

race:
	$(GO) test -race -count=1 ./...

bench:
	$(GO) test -run '^$$' -bench . -benchmem -count=1 -timeout 30m ./...

# Runs every fuzz target briefly (their seed corpora also run in `make test`).
# A count, not a duration: with a duration Go's fuzzing coordinator can fail
# a target "context deadline exceeded" when a worker is still mid-input at the
# deadline on a loaded machine (go.dev/issue/75804), with no failing input.
# 10,000 inputs take 0.5-6 s per target on two cores.
FUZZTIME ?= 10000x
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
	  for fz in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$fz"; \
	    $(GO) test $$pkg -run '^$$' -fuzz "^$$fz$$" -fuzztime $(FUZZTIME); \
	  done; \
	done

# staticcheck runs at a pinned version through `go run pkg@version`, so that
# neither it nor its dependencies enter go.mod (docs/DEPENDENCIES.md).
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
# Buf lints the protobuf contract and checks that it stays compatible; pinned
# and run the same way (docs/DEPENDENCIES.md).
BUF ?= $(GO) run github.com/bufbuild/buf/cmd/buf@v1.75.0

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	$(MAKE) proto-lint

# PACKAGE: compatible on the wire (binary and JSON) and by full name (the
# Proto.Actor remote protocol sends messages by name), while files may move
# within their package. Given inline so that it applies to old commits too,
# including those from before messages/buf.yaml.
BUF_BREAKING := {"version":"v1","breaking":{"use":["PACKAGE"]}}

# Buf's standard rules on messages/ (the exceptions and why: messages/buf.yaml),
# then every recent commit that changed the contract against its parent, so
# a breaking change fails CI however many commits a landing has. Buf clones
# the repository shallowly: each side asks for the depth that reaches its commit.
proto-lint:
	$(BUF) lint $(PROTO_ROOT)
	@set -e; for c in $$(git rev-list -n 30 HEAD -- $(PROTO_ROOT)/agentstate $(PROTO_ROOT)/buf.yaml); do \
	  git rev-parse -q --verify "$$c^" >/dev/null || { echo "proto-lint: $$c has no parent here (shallow clone): not compared"; continue; }; \
	  side() { d=$$(( $$(git rev-list --count "$$1..HEAD") + 2 )); \
	    if git cat-file -e "$$1:$(PROTO_ROOT)/agentstate" 2>/dev/null; then echo ".git#ref=$$1,depth=$$d,subdir=$(PROTO_ROOT)"; else echo ".git#ref=$$1,depth=$$d"; fi; }; \
	  echo "proto-lint: $$(git log -1 --format='%h %s' $$c | cut -c1-70) — wire-compatible with its parent?"; \
	  $(BUF) breaking "$$(side $$c)" --against "$$(side $$c^)" --config '$(BUF_BREAKING)' --against-config '$(BUF_BREAKING)'; \
	done

proto:
	cd $(PROTO_ROOT) && protoc -I . \
	  --plugin=protoc-gen-go="$$(cd $(CURDIR) && $(GO) tool -n protoc-gen-go)" \
	  --plugin=protoc-gen-go-grpc="$$(cd $(CURDIR) && $(GO) tool -n protoc-gen-go-grpc)" \
	  --plugin=protoc-gen-go-vtproto="$$(cd $(CURDIR) && $(GO) tool -n protoc-gen-go-vtproto)" \
	  --go_out=. --go_opt=paths=source_relative \
	  --go-grpc_out=. --go-grpc_opt=paths=source_relative \
	  --go-vtproto_out=. --go-vtproto_opt=paths=source_relative,features=marshal+unmarshal+size \
	  $(PROTOS)

# Fails when the committed generated code differs from what `make proto` makes.
proto-check: proto
	git diff --exit-code -- messages

# The Python client (clients/python) uses Debian's python3 and its packages
# (docs/DEPENDENCIES.md); a pyenv or other python3 on PATH may lack them.
PYTHON ?= /usr/bin/python3
PYTHON_NEEDS := grpc, google.protobuf, cryptography, setuptools, ensurepip, pip
PYTHON_DEBS  := python3-grpcio python3-protobuf python3-cryptography python3-venv python3-pip python3-setuptools

# Regenerates clients/python's stubs (needs protoc and Debian's
# protobuf-compiler-grpc, or grpc_tools).
python-proto:
	PYTHON=$(PYTHON) clients/python/generate.sh

python-proto-check: python-proto
	git diff --exit-code -- clients/python/src
	@test -z "$$(git status --porcelain -- clients/python/src)" || (git status --porcelain -- clients/python/src; exit 1)

# The Python client's tests against a live node, run twice over: from the
# source tree, then from a package pip installed offline into a venv (which
# is what a user gets). Without the packages it skips, except under CI.
test-python: build
	@if ! $(PYTHON) -c 'import $(PYTHON_NEEDS)' 2>/dev/null; then \
	  if [ -n "$$CI" ]; then echo "test-python: $(PYTHON) lacks one of $(PYTHON_NEEDS) (Debian: $(PYTHON_DEBS))" >&2; exit 1; fi; \
	  echo "SKIP test-python: $(PYTHON) lacks one of $(PYTHON_NEEDS); apt-get install $(PYTHON_DEBS)"; \
	  exit 0; \
	fi; \
	set -e; \
	echo "== Python client tests (source tree)"; \
	cd clients/python; \
	AGENTSTATE_NODE=$(CURDIR)/bin/node PYTHONPATH=src:. $(PYTHON) -m unittest discover -s tests -t .; \
	echo "== Python client tests (pip-installed package)"; \
	tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	cp -r . "$$tmp/pkg"; rm -rf "$$tmp/pkg/build" "$$tmp/pkg/src/"*.egg-info; \
	$(PYTHON) -m venv --system-site-packages "$$tmp/venv"; \
	"$$tmp/venv/bin/python" -m pip install -q --no-deps --no-build-isolation --no-index "$$tmp/pkg"; \
	"$$tmp/venv/bin/python" -c "import agentstate; print(\"testing\", agentstate.__file__)"; \
	AGENTSTATE_NODE=$(CURDIR)/bin/node "$$tmp/venv/bin/python" -m unittest discover -s tests -t .

# The TypeScript client (clients/typescript) needs Node.js 20 or later and
# npm; its dependencies are pinned by package-lock.json and come from the npm
# cache when they are there (--prefer-offline). `npm ci` also builds dist/
# (tsc, the package's prepare script).
NPM_CI := npm ci --prefer-offline --no-audit --no-fund
TS_DIR := clients/typescript

# Regenerates clients/typescript/src/gen with protoc and protoc-gen-es (the
# version package-lock.json pins).
ts-proto:
	cd $(TS_DIR) && $(NPM_CI) && sh generate.sh

ts-proto-check: ts-proto
	git diff --exit-code -- $(TS_DIR)/src/gen
	@test -z "$$(git status --porcelain -- $(TS_DIR)/src/gen)" || (git status --porcelain -- $(TS_DIR)/src/gen; exit 1)

# The LangGraph.js checkpointer (clients/langgraph) and LangGraph's own
# validation suite against live nodes. It depends on the TypeScript client
# through a file: link, whose dist/ `npm ci` in clients/typescript builds.
# Without Node.js 20+ and npm it skips, except under CI.
LG_DIR := clients/langgraph

.PHONY: test-langgraph bench-langgraph

test-langgraph: build
	@major=$$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0); \
	if ! command -v npm >/dev/null 2>&1 || [ "$$major" -lt 20 ]; then \
	  if [ -n "$$CI" ]; then echo "test-langgraph: needs Node.js 20 or later and npm (found node major $$major)" >&2; exit 1; fi; \
	  echo "SKIP test-langgraph: needs Node.js 20 or later and npm (found node major $$major)"; \
	  exit 0; \
	fi; \
	set -e; \
	echo "== LangGraph.js checkpointer tests (node $$(node --version))"; \
	(cd $(TS_DIR) && $(NPM_CI)); \
	cd $(LG_DIR); \
	$(NPM_CI); \
	AGENTSTATE_NODE=$(CURDIR)/bin/node npm test

# Read latency of the checkpointer on threads of 10,000 and 100 checkpoints
# (docs/BENCHMARKS.md); about a minute of writing first.
bench-langgraph: build
	(cd $(TS_DIR) && $(NPM_CI))
	cd $(LG_DIR) && $(NPM_CI) && AGENTSTATE_NODE=$(CURDIR)/bin/node npm run bench

# The TypeScript client's tests (node --test) against live nodes, which the
# tests start from bin/node as the Python client's do. Without Node.js 20+ and
# npm it skips, except under CI.
test-typescript: build
	@major=$$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0); \
	if ! command -v npm >/dev/null 2>&1 || [ "$$major" -lt 20 ]; then \
	  if [ -n "$$CI" ]; then echo "test-typescript: needs Node.js 20 or later and npm (found node major $$major)" >&2; exit 1; fi; \
	  echo "SKIP test-typescript: needs Node.js 20 or later and npm (found node major $$major)"; \
	  exit 0; \
	fi; \
	set -e; \
	echo "== TypeScript client tests (node $$(node --version))"; \
	cd $(TS_DIR); \
	$(NPM_CI); \
	AGENTSTATE_NODE=$(CURDIR)/bin/node npm test

# The OpenAI Agents SDK session (clients/openai-agents) against live nodes:
# it depends on the TypeScript client by path (file:), so that is installed
# and built first. Skips without Node.js 20+ and npm, except under CI.
OA_DIR := clients/openai-agents
test-openai-agents: build
	@major=$$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0); \
	if ! command -v npm >/dev/null 2>&1 || [ "$$major" -lt 20 ]; then \
	  if [ -n "$$CI" ]; then echo "test-openai-agents: needs Node.js 20 or later and npm (found node major $$major)" >&2; exit 1; fi; \
	  echo "SKIP test-openai-agents: needs Node.js 20 or later and npm (found node major $$major)"; \
	  exit 0; \
	fi; \
	set -e; \
	echo "== OpenAI Agents session tests (node $$(node --version))"; \
	(cd $(TS_DIR) && $(NPM_CI)); \
	cd $(OA_DIR); \
	$(NPM_CI); \
	AGENTSTATE_NODE=$(CURDIR)/bin/node npm test

clean:
	rm -rf bin
