// Command kubebin is a multi-call binary for tests: the first argument (or the
// name it was invoked as) selects etcd, kube-apiserver, kube-controller-manager
// or kube-scheduler. One binary instead of four saves most of the link time and
// disk of the local Kubernetes control plane that internal/testenv starts.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"go.etcd.io/etcd/server/v3/etcdmain"
	"k8s.io/component-base/cli"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

// components are the names the binary answers to.
var components = map[string]bool{"etcd": true, "kube-apiserver": true, "kube-controller-manager": true, "kube-scheduler": true}

func main() {
	name, args := filepath.Base(os.Args[0]), os.Args
	if !components[name] && len(os.Args) > 1 {
		name, args = os.Args[1], os.Args[1:]
	}
	switch name {
	case "etcd":
		etcdmain.Main(args)
	case "kube-apiserver":
		os.Args = args
		os.Exit(cli.Run(apiserver.NewAPIServerCommand()))
	case "kube-controller-manager":
		os.Args = args
		os.Exit(cli.Run(controllermanager.NewControllerManagerCommand()))
	case "kube-scheduler":
		os.Args = args
		os.Exit(cli.Run(scheduler.NewSchedulerCommand()))
	default:
		fmt.Fprintf(os.Stderr, "kubebin: unknown component %q (want etcd, kube-apiserver, kube-controller-manager or kube-scheduler)\n", name)
		os.Exit(2)
	}
}
