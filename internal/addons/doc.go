// Package addons installs third-party charts on a cluster through Helm v3
// (helm.sh/helm/v3 as a library, no helm binary): today kube-prometheus-stack.
//
// Helm alone leaves three traps that a Terraform apply must not fall into, so
// every apply here does what Helm does not:
//   - Helm never upgrades CRDs (helm#944): the chart's CRDs, subcharts'
//     included, are applied server-side under the field manager "llmd" and
//     waited Established on install and on every upgrade; Helm then skips them.
//   - An interrupted apply leaves the release pending-install or
//     pending-upgrade, and Helm refuses every later operation (helm#8987): the
//     next apply uninstalls a pending install, rolls a pending upgrade back to
//     the last deployed revision, and goes on. A failed release is upgraded,
//     never replaced, so its CRDs and the users' monitors survive.
//   - Helm does not report drift: Read compares the user-supplied values of the
//     deployed release with the desired ones, path by path.
//
// Helm reaches the cluster only through the *rest.Config it is given (the
// EKS token transport included), never through kubeconfig files, and keeps
// its repository cache and registry credentials in a private temporary
// directory, never in the user's ~/.config/helm or ~/.cache/helm. Every
// Kubernetes request is bound to the caller's context, so a cancelled apply
// stops writing at once (Helm's own waits take no context).
//
// The package holds no Terraform types.
package addons
