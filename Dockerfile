# ShareAI's container image: the one static shareai binary on a distroless base, run as a
# non-root user (65532). The same image runs the coordinator (the default) and the provider
# agent. docs/install.md shows both.
#
#   docker build -t shareai .            (or: make docker)
#   docker run -d -p 8080:8080 -v shareai:/data shareai
#   docker run -d --gpus all -v shareai-node:/data -v $PWD/provider.yaml:/etc/shareai/provider.yaml:ro \
#     -e SHAREAI_PROVIDER_TOKEN=spt-... shareai provider --config /etc/shareai/provider.yaml
#
# The runtime base is distroless "base" (glibc, CA certificates, time zones), not "static":
# with --gpus all the NVIDIA container toolkit mounts the host's nvidia-smi into the
# container, and that program needs glibc. A coordinator-only image can use the smaller base:
#   docker build --build-arg RUNTIME=gcr.io/distroless/static-debian12:nonroot -t shareai .
# Multi-platform: docker buildx build --platform linux/amd64,linux/arm64 -t shareai .
# It needs BuildKit (Docker's builder since 23.0; podman and buildah read it too).

ARG GO_VERSION=1.26
ARG RUNTIME=gcr.io/distroless/base-debian12:nonroot

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
WORKDIR /src
# Modules first, in their own layer: it is rebuilt only when go.mod or go.sum change.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG TARGETOS
ARG TARGETARCH
ARG VERSION=dev
# Pure Go (SQLite included): CGO_ENABLED=0 gives a static binary, cross-compiled for the target.
RUN --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/shareai ./cmd/shareai \
 && mkdir -p /out/data

FROM ${RUNTIME}
COPY --from=build /out/shareai /shareai
# /data holds the coordinator's SQLite database and keys, or the agent's node key. A named
# volume mounted there starts with this owner; a bind-mounted host folder must be owned by
# 65532 (chown 65532:65532 DIR).
COPY --from=build --chown=65532:65532 /out/data /data
ENV SHAREAI_DATA_DIR=/data \
    SHAREAI_ADDR=0.0.0.0:8080
WORKDIR /data
USER 65532:65532
VOLUME ["/data"]
EXPOSE 8080
ENTRYPOINT ["/shareai"]
CMD ["coordinator"]
