{{/* Placement of one component: its nodeSelector and tolerations values. */}}
{{- define "standin.placement" -}}
{{- with .nodeSelector }}
nodeSelector:
{{- toYaml . | nindent 2 }}
{{- end }}
{{- with .tolerations }}
tolerations:
{{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* A monitor selector: the release's own monitors unless NilUsesHelmValues is false. */}}
{{- define "standin.selector" -}}
{{- if .nilUsesHelm }}
matchLabels:
  release: {{ .release | quote }}
{{- else }}
{}
{{- end }}
{{- end }}

{{/* A one-replica Deployment on the test control plane (kwok runs no container). */}}
{{- define "standin.deployment" -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .name }}
  labels:
    app.kubernetes.io/name: {{ .component }}
    app.kubernetes.io/instance: {{ .root.Release.Name }}
    release: {{ .root.Release.Name }}
spec:
  replicas: 1
  selector:
    matchLabels:
      app.kubernetes.io/name: {{ .component }}
      app.kubernetes.io/instance: {{ .root.Release.Name }}
  template:
    metadata:
      labels:
        app.kubernetes.io/name: {{ .component }}
        app.kubernetes.io/instance: {{ .root.Release.Name }}
    spec:
      {{- include "standin.placement" .values | nindent 6 }}
      containers:
{{- .containers | nindent 6 }}
{{- end }}
