# The router image: llmd-router in a small non-root image. Its tag equals the
# provider version, which the provider pins. The router links libzmq (cgo), so
# the runtime stage carries libzmq5 and nothing else beyond Debian slim.
FROM golang:1.26-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends libzmq3-dev pkg-config && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=1 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/llmd-router ./router/cmd/llmd-router

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends libzmq5 ca-certificates && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/llmd-router /usr/local/bin/llmd-router
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/llmd-router"]
CMD ["serve"]
