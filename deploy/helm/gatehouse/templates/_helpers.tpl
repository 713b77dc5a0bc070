{{/* Names, labels and the environment every Gatehouse container shares. */}}
{{- define "gatehouse.fullname" -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "gatehouse.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "gatehouse.selector" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "gatehouse.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* Secrets by reference (secretKeyRef) and the non-secret configuration as SERVICE_* variables (spec §9). */}}
{{- define "gatehouse.env" -}}
- name: SERVICE_ENVIRONMENT
  value: {{ .Values.environment | quote }}
- name: SERVICE_GATEWAY__HOST
  value: "0.0.0.0"
- name: SERVICE_ADMIN__HOST
  value: "0.0.0.0"
- name: SERVICE_DATABASE__URL
  valueFrom: { secretKeyRef: { name: {{ .Values.secrets.name }}, key: {{ .Values.secrets.keys.databaseUrl }} } }
- name: SERVICE_DATABASE__SSL_MODE
  value: verify-full
- name: SERVICE_DATABASE__SSL_CA_FILE
  value: /etc/gatehouse/db-ca/ca.crt
- name: SERVICE_DATABASE__MIGRATE_ON_START
  value: "false"
- name: SERVICE_REDIS__URL
  valueFrom: { secretKeyRef: { name: {{ .Values.secrets.name }}, key: {{ .Values.secrets.keys.redisUrl }} } }
- name: GATEHOUSE_SIGNING_SECRET
  valueFrom: { secretKeyRef: { name: {{ .Values.secrets.name }}, key: {{ .Values.secrets.keys.signingSecret }} } }
- name: SERVICE_ADMIN__SIGNING_SECRET_REF
  value: env:GATEHOUSE_SIGNING_SECRET
- name: GATEHOUSE_API_KEY_PEPPER
  valueFrom: { secretKeyRef: { name: {{ .Values.secrets.name }}, key: {{ .Values.secrets.keys.apiKeyPepper }} } }
- name: SERVICE_AUTH__API_KEY_PEPPER_REF
  value: env:GATEHOUSE_API_KEY_PEPPER
- name: GATEHOUSE_BOOTSTRAP_PASSWORD
  valueFrom: { secretKeyRef: { name: {{ .Values.secrets.name }}, key: {{ .Values.secrets.keys.bootstrapPassword }} } }
- name: SERVICE_ADMIN__BOOTSTRAP_PASSWORD
  value: env:GATEHOUSE_BOOTSTRAP_PASSWORD
- name: SERVICE_ADMIN__COOKIE__SECURE
  value: "true"
- name: SERVICE_AUDIT__DURABILITY_MODE
  value: strict
- name: SERVICE_AUDIT__SPOOL__DIR
  value: /var/lib/gatehouse/audit-spool
- name: SERVICE_GATEWAY__TLS__TRUSTED_TLS_OFFLOAD
  value: {{ .Values.tls.httpOffload | quote }}
- name: SERVICE_ADMIN__TLS__TRUSTED_TLS_OFFLOAD
  value: {{ .Values.tls.httpOffload | quote }}
- name: SERVICE_GATEWAY__PG_ENABLED
  value: {{ .Values.gateway.pgEnabled | quote }}
- name: SERVICE_GATEWAY__PG_TLS__TRUSTED_TLS_OFFLOAD
  value: {{ .Values.tls.pgOffload | quote }}
{{- if .Values.tls.pgSecretName }}
- name: SERVICE_GATEWAY__PG_TLS__CERT_FILE
  value: /etc/gatehouse/pg-tls/tls.crt
- name: SERVICE_GATEWAY__PG_TLS__KEY_FILE
  value: /etc/gatehouse/pg-tls/tls.key
- name: SERVICE_GATEWAY__PG_TLS__REQUIRE_CLIENT_TLS
  value: "true"
{{- end }}
- name: SERVICE_GATEWAY__TIMEOUTS__SHUTDOWN_GRACE_MS
  value: {{ mul .Values.gateway.shutdownGraceSeconds 1000 | quote }}
{{- range $name, $value := .Values.extraEnv }}
- name: {{ $name }}
  value: {{ $value | quote }}
{{- end }}
{{- end -}}

{{- define "gatehouse.volumeMounts" -}}
- { name: tmp, mountPath: /tmp }
- { name: spool, mountPath: /var/lib/gatehouse }
- { name: db-ca, mountPath: /etc/gatehouse/db-ca, readOnly: true }
{{- if .Values.tls.pgSecretName }}
- { name: pg-tls, mountPath: /etc/gatehouse/pg-tls, readOnly: true }
{{- end }}
{{- end -}}

{{- define "gatehouse.volumes" -}}
- name: tmp
  emptyDir: {}
- name: spool
  emptyDir: { sizeLimit: {{ .Values.spool.sizeLimit }} }
- name: db-ca
  secret:
    secretName: {{ .Values.secrets.databaseCa.name }}
    items: [{ key: {{ .Values.secrets.databaseCa.key }}, path: ca.crt }]
{{- if .Values.tls.pgSecretName }}
- name: pg-tls
  secret: { secretName: {{ .Values.tls.pgSecretName }} }
{{- end }}
{{- end -}}

{{- define "gatehouse.podCommon" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets: {{- toYaml . | nindent 2 }}
{{- end }}
securityContext: {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.nodeSelector }}
nodeSelector: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity: {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}
