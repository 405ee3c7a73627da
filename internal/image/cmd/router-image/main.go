// Command router-image builds the router image index (linux/amd64 and
// linux/arm64) without a container daemon (package internal/image) from the
// checkout it runs in, and writes it to --out as an OCI layout, a `docker
// load` tarball per platform and the pinned reference
// (repository:version@sha256:...) that a release stamps into the provider;
// with --push it also uploads it. `make image` and `make image-push` run it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"

	"github.com/llmd-dev/terraform-provider-llmd/internal/buildinfo"
	"github.com/llmd-dev/terraform-provider-llmd/internal/image"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "router-image:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("router-image", flag.ContinueOnError)
	out := fs.String("out", "dist/image", "output directory (replaced)")
	repository := fs.String("repository", buildinfo.ImageRepository, "image repository the tag and the pinned reference name")
	version := fs.String("version", "", "release version, the image tag (default: git describe --tags --always --dirty)")
	module := fs.String("module", ".", "the checkout to build from")
	push := fs.Bool("push", false, "also push the image to repository:version (credentials from docker login or a credential helper) and check the registry serves its digest")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	idx, commit, err := image.FromCheckout(ctx, *module, *version)
	if err != nil {
		return err
	}
	o, err := image.Write(*out, idx, *repository, commit.Version)
	if err != nil {
		return err
	}
	summary, err := image.Summary(idx)
	if err != nil {
		return err
	}
	var tarballs []string
	for _, p := range image.Platforms {
		tarballs = append(tarballs, o.Tarballs[p.GOARCH])
	}
	fmt.Printf("%s\n%s  OCI layout %s (one index, %d platforms), docker tarballs %s, reference in %s\n",
		o.Reference, summary, o.Layout, len(image.Platforms), strings.Join(tarballs, " "), o.ReferenceFile)
	if !*push {
		return nil
	}
	if _, err := image.Push(ctx, *repository+":"+commit.Version, idx); err != nil {
		return err
	}
	fmt.Printf("pushed %s\n", o.Reference)
	return nil
}
