# ShareAI's build (GNU make). Plain `go build ./cmd/shareai` works too; this adds the version
# stamp, the release binaries and the container image.
#
#   make build    ./shareai for this machine
#   make test     the tests (go test ./...)
#   make dist     static release binaries for every platform in dist/, with dist/SHA256SUMS
#   make docker   the container image shareai:$(VERSION) and shareai:latest
#   make clean    remove what these made
#
# Override on the command line: make dist VERSION=v1.2.0, make docker DOCKER=podman IMAGE=me/shareai.

GO      ?= go
DOCKER  ?= docker
IMAGE   ?= shareai
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
VERSION := $(VERSION)

# The release platforms, GOOS/GOARCH. dist_test.go cross-compiles the same list.
PLATFORMS := linux/amd64 linux/arm64 windows/amd64 darwin/amd64 darwin/arm64

LDFLAGS   := -s -w -X main.version=$(VERSION)
EXE       := $(shell $(GO) env GOEXE)
DIST      := dist
DIST_BINS := $(foreach p,$(PLATFORMS),shareai_$(subst /,_,$(p))$(if $(filter windows/%,$(p)),.exe))
SHA256SUM := $(shell command -v sha256sum >/dev/null 2>&1 && echo sha256sum || echo shasum -a 256)

.DEFAULT_GOAL := build
.PHONY: build test dist docker clean

build:
	$(GO) build -trimpath -ldflags "-X main.version=$(VERSION)" -o shareai$(EXE) ./cmd/shareai

test:
	$(GO) test ./...

# One platform at a time: each go build is parallel inside already. Pure Go (SQLite included),
# so CGO_ENABLED=0 gives static binaries that need no libc.
dist:
	rm -rf $(DIST)
	mkdir -p $(DIST)
	printf '# made by make dist\n*\n' > $(DIST)/.gitignore
	@set -e; for p in $(PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; \
		case $$os in windows) ext=.exe ;; *) ext= ;; esac; \
		out=$(DIST)/shareai_$${os}_$${arch}$$ext; \
		echo "CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags \"$(LDFLAGS)\" -o $$out ./cmd/shareai"; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $$out ./cmd/shareai; \
	done
	cd $(DIST) && $(SHA256SUM) $(DIST_BINS) > SHA256SUMS
	@cat $(DIST)/SHA256SUMS

docker:
	$(DOCKER) build --build-arg VERSION=$(VERSION) -t $(IMAGE):$(VERSION) -t $(IMAGE):latest .

clean:
	rm -rf $(DIST) shareai shareai.exe
