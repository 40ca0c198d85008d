{{/* Labels of every object: the same as manifests/, plus .Values.labels. */}}
{{- define "imagepull-sweeper.labels" -}}
app.kubernetes.io/name: imagepull-sweeper
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

{{- define "imagepull-sweeper.podSecurity" -}}
serviceAccountName: imagepull-sweeper
# The ServiceAccount mounts no token by default; this pod is the one that needs it.
automountServiceAccountToken: true
enableServiceLinks: false
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
securityContext:
  runAsNonRoot: true
  runAsUser: 65532
  runAsGroup: 65532
  fsGroup: 65532
  seccompProfile:
    type: RuntimeDefault
{{- end }}

{{- define "imagepull-sweeper.container" -}}
name: imagepull-sweeper
image: {{ printf "%s:%s" .Values.image.repository .Values.image.tag | quote }}
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
resources:
  {{- toYaml .Values.resources | nindent 2 }}
securityContext:
  runAsNonRoot: true
  runAsUser: 65532
  runAsGroup: 65532
  readOnlyRootFilesystem: true
  allowPrivilegeEscalation: false
  privileged: false
  capabilities:
    drop: ["ALL"]
  seccompProfile:
    type: RuntimeDefault
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
