{{/* Labels of every object: those of manifests/, Helm's recommended ones, and .Values.labels. */}}
{{- define "imagepull-sweeper.labels" -}}
app.kubernetes.io/name: imagepull-sweeper
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: imagepull-sweeper
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- with .Values.labels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* metadata.labels and, when set, metadata.annotations (indented under metadata). */}}
{{- define "imagepull-sweeper.meta" -}}
labels:
  {{- include "imagepull-sweeper.labels" . | nindent 2 }}
{{- with .Values.annotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{- define "imagepull-sweeper.workloadMeta" -}}
labels:
  {{- include "imagepull-sweeper.labels" . | nindent 2 }}
  app.kubernetes.io/component: sweeper
{{- with .Values.annotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{- define "imagepull-sweeper.selector" -}}
app.kubernetes.io/name: imagepull-sweeper
app.kubernetes.io/component: sweeper
{{- end }}

{{/* The sweeper's pod spec, shared by both modes (hardening as in manifests/cronjob.yaml). */}}
{{- define "imagepull-sweeper.podMeta" -}}
labels:
  {{- include "imagepull-sweeper.labels" . | nindent 2 }}
  app.kubernetes.io/component: sweeper
  {{- with .Values.podLabels }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- with .Values.podAnnotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* The ServiceAccount the sweeper runs as: the RBAC, the guard and the pods name it. */}}
{{- define "imagepull-sweeper.serviceAccountName" -}}
{{- default "imagepull-sweeper" .Values.serviceAccount.name }}
{{- end }}

{{- define "imagepull-sweeper.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{- define "imagepull-sweeper.podSecurity" -}}
serviceAccountName: {{ include "imagepull-sweeper.serviceAccountName" . }}
# The ServiceAccount mounts no token by default; this pod is the one that needs it.
automountServiceAccountToken: true
enableServiceLinks: false
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- toYaml . | nindent 2 }}
{{- else }}
{{- if eq .Values.mode "deployment" }}
# One node's loss should not take both replicas (a soft spread: one node still runs both).
topologySpreadConstraints:
  - maxSkew: 1
    topologyKey: kubernetes.io/hostname
    whenUnsatisfiable: ScheduleAnyway
    labelSelector:
      matchLabels:
        {{- include "imagepull-sweeper.selector" . | nindent 8 }}
    matchLabelKeys: ["pod-template-hash"]
{{- end }}
{{- end }}
{{- with .Values.podSecurityContext }}
securityContext:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{- define "imagepull-sweeper.container" -}}
name: imagepull-sweeper
image: {{ include "imagepull-sweeper.image" . | quote }}
imagePullPolicy: {{ .Values.image.pullPolicy }}
env:
  # Names this sweeper in its Events (reportingInstance) and in the Lease.
  - name: POD_NAME
    valueFrom:
      fieldRef:
        fieldPath: metadata.name
  - name: POD_NAMESPACE
    valueFrom:
      fieldRef:
        fieldPath: metadata.namespace
  - name: NODE_OPTIONS
    value: "--max-old-space-size=192 --max-semi-space-size=4"
  {{- with .Values.extraEnv }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
resources:
  {{- toYaml .Values.resources | nindent 2 }}
{{- with .Values.securityContext }}
securityContext:
  {{- toYaml . | nindent 2 }}
{{- end }}
volumeMounts:
  - name: tmp
    mountPath: /tmp
{{- end }}

{{- define "imagepull-sweeper.volumes" -}}
volumes:
  # The root filesystem is read-only; Node gets a small scratch /tmp.
  - name: tmp
    emptyDir:
      sizeLimit: 16Mi
{{- end }}
